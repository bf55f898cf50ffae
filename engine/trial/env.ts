/**
 * Environment tables of task.toml at run time (platform-tasks.md "Environment variables"): literals land as
 * written; a whole-value `${VAR}` template is answered only by a secret the job attached, else its `:-default`,
 * else the trial cannot run (`secret_not_attached`). Secret values exist only in the maps returned here.
 */
import { JUDGE_NAMES, wholeTemplate } from "../task/rules-env.ts";
import { judgeFamilyOf, type JudgeFamily } from "../../gateway/credentials.ts";

/** A resolved env table, and the templates nothing could answer. */
export interface ResolvedEnv {
  /** Literals only: what the image's own start process may see. */
  literals: Record<string, string>;
  /** Literals plus resolved templates: what the agent and everything it launches sees. */
  all: Record<string, string>;
  /** Template names with no attached secret and no default. */
  missing: string[];
  /** The secret names actually used (for redaction and the record). */
  used: string[];
}

/** Resolves an agent-side table ([environment.env], [solution].env) against the attached secrets. */
export function resolveAgentEnv(table: Record<string, string>, secrets: Record<string, string>): ResolvedEnv {
  const out: ResolvedEnv = { literals: {}, all: {}, missing: [], used: [] };
  for (const [k, v] of Object.entries(table)) {
    const t = wholeTemplate(v);
    if (!t) {
      out.literals[k] = v;
      out.all[k] = v;
    } else if (Object.hasOwn(secrets, t.name)) {
      out.all[k] = secrets[t.name];
      out.used.push(t.name);
    } else if (t.fallback !== undefined) {
      out.all[k] = t.fallback;
    } else {
      out.missing.push(t.name);
    }
  }
  return out;
}

/** A `[verifier.env]` entry the gateway answers: `key` is the variable the verifier reads, `name` the judge name. */
export interface JudgeAsk {
  key: string;
  name: string;
}

/**
 * Resolves a verifier table. The verifier never sees the job's secrets: a template resolves to its default. A
 * judge name (`${ANTHROPIC_API_KEY}`, `${OPENAI_BASE_URL}` …) is the gateway's to answer, default or not, and is
 * returned in `judge` for {@link withJudgeEnv}.
 */
export function resolveVerifierEnv(table: Record<string, string>): { env: Record<string, string>; judge: JudgeAsk[] } {
  const env: Record<string, string> = {};
  const judge: JudgeAsk[] = [];
  for (const [k, v] of Object.entries(table)) {
    const t = wholeTemplate(v);
    if (!t) env[k] = v;
    else if (JUDGE_NAMES.has(t.name)) judge.push({ key: k, name: t.name });
    else if (t.fallback !== undefined) env[k] = t.fallback;
  }
  return { env, judge };
}

/** The judge family a judge name belongs to: a task asking only for a base-URL companion still gets its key. */
export function judgeFamily(name: string): JudgeFamily {
  const family = judgeFamilyOf(name);
  // resolveVerifierEnv only returns names in JUDGE_NAMES, and every one of those has a family
  if (!family) throw new Error(`judgeFamily: ${name} is not a judge name`);
  return family;
}

/**
 * The verifier's env with the gateway's judge variables: each asked key gets its judge name's value, and the
 * family's other variables (key and base-URL companions) are set beside it under their own names unless the task
 * set them, so a client reading either spelling reaches the gateway.
 */
export function withJudgeEnv(env: Record<string, string>, judge: JudgeAsk[], vars: Record<string, string>): Record<string, string> {
  const out = { ...env };
  for (const [k, v] of Object.entries(vars)) if (!Object.hasOwn(out, k)) out[k] = v;
  for (const a of judge) if (vars[a.name] !== undefined) out[a.key] = vars[a.name];
  return out;
}
