/**
 * The ATIF validator (harbor.md §4): every rule of Harbor's pydantic models (`extra="forbid"` everywhere, required
 * fields and their types, the root and step validators) for documents of schema versions ATIF-v1.0 … v1.7, with each
 * field checked against the version that introduced it. Findings name a JSON path (`$.steps[3].tool_calls[0]`).
 *
 * Types are JSON's own: a count must be a JSON number, where pydantic's lax mode would also take the string "64";
 * a writer that emits that is wrong for every other reader. ATIF-v1.8 (unverified in Harbor's source, harbor.md §4)
 * is not a version here yet.
 *
 * Like pydantic, `null` on an optional field counts as absent (Harbor exports with `exclude_none`, but a null is
 * accepted on read); a required field may not be null. Free-form `extra` dicts and tool definitions are not walked,
 * and embedded subagent trajectories are checked from an explicit work list, so neither a huge nor a deeply nested
 * document grows the stack; nesting past {@link MAX_SUBAGENT_DEPTH} is itself a finding.
 */

/** One problem in a trajectory document. */
export interface TrajectoryFinding {
  /** Where, as a JSON path from the document root (`$`). */
  path: string;
  message: string;
}

/** The versions this validator knows, oldest first; a document without `schema_version` is the newest (Harbor's default). */
export const ATIF_VERSIONS = ["ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5", "ATIF-v1.6", "ATIF-v1.7"] as const;
export type AtifVersion = (typeof ATIF_VERSIONS)[number];

/** Embedded subagent trajectories deeper than this are refused with a finding rather than walked. */
export const MAX_SUBAGENT_DEPTH = 32;

/** More findings than this stop the walk (one finding says so): a broken million-step file stays readable. */
export const MAX_FINDINGS = 1000;

const MEDIA_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp"];
const SOURCES = ["system", "user", "agent"];
/** Step fields only an agent step may set (Harbor's `validate_agent_only_fields`). */
const AGENT_ONLY = ["model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"];

