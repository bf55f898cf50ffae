/**
 * `evolve upload`: a job run elsewhere (a Harbor job folder, or its `.tar.gz`; platform-upload.md) landed as a
 * finished job of this store, the inverse of job-folder.ts's writer. Everything is read and checked before anything
 * is written (the job root's config.json and result.json, each trial's result.json with its seven required keys), so
 * a refused import leaves nothing behind; then each trial gets a record, its files where a native trial's are
 * (engine/box/layout.ts), and its trace.
 *
 * What is decided here, and only here (a trial's status is the lifecycle's: engine/trial/lifecycle.ts
 * portedTrialStatus, from its rewards, its exception name and evolve's own `x_evolve.status`):
 * - the trace: evolve's parsed trace when the folder carries it (`agent/trace-parsed.jsonl`, a round trip), else the
 *   harness's own transcript (a codex rollout, a claude project session) through its parser, else
 *   `agent/trajectory.json` (ATIF; a `system` step is the system prompt);
 * - task linkage by content hash (the task digest a lock.json names), `-d name@version` linking by task name.
 */
import { createReadStream, createWriteStream, mkdirSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { hostname } from "node:os";
import { EvolveError } from "../errors.ts";
import { DEFAULT_JOB_ARCHIVE_BYTES } from "../config.ts";
import { newId, trialDir, type DatasetRecord, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { BoxFileRefused, openBoxFile, readRange } from "../box/fs.ts";
import { TRIAL } from "../box/layout.ts";
import { portedJob, portedTrialStatus } from "../trial/lifecycle.ts";
import { primaryReward } from "../job/summary.ts";
import type { JobConfig, JobKind } from "../job/job.ts";
import { resolveDataset } from "../dataset.ts";
import { parserFor } from "../harness/catalog.ts";
import { atifToUpdates } from "../trace/atif-in.ts";
import { TRAJECTORY_READ_LIMIT } from "../trace/atif-file.ts";
import { MAX_SESSION_BYTES } from "../trace/convert.ts";
import { rolloutToUpdates } from "../trace/parsers/codex-rollout.ts";
import { openTraceWriter } from "../trace/store.ts";
import type { TraceUpdate } from "../trace/events.ts";
import { getImport, IMPORT_STATUSES, importWorkDir, putImport, type ImportRecord, type SkippedEntry, type SkippedTrial } from "./imports.ts";
import { isUploadArchive, MAX_UPLOAD_FILE, unpackArchive, walkFolder, type SourceFile, type UploadBounds, type UploadSource } from "./upload-source.ts";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined);
const str = (v: unknown): string | undefined => (typeof v === "string" && v.length > 0 ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** The keys every trial's result.json must have (platform-upload.md "What result.json must hold"). */
export const REQUIRED_TRIAL_KEYS = ["task_name", "trial_name", "trial_uri", "task_id", "task_checksum", "config", "agent_info"] as const;


/** Why a trial is not linked to a stored task (platform-upload.md "Task linkage"). */
export type LinkReason = "hash_mismatch" | "task_not_in_dataset" | "no_task_digest" | "no_hash_match" | "no_dataset_named" | "dataset_ambiguous";

/** One trial's linkage, as the job's `upload.task_links` records it. */
export interface TaskLink {
  trial_id: string;
  trial_name: string;
  task_name: string;
  /** The content hash the upload named (lock.json), or null. */
  digest: string | null;
  linked: boolean;
  /** The dataset version the linked task was found in, when one. */
  dataset: string | null;
  reason: LinkReason | null;
}

/** What the job record carries of its upload. */
export type UploadInfo = {
  import_id: string;
  original_job_id: string | null;
  original_job_name: string | null;
  uploaded_at: string;
  /** The totals the uploader's result.json states (n_total_trials and its `stats`, evals left out). */
  reported_totals: Obj;
  task_links: TaskLink[];
};

/** The bounds one upload is read under (tests shrink them). */
export interface UploadLimits extends UploadBounds {
  /** The largest trace (trajectory.json or transcript) parsed; a trial with a larger one is skipped (`trial_too_large`). */
  traceBytes: number;
}

/** The limits from the config's archive ceiling. */
export function uploadLimits(archiveBytes: number = DEFAULT_JOB_ARCHIVE_BYTES): UploadLimits {
  return { archiveBytes, fileBytes: MAX_UPLOAD_FILE, traceBytes: Math.min(TRAJECTORY_READ_LIMIT, MAX_SESSION_BYTES) };
}

/** An import's statuses by name (imports.ts): its own words, not a trial's or a job's. */
const [IMPORT_RUNNING, IMPORT_COMPLETED, IMPORT_FAILED] = IMPORT_STATUSES;

/** The largest record file (result.json, config.json, lock.json) read. */
const RECORD_LIMIT = 64 * 1024 * 1024;

/** Reads a regular file of the upload (never through a link, bounded). */
async function readSource(src: UploadSource, rel: string, limit: number): Promise<Buffer | undefined> {
  let fh;
  try {
    fh = await openBoxFile(src.root, join(src.root, ...rel.split("/")));
  } catch (e) {
    if (e instanceof BoxFileRefused) return undefined;
    throw e;
  }
  if (!fh) return undefined;
  try {
    const size = (await fh.stat()).size;
    if (size > limit) return undefined;
    return await readRange(fh, 0, size);
  } finally {
    await fh.close();
  }
}

/** A JSON object file of the upload: the object, or why it is not one. */
async function readJsonObject(src: UploadSource, rel: string): Promise<{ value: Obj } | { error: string }> {
  if (!src.files.some((f) => f.rel === rel)) return { error: "missing" };
  const buf = await readSource(src, rel, RECORD_LIMIT);
  if (!buf) return { error: `not a regular file of at most ${RECORD_LIMIT} bytes` };
  try {
    const text = buf.toString("utf8");
    const v = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    return obj(v) ? { value: v } : { error: "not a JSON object" };
  } catch (e) {
    return { error: `not JSON (${(e as Error).message.split("\n")[0]})` };
  }
}

/** A trial of the upload, read and checked. */
interface ReadTrial {
  folder: string;
  result: Obj;
  config: Obj;
  files: SourceFile[];
  lock: Obj | undefined;
}

/** The job root inside the source: "" or the one top folder that holds config.json and result.json. */
function jobRoot(src: UploadSource): string {
  const has = (p: string) => src.files.some((f) => f.rel === p);
  if (has("config.json") && has("result.json")) return "";
  const tops = new Set([...src.files, ...src.tooLarge].map((f) => f.rel.split("/")[0]));
  if (tops.size === 1) {
    const [top] = tops;
    if (has(`${top}/config.json`) && has(`${top}/result.json`)) return `${top}/`;
  }
  throw new EvolveError("upload_invalid", "no job here: a job folder's root holds config.json and result.json (both required)", "give the folder `harbor run` or `evolve job download` wrote (the one holding config.json), or its .tar.gz");
}


/** The rewards map of a result.json: names to finite numbers; null when none. */
function rewardsOf(result: Obj): Record<string, number> | null {
  const r = obj(obj(result.verifier_result)?.rewards);
  if (!r) return null;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(r)) if (num(v) !== undefined) out[k] = v as number;
  return Object.keys(out).length ? out : null;
}

/** The task digest a trial's lock.json (evolve's, per trial) or the job's lock.json (Harbor's, a list) names. */
function digestOf(trial: ReadTrial, jobLock: Obj | undefined): string | undefined {
  const own = str(obj(trial.lock?.task)?.digest);
  if (own) return own;
  const name = str(trial.result.task_name);
  const path = str(obj(trial.result.task_id)?.path);
  for (const t of Array.isArray(jobLock?.trials) ? jobLock!.trials : []) {
    const task = obj(obj(t)?.task);
    if (!task || !str(task.digest)) continue;
    if ((name && task.name === name) || (path && task.path === path)) return str(task.digest);
  }
  return undefined;
}

/** The active dataset versions holding a task of `digest`. */
function datasetsHolding(store: Store, digest: string): DatasetRecord[] {
  return store.listDatasets().filter((d) => d.status === "active" && d.tasks.some((t) => t.digest === digest));
}

/**
 * Links one trial's task (platform-upload.md "Task linkage"): with `-d`, by task name in that version; else by the
 * content hash, a dataset the job names telling a hash the store lacks apart (hash_mismatch / task_not_in_dataset).
 * A name alone never links.
 */
function linkTask(store: Store, taskName: string, digest: string | undefined, o: { override?: DatasetRecord; named?: DatasetRecord | null; namedRef?: string }): Omit<TaskLink, "trial_id" | "trial_name"> {
  const base = { task_name: taskName, digest: digest ?? null };
  if (o.override) {
    const t = o.override.tasks.find((x) => x.name === taskName);
    const ref = `${o.override.name}@${o.override.version}`;
    return t ? { ...base, linked: true, digest: t.digest, dataset: ref, reason: null } : { ...base, linked: false, dataset: ref, reason: "task_not_in_dataset" };
  }
  if (!digest) return { ...base, linked: false, dataset: null, reason: "no_task_digest" };
  if (store.getTask(digest)) {
    const holding = datasetsHolding(store, digest);
    const named = o.named ? holding.find((d) => d.name === o.named!.name && d.version === o.named!.version) : undefined;
    if (named || holding.length <= 1) {
      const d = named ?? holding[0];
      return { ...base, linked: true, dataset: d ? `${d.name}@${d.version}` : null, reason: null };
    }
    return { ...base, linked: false, dataset: null, reason: "dataset_ambiguous" };
  }
  if (o.named) {
    const inIt = o.named.tasks.some((x) => x.name === taskName);
    return { ...base, linked: false, dataset: `${o.named.name}@${o.named.version}`, reason: inIt ? "hash_mismatch" : "task_not_in_dataset" };
  }
  return { ...base, linked: false, dataset: o.namedRef ?? null, reason: o.namedRef ? "no_hash_match" : "no_dataset_named" };
}

/** The dataset `name@version` the job's config.json names (evolve's `x_evolve.source`, else Harbor's `datasets[0]`). */
function namedDatasetRef(config: Obj): string | undefined {
  const src = obj(obj(config.x_evolve)?.source);
  if (src?.kind === "dataset" && str(src.ref)) return str(src.ref);
  const d = obj(Array.isArray(config.datasets) ? config.datasets[0] : undefined);
  if (!d || !str(d.name)) return undefined;
  const v = str(d.version) ?? str(d.ref);
  return v ? `${d.name}@${v}` : undefined;
}

/** The parsed trace of one trial (see the file's comment for the order), or undefined when it has none. */
async function traceOf(src: UploadSource, trial: ReadTrial, limits: UploadLimits): Promise<TraceUpdate[] | "too_large" | undefined> {
  const at = (rel: string) => `${trial.folder}/${rel}`;
  const under = (re: RegExp) => trial.files.filter((f) => re.test(f.rel.slice(trial.folder.length + 1)));
  const biggest = (fs: SourceFile[]) => [...fs].sort((a, b) => b.size - a.size || (a.rel < b.rel ? -1 : 1))[0];
  const read = async (f: SourceFile) => (f.size > limits.traceBytes ? "too_large" : ((await readSource(src, f.rel, limits.traceBytes)) ?? "too_large"));

  const parsed = trial.files.find((f) => f.rel === at(`agent/${TRIAL.trace}`));
  if (parsed) {
    const buf = await read(parsed);
    if (buf === "too_large") return buf;
    const out: TraceUpdate[] = [];
    for (const line of buf.toString("utf8").split("\n")) {
      if (!line.trim()) continue;
      try {
        const e = JSON.parse(line) as { type?: unknown; data?: unknown };
        if (typeof e.type === "string") out.push({ type: e.type, data: e.data } as TraceUpdate);
      } catch {
        // a torn line of a copied trace: the rest still reads
      }
    }
    return out;
  }
  const rollout = biggest(under(/^agent\/(\.codex\/)?sessions\/(.+\/)?rollout-[^/]*\.jsonl$/));
  if (rollout) {
    const buf = await read(rollout);
    return buf === "too_large" ? buf : rolloutToUpdates({ path: rollout.rel, text: buf.toString("utf8") });
  }
  const session = biggest(under(/^agent\/(\.claude|sessions)\/projects\/.+\.jsonl$/));
  const claude = parserFor("claude-code");
  if (session && claude) {
    const buf = await read(session);
    if (buf === "too_large") return buf;
    const file = { path: session.rel, text: buf.toString("utf8") };
    const parser = claude.create({});
    const out: TraceUpdate[] = [];
    for (const line of file.text.split("\n")) if (line.trim()) out.push(...parser.line(line.endsWith("\r") ? line.slice(0, -1) : line));
    out.push(...parser.end([file]));
    return out;
  }
  const traj = trial.files.find((f) => f.rel === at("agent/trajectory.json"));
  if (traj) {
    const buf = await read(traj);
    if (buf === "too_large") return buf;
    try {
      return atifToUpdates(JSON.parse(buf.toString("utf8")));
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The record's phase timings: evolve's own, else Harbor's four spans. */
function phaseTimings(result: Obj): TrialRecord["phase_timings"] {
  const xe = obj(obj(result.x_evolve)?.phase_timings);
  const out: TrialRecord["phase_timings"] = {};
  const put = (phase: keyof TrialRecord["phase_timings"], v: unknown) => {
    const s = obj(v);
    if (s && str(s.started_at)) out[phase] = { started_at: str(s.started_at)!, ...(str(s.finished_at) ? { finished_at: str(s.finished_at)! } : {}) };
  };
  if (xe) {
    for (const [k, v] of Object.entries(xe)) if (["prepare", "build", "boot", "install", "agent", "verify", "persist"].includes(k)) put(k as keyof TrialRecord["phase_timings"], v);
  } else {
    put("boot", result.environment_setup);
    put("install", result.agent_setup);
    put("agent", result.agent_execution);
    put("verify", result.verifier);
  }
  return out;
}

/** The record's spend: evolve's own figure and source, else Harbor's `agent_result.cost_usd` as reported. */
function spendOf(result: Obj): TrialRecord["spend"] {
  const xe = obj(result.x_evolve);
  const spent = num(xe?.spentUsd);
  if (spent !== undefined) {
    const source = str(xe?.spendSource) ?? "reported";
    return { live_usd: spent, final_usd: source === "measured" ? spent : null, source };
  }
  const cost = num(obj(result.agent_result)?.cost_usd);
  return cost !== undefined ? { live_usd: cost, final_usd: cost, source: "reported" } : undefined;
}

/** The record's tokens: evolve's own, else Harbor's agent_result counts. */
function tokensOf(result: Obj): Record<string, number> | undefined {
  const xe = obj(obj(result.x_evolve)?.tokens);
  if (xe && Object.values(xe).every((v) => num(v) !== undefined)) return xe as Record<string, number>;
  const a = obj(result.agent_result);
  const prompt = num(a?.n_input_tokens);
  const output = num(a?.n_output_tokens);
  if (prompt === undefined && output === undefined) return undefined;
  return { prompt: prompt ?? 0, cached_read: num(a?.n_cache_tokens) ?? 0, cache_write: 0, output: output ?? 0, reasoning: 0 };
}

/** A native trial config.json for the stored trial (what tree.ts reads back): the task, agent and multiplier. */
function storedConfig(result: Obj, config: Obj, t: TrialRecord): Obj {
  const agent = obj(config.agent) ?? {};
  const { trial_id: _t, job_id: _j, task: _k, ...evolveRest } = obj(config.x_evolve) ?? {};
  const kwargs = obj(agent.kwargs) ?? {};
  return {
    ...evolveRest,
    trial_name: t.id,
    job_id: t.job_id,
    task: { path: str(obj(config.task)?.path) ?? str(obj(result.task_id)?.path) ?? "", name: t.task_name, digest: t.task_digest, source: t.source ?? null },
    agent: { name: t.agent, model_name: t.model ?? null, kwargs },
    timeout_multiplier: num(config.timeout_multiplier) ?? 1,
  };
}

/** Copies one regular file of the upload to `dest` (made new: `wx`), never through a link. */
async function copySource(src: UploadSource, rel: string, dest: string): Promise<void> {
  const fh = await openBoxFile(src.root, join(src.root, ...rel.split("/"))).catch((e) => (e instanceof BoxFileRefused ? undefined : Promise.reject(e)));
  if (!fh) return;
  try {
    const size = (await fh.stat()).size;
    mkdirSync(dirname(dest), { recursive: true });
    if (size === 0) {
      await pipeline(createReadStream("/dev/null"), createWriteStream(dest, { flags: "wx", mode: 0o644 }));
      return;
    }
    await pipeline(fh.createReadStream({ start: 0, end: size - 1, autoClose: false }), createWriteStream(dest, { flags: "wx", mode: 0o644 }));
  } finally {
    await fh.close();
  }
}

/** Files of a trial folder never carried into the store: evolve's own parsed trace (stored beside agent/) and a prior analysis. */
const NOT_CARRIED = (rel: string) => rel === `agent/${TRIAL.trace}` || rel === "analysis.json" || rel === TRIAL.config;

/** What one import did. */
export interface UploadOutcome {
  job: JobRecord;
  trials: TrialRecord[];
  scored: number;
  skippedTrials: SkippedTrial[];
  skippedEntries: SkippedEntry[];
}

/**
 * Imports the job folder or archive at `source` as a new finished job (see the file's comment). `importId` names
 * the import (its working folder holds an unpacked archive, removed at the end). Refusals: `upload_too_large`,
 * `upload_invalid`, `upload_unreadable`, `invalid_trial`, `job_already_uploaded`, `dataset_not_found` (`-d`).
 */
export async function importJob(store: Store, home: string, importId: string, source: string, o: { dataset?: string; limits: UploadLimits }): Promise<UploadOutcome> {
  const work = importWorkDir(home, importId);
  try {
    const src = isUploadArchive(source) ? await unpackArchive(source, join(work, "job"), o.limits) : await walkFolder(source, o.limits);
    return await importSource(store, home, importId, src, o);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function importSource(store: Store, home: string, importId: string, src: UploadSource, o: { dataset?: string; limits: UploadLimits }): Promise<UploadOutcome> {
  const root = jobRoot(src);
  const rootRel = (p: string) => `${root}${p}`;
  const jobLog = src.tooLarge.find((f) => f.rel === rootRel("job.log"));
  if (jobLog) throw new EvolveError("upload_too_large", `job.log is ${jobLog.size} bytes, over the ${o.limits.fileBytes}-byte limit of one file`, "leave job.log out of the upload");
  const cfg = await readJsonObject(src, rootRel("config.json"));
  const res = await readJsonObject(src, rootRel("result.json"));
  if ("error" in cfg) throw new EvolveError("upload_invalid", `the job's config.json: ${cfg.error}`, "config.json and result.json at the job's root are required");
  if ("error" in res) throw new EvolveError("upload_invalid", `the job's result.json: ${res.error}`, "config.json and result.json at the job's root are required");
  const jobConfigIn = cfg.value;
  const jobResultIn = res.value;
  const jobLockIn = await readJsonObject(src, rootRel("lock.json"));

  // the same job twice: by the id its result.json states (Harbor's job UUID, or evolve's job id)
  const originalId = str(jobResultIn.id) ?? str(obj(jobConfigIn.x_evolve)?.job_id) ?? null;
  const originalName = str(jobConfigIn.job_name) ?? null;
  if (originalId) {
    const dup = store.listJobs().find((j) => (j.upload as UploadInfo | undefined)?.original_job_id === originalId);
    if (dup) throw new EvolveError("job_already_uploaded", `job ${originalId}${originalName ? ` (${originalName})` : ""} was uploaded already, as job ${dup.id}`, `job ${dup.id} holds it already (evolve has no job delete yet, so it stays the upload of this job)`);
  }

  const override = o.dataset ? resolveDataset(store, o.dataset)[0] : undefined;
  const namedRef = namedDatasetRef(jobConfigIn);
  let named: DatasetRecord | null = null;
  if (namedRef) {
    try {
      named = resolveDataset(store, namedRef)[0] ?? null;
    } catch {
      named = null;
    }
  }

  // every trial folder read and checked before anything is written
  const byFolder = new Map<string, SourceFile[]>();
  for (const f of src.files) {
    if (!f.rel.startsWith(root)) continue;
    const rest = f.rel.slice(root.length);
    const slash = rest.indexOf("/");
    if (slash < 0) continue;
    const folder = rest.slice(0, slash);
    (byFolder.get(folder) ?? byFolder.set(folder, []).get(folder)!).push(f);
  }
  const skippedTrials: SkippedTrial[] = [];
  const skippedEntries: SkippedEntry[] = [...src.skipped];
  const trials: ReadTrial[] = [];
  for (const [folder, files] of [...byFolder].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const full = `${root}${folder}`;
    if (!files.some((f) => f.rel === `${full}/result.json`)) {
      skippedEntries.push({ path: full, reason: "no result.json: not a trial folder" });
      continue;
    }
    const r = await readJsonObject(src, `${full}/result.json`);
    if ("error" in r) throw new EvolveError("invalid_trial", `trial ${folder}: result.json is ${r.error}`, "every trial's result.json must be a JSON object (platform-upload.md)");
    const missing = REQUIRED_TRIAL_KEYS.filter((k) => !(k in r.value));
    if (missing.length) throw new EvolveError("invalid_trial", `trial ${folder}: result.json lacks ${missing.join(", ")}`, `a trial's result.json needs ${REQUIRED_TRIAL_KEYS.join(", ")}`);
    const big = src.tooLarge.find((f) => f.rel.startsWith(`${full}/`));
    if (big) {
      skippedTrials.push({ trial: folder, code: "trial_too_large", reason: `${big.rel.slice(full.length + 1)} is ${big.size} bytes, over the ${o.limits.fileBytes}-byte limit of one file` });
      continue;
    }
    const c = await readJsonObject(src, `${full}/config.json`);
    const lock = await readJsonObject(src, `${full}/lock.json`);
    trials.push({ folder: full, result: r.value, config: "value" in c ? c.value : obj(r.value.config) ?? {}, files, lock: "value" in lock ? lock.value : undefined });
  }

  // traces parsed before anything is written: a trace too large to parse skips its trial
  const traces = new Map<ReadTrial, TraceUpdate[] | undefined>();
  for (const t of trials) {
    const tr = await traceOf(src, t, o.limits);
    if (tr === "too_large") {
      skippedTrials.push({ trial: t.folder.slice(root.length), code: "trial_too_large", reason: `its trajectory or transcript is over the ${o.limits.traceBytes}-byte limit of a trace parsed` });
      continue;
    }
    traces.set(t, tr);
  }
  const kept = trials.filter((t) => traces.has(t));

  // the records
  const at = new Date().toISOString();
  const jobId = newId();
  const links: TaskLink[] = [];
  const records: { rec: TrialRecord; from: ReadTrial }[] = [];
  for (const t of kept) {
    const r = t.result;
    const xe = obj(r.x_evolve) ?? {};
    const taskName = str(r.task_name) ?? t.folder.slice(root.length);
    const lockDigest = digestOf(t, "value" in jobLockIn ? jobLockIn.value : undefined);
    const link = linkTask(store, taskName, lockDigest, { override, named, namedRef });
    const id = newId();
    links.push({ trial_id: id, trial_name: str(r.trial_name) ?? t.folder.slice(root.length), ...link });
    const rewards = rewardsOf(r);
    const e = obj(r.exception_info);
    const exType = str(e?.exception_type);
    const info = obj(r.agent_info) ?? {};
    const model = str(obj(info.model_info)?.name);
    const finished = str(r.finished_at);
    const stepResults = Array.isArray(r.step_results)
      ? r.step_results.flatMap((s) => {
          const so = obj(s);
          const name = str(so?.name) ?? str(so?.step_name);
          return so && name ? [{ ...so, name, rewards: obj(so.rewards) ?? obj(obj(so.verifier_result)?.rewards) ?? null }] : [];
        })
      : undefined;
    const spend = spendOf(r);
    const tokens = tokensOf(r);
    const source = link.dataset ?? namedRef ?? str(r.source);
    const rec: TrialRecord = {
      id,
      job_id: jobId,
      task_digest: link.digest ?? lockDigest ?? (str(r.task_checksum) ? `harbor:${r.task_checksum}` : `task:${taskName}`),
      task_name: taskName,
      ...(source ? { source } : {}),
      agent: str(info.name) ?? "unknown",
      ...(model ? { model } : {}),
      status: portedTrialStatus(rewards, exType, xe.status),
      phase_timings: phaseTimings(r),
      rewards,
      reward: num(xe.reward) ?? primaryReward(rewards),
      exception: e && exType ? { type: exType, message: str(e.exception_message) ?? "", traceback: str(e.exception_traceback) ?? "", occurred_at: str(e.occurred_at) ?? finished ?? at } : null,
      ...(spend ? { spend } : {}),
      ...(tokens ? { tokens } : {}),
      ...(stepResults && stepResults.length ? { step_results: stepResults } : {}),
      attempt: Number.isInteger(xe.attempt) && (xe.attempt as number) > 0 ? (xe.attempt as number) : 1,
      ...(str(r.started_at) ? { started_at: str(r.started_at) } : {}),
      ...(finished ? { finished_at: finished } : {}),
      created_at: at,
      updated_at: at,
    };
    records.push({ rec, from: t });
  }
  const agent0 = obj(Array.isArray(jobConfigIn.agents) ? jobConfigIn.agents[0] : undefined) ?? {};
  const kwargs = Object.fromEntries(Object.entries(obj(agent0.kwargs) ?? {}).filter(([, v]) => typeof v === "string")) as Record<string, string>;
  const xeJob = obj(jobConfigIn.x_evolve) ?? {};
  const dsRef = override ? `${override.name}@${override.version}` : namedRef;
  const kinds: JobKind[] = ["run", "check", "retry", "regrade"];
  const tasks = new Map<string, { name: string; digest: string }>();
  for (const { rec } of records) tasks.set(`${rec.task_name}\0${rec.task_digest}`, { name: rec.task_name!, digest: rec.task_digest });
  const agentName = str(agent0.name) ?? records[0]?.rec.agent ?? "unknown";
  const model = str(agent0.model_name) ?? records[0]?.rec.model;
  const config: JobConfig = {
    kind: kinds.includes(xeJob.kind as JobKind) ? (xeJob.kind as JobKind) : "run",
    agent: { name: agentName, ...(model ? { model } : {}), ...(Object.keys(kwargs).length ? { kwargs } : {}) },
    attempts: num(jobConfigIn.n_attempts) ?? 1,
    concurrency: num(jobConfigIn.n_concurrent_trials) ?? 1,
    timeout_multiplier: num(jobConfigIn.timeout_multiplier) ?? 1,
    secret_names: [],
    force_build: false,
    max_retries: num(obj(jobConfigIn.retry)?.max_retries) ?? 0,
    source: dsRef ? { kind: "dataset", ref: dsRef } : { kind: "path", path: str(jobConfigIn.jobs_dir) ?? "uploaded" },
    tasks: [...tasks.values()],
  };
  const { trial_results: _tr, stats, ...resultRest } = jobResultIn;
  const { evals: _ev, ...statsRest } = obj(stats) ?? {};
  const upload: UploadInfo = {
    import_id: importId,
    original_job_id: originalId,
    original_job_name: originalName,
    uploaded_at: at,
    reported_totals: { ...(num(resultRest.n_total_trials) !== undefined ? { n_total_trials: resultRest.n_total_trials } : {}), ...statsRest },
    task_links: links,
  };
  const job = portedJob({ id: jobId, created_at: at, ...(dsRef ? { dataset: dsRef } : {}), config, upload }, at);

  // the files, then the records: a trial's record appears only once its folder is whole, and a failure on the way
  // (a full disk, the same job landing from another import meanwhile) leaves no folder behind
  try {
    for (const { rec, from } of records) {
      const dir = trialDir(home, rec.id);
      mkdirSync(dir, { recursive: true });
      for (const f of from.files) {
        const rel = f.rel.slice(from.folder.length + 1);
        if (NOT_CARRIED(rel)) continue;
        await copySource(src, f.rel, join(dir, ...rel.split("/")));
      }
      writeFileSync(join(dir, TRIAL.config), JSON.stringify(storedConfig(from.result, from.config, rec), null, 2) + "\n");
      const trace = traces.get(from);
      if (trace && trace.length) {
        const w = openTraceWriter(home, rec.id);
        try {
          w.append(trace);
        } finally {
          w.close();
        }
      }
    }
    store.transaction(() => {
      const dup = originalId ? store.listJobs().find((j) => (j.upload as UploadInfo | undefined)?.original_job_id === originalId) : undefined;
      if (dup) throw new EvolveError("job_already_uploaded", `job ${originalId} was uploaded meanwhile, as job ${dup.id}`, `job ${dup.id} holds it already`);
      store.putJob(job);
      store.putTrials(records.map((r) => r.rec));
    });
  } catch (e) {
    for (const { rec } of records) await rm(trialDir(home, rec.id), { recursive: true, force: true });
    throw e;
  }
  const trialRecs = records.map((r) => r.rec);
  return { job, trials: trialRecs, scored: trialRecs.filter((t) => t.rewards).length, skippedTrials, skippedEntries };
}

/** Records a new RUNNING import of `source` by this process and returns it. */
export function startImport(home: string, source: string, dataset?: string): ImportRecord {
  const at = new Date().toISOString();
  const rec: ImportRecord = {
    id: newId(),
    status: IMPORT_RUNNING,
    source,
    dataset: dataset ?? null,
    created_at: at,
    updated_at: at,
    finished_at: null,
    job_id: null,
    trials: 0,
    scored: 0,
    skipped_trials: [],
    skipped_entries: [],
    error: null,
    runner: { pid: process.pid, host: hostname() },
  };
  putImport(home, rec);
  return rec;
}

/**
 * Runs import `id` (recorded by startImport) to its end in this process: COMPLETED with the job, or FAILED with the
 * refusal's code (the refusal is thrown on as well). Returns the final record and the outcome.
 */
export async function runImport(store: Store, home: string, id: string, limits: UploadLimits): Promise<{ record: ImportRecord; outcome: UploadOutcome }> {
  const rec = getImport(home, id);
  if (!rec) throw new EvolveError("import_not_found", `no import ${id}`, "see `evolve job imports`");
  putImport(home, { ...rec, status: IMPORT_RUNNING, runner: { pid: process.pid, host: hostname() }, updated_at: new Date().toISOString() });
  try {
    const outcome = await importJob(store, home, id, rec.source, { ...(rec.dataset ? { dataset: rec.dataset } : {}), limits });
    const at = new Date().toISOString();
    const done: ImportRecord = {
      ...rec,
      status: IMPORT_COMPLETED,
      updated_at: at,
      finished_at: at,
      job_id: outcome.job.id,
      trials: outcome.trials.length,
      scored: outcome.scored,
      skipped_trials: outcome.skippedTrials,
      skipped_entries: outcome.skippedEntries,
      runner: null,
    };
    putImport(home, done);
    return { record: done, outcome };
  } catch (e) {
    const at = new Date().toISOString();
    const code = e instanceof EvolveError ? e.code : "internal";
    putImport(home, { ...rec, status: IMPORT_FAILED, updated_at: at, finished_at: at, error: { code, message: e instanceof Error ? e.message : String(e) }, runner: null });
    throw e;
  }
}
