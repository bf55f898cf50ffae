/**
 * Environment tables of task.toml at run time (platform-tasks.md "Environment variables"): literals land as
 * written; a whole-value `${VAR}` template is answered only by a secret the job attached, else its `:-default`,
 * else the trial cannot run (`secret_not_attached`). Secret values exist only in the maps returned here.
 */
import { JUDGE_NAMES, wholeTemplate } from "../task/rules-env.ts";

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

/**
 * Resolves a verifier table. The verifier never sees the job's secrets (its credentials are revoked): a template
 * resolves to its default. Judge credentials (`${ANTHROPIC_API_KEY}` …) are the gateway's to answer (next issue);
 * until then they are left unset and reported in `pendingJudge`.
 */
export function resolveVerifierEnv(table: Record<string, string>): { env: Record<string, string>; pendingJudge: string[] } {
  const env: Record<string, string> = {};
  const pendingJudge: string[] = [];
  for (const [k, v] of Object.entries(table)) {
    const t = wholeTemplate(v);
    if (!t) env[k] = v;
    else if (t.fallback !== undefined) env[k] = t.fallback;
    else if (JUDGE_NAMES.has(t.name)) pendingJudge.push(k);
  }
  return { env, pendingJudge };
}
