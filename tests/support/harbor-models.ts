/**
 * Harbor's models as shared/reference/harbor.md §3 describes them (models/trial/result.py, trial/config.py,
 * job/config.py, job/result.py), as data: each field and the type its pydantic model declares (`?`: may be null or
 * absent), and the checks that a written file has them. Harbor's models ignore unknown keys (ATIF's forbid them,
 * checked by engine/trace/atif-validate.ts instead); evolve's own ride under `x_` keys.
 */
import { expect } from "vitest";

export type Obj = Record<string, unknown>;

/** A field's type as Harbor's pydantic model declares it (harbor.md): what the value must be. */
type Kind = "str" | "str?" | "uuid" | "uuid?" | "num" | "num?" | "int" | "int?" | "bool" | "obj" | "obj?" | "list" | "list?" | "time?" | "any";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** TrialResult (harbor.md §3.2; models/trial/result.py): required fields have no `?`. */
export const TRIAL_RESULT: Record<string, Kind> = {
  id: "uuid", task_name: "str", trial_name: "str", trial_uri: "str", task_id: "obj", source: "str?", task_checksum: "str", config: "obj", agent_info: "obj",
  agent_result: "obj?", verifier_result: "obj?", exception_info: "obj?", started_at: "time?", finished_at: "time?", environment_setup: "obj?", agent_setup: "obj?",
  agent_execution: "obj?", verifier: "obj?", step_results: "list?",
};
const AGENT_INFO: Record<string, Kind> = { name: "str", version: "str", model_info: "obj?" };
const MODEL_INFO: Record<string, Kind> = { name: "str", provider: "str" };
const AGENT_CONTEXT: Record<string, Kind> = { n_input_tokens: "int?", n_cache_tokens: "int?", n_output_tokens: "int?", cost_usd: "num?", rollout_details: "list?", metadata: "obj?" };
const EXCEPTION_INFO: Record<string, Kind> = { exception_type: "str", exception_message: "str", exception_traceback: "str", occurred_at: "str" };
const TIMING: Record<string, Kind> = { started_at: "time?", finished_at: "time?" };
/** TrialConfig (§3.3): task takes a path or a name, never both; job_id a UUID. */
const TRIAL_CONFIG: Record<string, Kind> = { task: "obj", trial_name: "str", trials_dir: "str", timeout_multiplier: "num", agent: "obj", environment: "obj", verifier: "obj", artifacts: "list", job_id: "uuid?" };
const TRIAL_AGENT: Record<string, Kind> = { name: "str?", model_name: "str?", kwargs: "obj" };
const TRIAL_ENV: Record<string, Kind> = { type: "str", force_build: "bool", delete: "bool" };
/** JobConfig (§3.4). */
export const JOB_CONFIG: Record<string, Kind> = {
  job_name: "str", jobs_dir: "str", n_attempts: "int", timeout_multiplier: "num", debug: "bool", n_concurrent_trials: "int", quiet: "bool", retry: "obj", environment: "obj",
  verifier: "obj", metrics: "list", agents: "list", datasets: "list", tasks: "list", artifacts: "list",
};
/** JobResult (§3.5), trial_results left out of the file. */
export const JOB_RESULT: Record<string, Kind> = { id: "uuid", started_at: "time?", updated_at: "time?", finished_at: "time?", n_total_trials: "int", stats: "obj" };
export const JOB_STATS: Record<string, Kind> = {
  n_completed_trials: "int", n_errored_trials: "int", n_running_trials: "int", n_pending_trials: "int", n_cancelled_trials: "int", n_retries: "int", evals: "obj",
  n_input_tokens: "int?", n_cache_tokens: "int?", n_output_tokens: "int?", cost_usd: "num?",
};
export const EVAL_STATS: Record<string, Kind> = { n_trials: "int", n_errors: "int", metrics: "list", pass_at_k: "obj", reward_stats: "obj", exception_stats: "obj" };

function kindOk(v: unknown, k: Kind): boolean {
  const opt = k.endsWith("?");
  if (opt && (v === null || v === undefined)) return true;
  switch (k.replace("?", "")) {
    case "str":
      return typeof v === "string";
    case "uuid":
      return typeof v === "string" && UUID.test(v);
    case "num":
      return typeof v === "number" && Number.isFinite(v);
    case "int":
      return Number.isInteger(v);
    case "bool":
      return typeof v === "boolean";
    case "obj":
      return !!v && typeof v === "object" && !Array.isArray(v);
    case "list":
      return Array.isArray(v);
    case "time":
      return typeof v === "string" && !Number.isNaN(Date.parse(v));
    default:
      return true;
  }
}

/** Every field of `model` has its type in `doc`; every other key of `doc` is evolve's `x_evolve` or an `x_` key. */
export function checkModel(doc: unknown, model: Record<string, Kind>, where: string, extra: readonly string[] = []): Obj {
  expect(kindOk(doc, "obj"), `${where} is an object`).toBe(true);
  const o = doc as Obj;
  for (const [f, k] of Object.entries(model)) {
    if (!k.endsWith("?")) expect(f in o, `${where}.${f} is present`).toBe(true);
    expect(kindOk(o[f], k), `${where}.${f} is ${k}, got ${JSON.stringify(o[f])}`).toBe(true);
  }
  for (const key of Object.keys(o)) expect(key in model || key.startsWith("x_") || extra.includes(key), `${where}.${key} is Harbor's or rides under x_`).toBe(true);
  return o;
}

export function checkTrialConfig(c: unknown, where: string): void {
  const o = checkModel(c, TRIAL_CONFIG, where);
  const task = o.task as Obj;
  // Harbor's TaskConfig: exactly one of path and name
  expect(("path" in task && task.path != null) !== ("name" in task && task.name != null), `${where}.task has a path or a name`).toBe(true);
  checkModel(o.agent, TRIAL_AGENT, `${where}.agent`);
  checkModel(o.environment, TRIAL_ENV, `${where}.environment`);
}

export function checkTrialResult(r: unknown, where: string): Obj {
  const o = checkModel(r, TRIAL_RESULT, where);
  checkTrialConfig(o.config, `${where}.config`);
  const info = checkModel(o.agent_info, AGENT_INFO, `${where}.agent_info`);
  if (info.model_info) checkModel(info.model_info, MODEL_INFO, `${where}.agent_info.model_info`);
  if (o.agent_result) checkModel(o.agent_result, AGENT_CONTEXT, `${where}.agent_result`);
  if (o.exception_info) checkModel(o.exception_info, EXCEPTION_INFO, `${where}.exception_info`);
  for (const k of ["environment_setup", "agent_setup", "agent_execution", "verifier"]) if (o[k]) checkModel(o[k], TIMING, `${where}.${k}`);
  if (o.verifier_result) {
    const rw = (o.verifier_result as Obj).rewards as Obj;
    for (const v of Object.values(rw)) expect(typeof v).toBe("number");
  }
  return o;
}