/** Minor version of each field that arrived after v1.0 (RFC version history); `1.6` content parts are checked apart. */
const SINCE = {
  root: { extra: 1, subagent_trajectories: 7, trajectory_id: 7 },
  agent: { tool_definitions: 5 },
  step: { is_copied_context: 5, llm_call_count: 7 },
  metrics: { completion_token_ids: 3, prompt_token_ids: 4 },
  tool_call: { extra: 7 },
  result: { extra: 7 },
  ref: { trajectory_id: 7 },
} as const;

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const present = (o: Obj, k: string) => o[k] !== undefined && o[k] !== null;
const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);
const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const kindOf = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : `a ${typeof v}`);
const key = (path: string, k: string) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`);

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?(?:Z|z|[+-](\d{2})(?::?(\d{2})(?::?\d{2}(?:\.\d+)?)?)?)?)?$/;

/**
 * Whether `s` is an ISO-8601 date or date-time as Python's `datetime.fromisoformat` (3.11) reads it in its extended
 * form, `Z` included, with real calendar values (no February 30th, no hour 25).
 */
export function isIsoTimestamp(s: string): boolean {
  const m = ISO.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (mo < 1 || mo > 12 || d < 1 || d > new Date(Date.UTC(y, mo, 0)).getUTCDate()) return false;
  if (m[4] !== undefined && Number(m[4]) > 23) return false;
  if (m[5] !== undefined && Number(m[5]) > 59) return false;
  if (m[6] !== undefined && Number(m[6]) > 59) return false;
  if (m[7] !== undefined && Number(m[7]) > 23) return false;
  if (m[8] !== undefined && Number(m[8]) > 59) return false;
  return true;
}

class Checker {
  readonly findings: TrajectoryFinding[] = [];
  full = false;

  add(path: string, message: string): void {
    if (this.full) return;
    if (this.findings.length >= MAX_FINDINGS) {
      this.findings.push({ path: "$", message: `more than ${MAX_FINDINGS} findings; the rest are not listed` });
      this.full = true;
      return;
    }
    this.findings.push({ path, message });
  }

  /** Unknown keys (`extra="forbid"`) and keys newer than the document's version. */
  keys(o: Obj, path: string, allowed: readonly string[], since: Record<string, number>, minor: number, version: string, what: string): void {
    for (const k of Object.keys(o)) {
      if (!allowed.includes(k)) this.add(key(path, k), `unknown field of ${what} (ATIF forbids extra fields; free-form data goes under "extra")`);
      else if ((since[k] ?? 0) > minor && o[k] !== null) this.add(key(path, k), `${k} is new in ATIF-v1.${since[k]}; this document is ${version}`);
    }
  }

  obj(o: Obj, k: string, path: string, required: boolean): Obj | undefined {
    if (!present(o, k)) {
      if (required) this.add(key(path, k), o[k] === null ? "required, and may not be null" : "required field missing");
      return undefined;
    }
    if (!isObj(o[k])) {
      this.add(key(path, k), `must be an object, not ${kindOf(o[k])}`);
      return undefined;
    }
    return o[k] as Obj;
  }

  str(o: Obj, k: string, path: string, required: boolean): string | undefined {
    if (!present(o, k)) {
      if (required) this.add(key(path, k), o[k] === null ? "required, and may not be null" : "required field missing");
      return undefined;
    }
    if (typeof o[k] !== "string") {
      this.add(key(path, k), `must be a string, not ${kindOf(o[k])}`);
      return undefined;
    }
    return o[k] as string;
  }

  int(o: Obj, k: string, path: string, min?: number): number | undefined {
    if (!present(o, k)) return undefined;
    const v = o[k];
    if (!isInt(v)) {
      this.add(key(path, k), `must be a whole number, not ${typeof v === "number" ? String(v) : kindOf(v)}`);
      return undefined;
    }
    if (min !== undefined && v < min) this.add(key(path, k), `must be at least ${min}, not ${v}`);
    return v;
  }

  num(o: Obj, k: string, path: string): void {
    if (present(o, k) && !isNum(o[k])) this.add(key(path, k), `must be a number, not ${kindOf(o[k])}`);
  }

  bool(o: Obj, k: string, path: string): void {
    if (present(o, k) && typeof o[k] !== "boolean") this.add(key(path, k), `must be true or false, not ${kindOf(o[k])}`);
  }

  dict(o: Obj, k: string, path: string): void {
    if (present(o, k) && !isObj(o[k])) this.add(key(path, k), `must be an object, not ${kindOf(o[k])}`);
  }

  arr(o: Obj, k: string, path: string, required = false): unknown[] | undefined {
    if (!present(o, k)) {
      if (required) this.add(key(path, k), o[k] === null ? "required, and may not be null" : "required field missing");
      return undefined;
    }
    if (!Array.isArray(o[k])) {
      this.add(key(path, k), `must be an array, not ${kindOf(o[k])}`);
      return undefined;
    }
    return o[k] as unknown[];
  }

  /** A list whose every element must pass `ok` (token ids, logprobs). */
  list(o: Obj, k: string, path: string, ok: (v: unknown) => boolean, what: string): void {
    const a = this.arr(o, k, path);
    if (!a) return;
    for (let i = 0; i < a.length; i++) {
      if (!ok(a[i])) {
        this.add(`${key(path, k)}[${i}]`, `must be ${what}, not ${kindOf(a[i])}`);
        return; // one finding per list: a list of a million bad ids is one mistake
      }
    }
  }

  /** `str | list[ContentPart]` (message, observation content); lists only from v1.6. */
  content(o: Obj, k: string, path: string, minor: number, version: string, required: boolean): void {
    const v = o[k];
    if (v === undefined || v === null) {
      if (required) this.add(key(path, k), v === null ? "required, and may not be null (use \"\" for no text)" : "required field missing");
      return;
    }
    if (typeof v === "string") return;
    if (!Array.isArray(v)) {
      this.add(key(path, k), `must be a string${minor >= 6 ? " or a list of content parts" : ""}, not ${kindOf(v)}`);
      return;
    }
    if (minor < 6) {
      this.add(key(path, k), `a list of content parts is new in ATIF-v1.6; this document is ${version}, where it must be a string`);
      return;
    }
    for (let i = 0; i < v.length; i++) this.part(v[i], `${key(path, k)}[${i}]`);
  }

  /** ContentPart: `text` with `text`, or `image` with an ImageSource; nothing else. */
  part(p: unknown, path: string): void {
    if (!isObj(p)) return this.add(path, `a content part must be an object, not ${kindOf(p)}`);
    this.keys(p, path, ["type", "text", "source"], {}, 7, "", "a content part");
    const type = this.str(p, "type", path, true);
    if (type === undefined) return;
    if (type === "text") {
      this.str(p, "text", path, true);
      if (present(p, "source")) this.add(`${path}.source`, "a text part has no source");
    } else if (type === "image") {
      if (present(p, "text")) this.add(`${path}.text`, "an image part has no text");
      const src = this.obj(p, "source", path, true);
      if (!src) return;
      const sp = `${path}.source`;
      this.keys(src, sp, ["media_type", "path"], {}, 7, "", "an image source");
      const mt = this.str(src, "media_type", sp, true);
      if (mt !== undefined && !MEDIA_TYPES.includes(mt)) this.add(`${sp}.media_type`, `must be one of ${MEDIA_TYPES.join(", ")}, not ${JSON.stringify(mt)}`);
      this.str(src, "path", sp, true);
    } else {
      this.add(`${path}.type`, `must be "text" or "image", not ${JSON.stringify(type)}`);
    }
  }
}

interface Pending {
  doc: unknown;
  path: string;
  depth: number;
}

/**
 * Every way `doc` (a parsed JSON value) breaks ATIF, in document order; empty when it is a valid trajectory of its
 * `schema_version`. Never throws.
 */
export function validateTrajectory(doc: unknown): TrajectoryFinding[] {
  const c = new Checker();
  const work: Pending[] = [{ doc, path: "$", depth: 0 }];
  while (work.length > 0 && !c.full) {
    const next = work.shift()!;
    checkTrajectory(c, next, work);
  }
  return c.findings;
}

function checkTrajectory(c: Checker, { doc, path, depth }: Pending, work: Pending[]): void {
  if (!isObj(doc)) return c.add(path, `a trajectory must be a JSON object, not ${kindOf(doc)}`);
  let version: string = ATIF_VERSIONS[ATIF_VERSIONS.length - 1];
  if (present(doc, "schema_version")) {
    const v = doc.schema_version;
    if (typeof v === "string" && (ATIF_VERSIONS as readonly string[]).includes(v)) version = v;
    else c.add(`${path}.schema_version`, `must be one of ATIF-v1.0 … ATIF-v1.7, not ${JSON.stringify(v)} (checked as ATIF-v1.7)`);
  }
  const minor = ATIF_VERSIONS.indexOf(version as AtifVersion);
  c.keys(
    doc,
    path,
    ["schema_version", "session_id", "trajectory_id", "agent", "steps", "notes", "final_metrics", "continued_trajectory_ref", "extra", "subagent_trajectories"],
    SINCE.root,
    minor,
    version,
    "the trajectory",
  );
  // session_id was required until v1.7 made it optional (run-scoped).
  c.str(doc, "session_id", path, minor < 7);
  c.str(doc, "trajectory_id", path, false);
  c.str(doc, "notes", path, false);
  c.str(doc, "continued_trajectory_ref", path, false);
  c.dict(doc, "extra", path);

  const agent = c.obj(doc, "agent", path, true);
  if (agent) {
    const ap = `${path}.agent`;
    c.keys(agent, ap, ["name", "version", "model_name", "tool_definitions", "extra"], SINCE.agent, minor, version, "agent");
    c.str(agent, "name", ap, true);
    c.str(agent, "version", ap, true);
    c.str(agent, "model_name", ap, false);
    const defs = c.arr(agent, "tool_definitions", ap);
    defs?.forEach((d, i) => isObj(d) || c.add(`${ap}.tool_definitions[${i}]`, `a tool definition must be an object, not ${kindOf(d)}`));
    c.dict(agent, "extra", ap);
  }

  const steps = c.arr(doc, "steps", path, true);
  if (steps) {
    if (steps.length === 0) c.add(`${path}.steps`, "must hold at least one step");
    for (let i = 0; i < steps.length && !c.full; i++) checkStep(c, steps[i], `${path}.steps[${i}]`, i, minor, version);
  }

  const fm = c.obj(doc, "final_metrics", path, false);
  if (fm) {
    const fp = `${path}.final_metrics`;
    c.keys(fm, fp, ["total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd", "total_steps", "extra"], {}, minor, version, "final_metrics");
    c.int(fm, "total_prompt_tokens", fp);
    c.int(fm, "total_completion_tokens", fp);
    c.int(fm, "total_cached_tokens", fp);
    c.num(fm, "total_cost_usd", fp);
    c.int(fm, "total_steps", fp, 0);
    c.dict(fm, "extra", fp);
  }

  const subs = c.arr(doc, "subagent_trajectories", path);
  if (subs && minor >= 7) {
    const seen = new Map<string, number>();
    for (let i = 0; i < subs.length; i++) {
      const sp = `${path}.subagent_trajectories[${i}]`;
      const sub = subs[i];
      if (isObj(sub)) {
        const id = sub.trajectory_id;
        if (id === undefined || id === null) c.add(`${sp}.trajectory_id`, "an embedded subagent trajectory needs a trajectory_id");
        else if (typeof id === "string") {
          const first = seen.get(id);
          if (first !== undefined) c.add(`${sp}.trajectory_id`, `${JSON.stringify(id)} is also the trajectory_id of subagent_trajectories[${first}]; they must be unique`);
          else seen.set(id, i);
        }
      }
      if (depth + 1 > MAX_SUBAGENT_DEPTH) {
        c.add(sp, `subagent trajectories nested more than ${MAX_SUBAGENT_DEPTH} deep are not checked`);
        break;
      }
      work.push({ doc: sub, path: sp, depth: depth + 1 });
    }
  }
}

function checkStep(c: Checker, step: unknown, path: string, index: number, minor: number, version: string): void {
  if (!isObj(step)) return c.add(path, `a step must be an object, not ${kindOf(step)}`);
  c.keys(
    step,
    path,
    ["step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content", "tool_calls", "observation", "metrics", "is_copied_context", "llm_call_count", "extra"],
    SINCE.step,
    minor,
    version,
    "a step",
  );
  if (!present(step, "step_id")) c.add(`${path}.step_id`, "required field missing");
  else {
    const id = c.int(step, "step_id", path, 1);
    if (id !== undefined && id >= 1 && id !== index + 1) c.add(`${path}.step_id`, `must be ${index + 1} (step ids run from 1 without gaps), not ${id}`);
  }
  const ts = c.str(step, "timestamp", path, false);
  if (ts !== undefined && !isIsoTimestamp(ts)) c.add(`${path}.timestamp`, `must be an ISO-8601 time such as 2026-01-02T03:04:05Z, not ${JSON.stringify(ts.slice(0, 60))}`);
  const source = c.str(step, "source", path, true);
  if (source !== undefined && !SOURCES.includes(source)) c.add(`${path}.source`, `must be "system", "user" or "agent", not ${JSON.stringify(source)}`);
  c.str(step, "model_name", path, false);
  if (present(step, "reasoning_effort") && typeof step.reasoning_effort !== "string" && !isNum(step.reasoning_effort)) {
    c.add(`${path}.reasoning_effort`, `must be a string or a number, not ${kindOf(step.reasoning_effort)}`);
  }
  c.content(step, "message", path, minor, version, true);
  c.str(step, "reasoning_content", path, false);
  c.bool(step, "is_copied_context", path);
  const llmCalls = c.int(step, "llm_call_count", path, 0);
  c.dict(step, "extra", path);

  const toolIds = new Set<string>();
  const calls = c.arr(step, "tool_calls", path);
  calls?.forEach((tc, i) => {
    const tp = `${path}.tool_calls[${i}]`;
    if (!isObj(tc)) return c.add(tp, `a tool call must be an object, not ${kindOf(tc)}`);
    c.keys(tc, tp, ["tool_call_id", "function_name", "arguments", "extra"], SINCE.tool_call, minor, version, "a tool call");
    const id = c.str(tc, "tool_call_id", tp, true);
    if (id !== undefined) toolIds.add(id);
    c.str(tc, "function_name", tp, true);
    c.obj(tc, "arguments", tp, true);
    c.dict(tc, "extra", tp);
  });

  const obs = c.obj(step, "observation", path, false);
  if (obs) {
    const op = `${path}.observation`;
    if (source !== undefined && source !== "agent" && minor < 2) c.add(op, `an observation on a ${source} step is new in ATIF-v1.2; this document is ${version}`);
    c.keys(obs, op, ["results"], {}, minor, version, "an observation");
    const results = c.arr(obs, "results", op, true);
    results?.forEach((r, i) => checkResult(c, r, `${op}.results[${i}]`, minor, version, toolIds));
  }

  const metrics = c.obj(step, "metrics", path, false);
  if (metrics) {
    const mp = `${path}.metrics`;
    c.keys(metrics, mp, ["prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids", "completion_token_ids", "logprobs", "extra"], SINCE.metrics, minor, version, "metrics");
    c.int(metrics, "prompt_tokens", mp);
    c.int(metrics, "completion_tokens", mp);
    c.int(metrics, "cached_tokens", mp);
    c.num(metrics, "cost_usd", mp);
    c.list(metrics, "prompt_token_ids", mp, isInt, "a whole number");
    c.list(metrics, "completion_token_ids", mp, isInt, "a whole number");
    c.list(metrics, "logprobs", mp, isNum, "a number");
    c.dict(metrics, "extra", mp);
  }

  if (source !== undefined && source !== "agent") {
    for (const f of AGENT_ONLY) if (present(step, f)) c.add(`${path}.${f}`, `only an agent step may set ${f}; this is a ${source} step`);
  }
  if (llmCalls === 0 && source === "agent") {
    for (const f of ["metrics", "reasoning_content"]) {
      if (present(step, f)) c.add(`${path}.${f}`, `a step with llm_call_count 0 made no model call, so it has no ${f}`);
    }
  }
}

function checkResult(c: Checker, r: unknown, path: string, minor: number, version: string, toolIds: Set<string>): void {
  if (!isObj(r)) return c.add(path, `an observation result must be an object, not ${kindOf(r)}`);
  c.keys(r, path, ["source_call_id", "content", "subagent_trajectory_ref", "extra"], SINCE.result, minor, version, "an observation result");
  const src = c.str(r, "source_call_id", path, false);
  if (src !== undefined && !toolIds.has(src)) c.add(`${path}.source_call_id`, `${JSON.stringify(src)} is no tool_call_id of this step's tool_calls`);
  c.content(r, "content", path, minor, version, false);
  c.dict(r, "extra", path);
  const refs = c.arr(r, "subagent_trajectory_ref", path);
  refs?.forEach((ref, i) => {
    const rp = `${path}.subagent_trajectory_ref[${i}]`;
    if (!isObj(ref)) return c.add(rp, `a subagent trajectory ref must be an object, not ${kindOf(ref)}`);
    c.keys(ref, rp, ["trajectory_id", "session_id", "trajectory_path", "extra"], SINCE.ref, minor, version, "a subagent trajectory ref");
    c.str(ref, "trajectory_id", rp, false);
    c.str(ref, "trajectory_path", rp, false);
    c.dict(ref, "extra", rp);
    if (minor >= 7) {
      c.str(ref, "session_id", rp, false);
      if (!present(ref, "trajectory_id") && !present(ref, "trajectory_path")) c.add(rp, "a subagent trajectory ref needs a trajectory_id or a trajectory_path");
    } else {
      // before v1.7 the subagent's session_id was the key
      c.str(ref, "session_id", rp, true);
    }
  });
}
