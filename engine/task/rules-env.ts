/**
 * Environment-variable rules: `${VAR}` templates in [environment.env], [verifier.env], [solution.env] and the
 * step verifier env; secrets the job must attach; LLM-judge credentials (platform-tasks.md, "Environment
 * variables" and "LLM judges").
 */
import type { ValidateOptions } from "./codes.ts";
import { type Findings, showPath, showValue, str, tbl } from "./findings.ts";
import type { KeyPath } from "./toml-lines.ts";
import { JUDGE_FAMILIES, judgeEnv } from "../../gateway/credentials.ts";

/** Names a judge credential can be asked for under; the gateway answers each as the entire value. */
export const JUDGE_NAMES: ReadonlySet<string> = new Set(JUDGE_FAMILIES.flatMap((f) => Object.keys(judgeEnv(f, "", ""))));

/** A whole-value template: `${VAR}` or `${VAR:-default}`. */
export interface Template {
  name: string;
  /** The fallback after `:-`, or undefined when there is none. */
  fallback: string | undefined;
}

const WHOLE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}$/s;
const ANY_TEMPLATE = /\$\{([^}]*)\}?/g;

/** Reads `value` as a whole-value template, or undefined for a literal (or an embedded template). */
export function wholeTemplate(value: string): Template | undefined {
  const m = WHOLE.exec(value);
  if (!m || m[2]?.includes("}")) return undefined;
  return { name: m[1], fallback: m[2] };
}

/** Variable names of every `${...}` in a string (whole or embedded). */
function templateNames(value: string): string[] {
  return [...value.matchAll(ANY_TEMPLATE)].map((m) => m[1].split(":-")[0]);
}

type EnvKind = "environment" | "verifier" | "solution";

/** Checks one env table at `path` of kind `kind`. */
function checkEnvTable(env: unknown, path: KeyPath, kind: EnvKind, opts: ValidateOptions, out: Findings): void {
  const t = tbl(env);
  if (!t) return;
  for (const [key, v] of Object.entries(t)) {
    const value = str(v);
    if (value === undefined || !value.includes("${")) continue;
    const kp = [...path, key];
    const where = showPath(kp);
    const whole = wholeTemplate(value);
    if (!whole) {
      const judge = templateNames(value).find((n) => JUDGE_NAMES.has(n));
      if (kind === "verifier" && judge !== undefined) {
        out.toml(
          "judge_value_not_whole",
          kp,
          `${where} = ${showValue(value)}: the judge credential \${${judge}} must be the entire value`,
          `set ${key} = "\${${judge}}" and add any prefix (e.g. "Bearer ") in the verifier's code`,
        );
      } else {
        out.toml(
          "env_template_embedded",
          kp,
          `${where} = ${showValue(value)}: a \${...} template must be the entire value, not part of a longer string`,
          `move the template into its own variable (e.g. ${key} = "\${${templateNames(value)[0] || "VAR"}}") and compose the string at run time`,
        );
      }
      continue;
    }
    if (whole.fallback !== undefined) continue;
    if (kind === "environment") {
      const secrets = opts.secrets;
      const deferred = secrets === "deferred";
      if (secrets === "deferred" || !secrets.has(whole.name)) {
        out.toml(
          "secret_required",
          kp,
          `${where} = "\${${whole.name}}" needs the secret ${whole.name}: run with \`--secret ${whole.name}\``,
          deferred
            ? `jobs running this task must pass \`--secret ${whole.name}\``
            : `pass \`--secret ${whole.name}\`, or give a fallback: "\${${whole.name}:-default}"`,
          deferred ? "note" : "error",
        );
      }
    } else if (kind === "verifier" && !JUDGE_NAMES.has(whole.name)) {
      out.toml(
        "judge_template_unrecognized",
        kp,
        `${where} = "\${${whole.name}}": ${whole.name} is not a judge credential (${[...JUDGE_NAMES].join(", ")}) and has no default`,
        `use a judge name, or give a default: "\${${whole.name}:-value}"`,
      );
    }
  }
}

/** True when some verifier env (task or step) asks for a judge credential: the task grades with an LLM. */
export function isJudgeTask(raw: Record<string, unknown>): boolean {
  const envs: unknown[] = [tbl(raw.verifier)?.env];
  const steps = raw.steps;
  if (Array.isArray(steps)) for (const s of steps) envs.push(tbl(tbl(s)?.verifier)?.env);
  return envs.some((e) => {
    const t = tbl(e);
    return t !== undefined && Object.values(t).some((v) => typeof v === "string" && JUDGE_NAMES.has(wholeTemplate(v)?.name ?? ""));
  });
}

/** All env-template rules over the raw task.toml. */
export function checkEnvTemplates(raw: Record<string, unknown>, opts: ValidateOptions, out: Findings): void {
  const env = tbl(raw.environment);
  checkEnvTable(env?.env, ["environment", "env"], "environment", opts, out);
  const ver = tbl(raw.verifier);
  checkEnvTable(ver?.env, ["verifier", "env"], "verifier", opts, out);
  checkEnvTable(tbl(ver?.environment)?.env, ["verifier", "environment", "env"], "environment", opts, out);
  checkEnvTable(tbl(raw.solution)?.env, ["solution", "env"], "solution", opts, out);
  const steps = raw.steps;
  if (Array.isArray(steps)) {
    steps.forEach((s, i) => {
      checkEnvTable(tbl(tbl(s)?.verifier)?.env, ["steps", i, "verifier", "env"], "verifier", opts, out);
    });
  }
}
