/**
 * The JSON vocabulary's one edge, shared by every `--json` document the CLI prints and every body the local API
 * (engine/serve) answers, so both spell a record the same way: engine types are camelCase, documents snake_case.
 */

/**
 * Keys whose values are maps keyed by data (reward and metric names from reward.json, token kinds, env names,
 * statuses, exception types, store db names, phases): their keys print as they are, never re-cased.
 */
const DATA_MAPS = new Set(["rewards", "metrics", "tokens", "verifier_env", "counts", "exceptions", "pass_at_k", "dbs", "phase_timings"]);

/** `trialId` → `trial_id`; a key that is not lowerCamel (snake_case, UPPER, `@1`, paths) is left as it is. */
export function snakeKey(key: string): string {
  return /^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+$/.test(key) ? key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) : key;
}

/**
 * The JSON vocabulary's one edge: every `--json` document and line goes through here, so a camelCase field of an
 * engine type (`trialId`, `runnerPid`) prints snake_case (`trial_id`, `runner_pid`) without each command renaming it.
 * Children of DATA_MAPS keep their keys. `undefined` fields drop out as JSON.stringify would drop them.
 */
export function jsonKeys(value: unknown, dataMap = false): unknown {
  if (Array.isArray(value)) return value.map((v) => jsonKeys(v));
  if (value === null || typeof value !== "object" || value instanceof Date) return value;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return value;
  const outObj: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const key = dataMap ? k : snakeKey(k);
    outObj[key] = jsonKeys(v, !dataMap && DATA_MAPS.has(key));
  }
  return outObj;
}
