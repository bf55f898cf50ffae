/**
 * One trial's results tree, file by file, into a sink (sink.ts): what `trial download -o` saves (profile "trial",
 * platform-trial-outputs.md "The trial directory") and what a job folder, `job export` and `job download` hold per
 * trial (profile "job": that, plus lock.json, trial.log, the raw verifier folder, steps/, the home byte for byte and
 * artifacts/ with manifest.json). Read from the store's record (status, rewards, spend, exception: the truth) and
 * the trial's folder; every file a box could have written is read through box/fs.ts (no link followed, regular
 * files inside the trial folder only). A file the trial never produced is absent, never empty.
 */
import { createHash } from "node:crypto";
import { posix, relative, sep } from "node:path";
import { trialDir, type TrialRecord } from "../store/index.ts";
import { BoxFileRefused, listBoxFiles, openBoxFile, readRange } from "../box/fs.ts";
import { BOX, trialPaths } from "../box/layout.ts";
import { TrajectoryBuilder } from "../trace/atif.ts";
import { hasTrace, parseLine, traceBytes, traceLines } from "../trace/store.ts";
import { harborTrialConfig, harborTrialResult } from "./harbor.ts";
import { isSafeSegment } from "./ids.ts";
import type { TreeSink } from "./sink.ts";

/** Which tree: the trial download's, or the job folder's / job download's (a superset). */
export type TreeProfile = "trial" | "job";

/** The most bytes one file of a trial may have to be carried (a larger one is left out with a warning). */
export const MAX_TREE_FILE = 512 * 1024 * 1024;

/** Names in the tree that evolve writes itself (never copied from a box-written folder). */
const TRAJECTORY = "trajectory.json";
const TRACE = "trace-parsed.jsonl";
const HOME_RECORD = "agent-home.json";

const json = (v: unknown) => Buffer.from(JSON.stringify(v, null, 2) + "\n");

/** What the tree's writer is told of where the trial lands, for Harbor's `trial_name`, `trial_uri` and `trials_dir`. */
export interface TreePlace {
  trialName: string;
  /** The folder the tree is written to (a `file://` URI in result.json); an archive's entry path when archived. */
  trialDir: string;
  trialsDir: string;
}

/** A regular file's bytes and mode from a trial folder (box/fs.ts rules); undefined when absent, refused or too large. */
async function readTreeFile(root: string, path: string, warn: (m: string) => void): Promise<{ data: Buffer; mode: number } | undefined> {
  let fh;
  try {
    fh = await openBoxFile(root, path);
  } catch (e) {
    if (e instanceof BoxFileRefused) {
      warn(`left out ${relative(root, path)}: ${e.what}`);
      return undefined;
    }
    throw e;
  }
  if (!fh) return undefined;
  try {
    const st = await fh.stat();
    if (st.size > MAX_TREE_FILE) {
      warn(`left out ${relative(root, path)}: ${st.size} bytes, over the ${MAX_TREE_FILE} one file may have`);
      return undefined;
    }
    return { data: await readRange(fh, 0, st.size), mode: st.mode & 0o777 };
  } finally {
    await fh.close();
  }
}

async function readJson(root: string, path: string): Promise<Record<string, unknown>> {
  const f = await readTreeFile(root, path, () => {}).catch(() => undefined);
  if (!f) return {};
  try {
    const v = JSON.parse(f.data.toString("utf8"));
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/** Copies every regular file under `dir` (a folder of the trial) to `prefix/…` in the sink, except names `skip` says. */
async function copyFolder(root: string, dir: string, prefix: string, sink: TreeSink, warn: (m: string) => void, skip: (rel: string) => boolean = () => false): Promise<string[]> {
  const done: string[] = [];
  for (const f of (await listBoxFiles(dir)).sort()) {
    const rel = relative(dir, f).split(sep).join("/");
    if (skip(rel) || !rel.split("/").every((p) => p !== "" && p !== "." && p !== "..")) continue;
    const got = await readTreeFile(root, f, warn);
    if (!got) continue;
    await sink.file(`${prefix}/${rel}`, got.data, got.mode);
    done.push(rel);
  }
  return done;
}

/**
 * The home files the trial download leaves out: those agent-home.json records as not UTF-8 text (the text view),
 * as paths relative to agent/.
 */
function nonTextHomeFiles(record: Record<string, unknown>): Set<string> {
  const out = new Set<string>();
  for (const s of Array.isArray(record.skipped) ? record.skipped : []) {
    const p = (s as { path?: unknown; reason?: unknown }).path;
    const why = (s as { reason?: unknown }).reason;
    if (typeof p !== "string" || typeof why !== "string" || !why.startsWith("not UTF-8")) continue;
    const rel = posix.relative(BOX.agentLogs, p);
    if (!rel.startsWith("..") && !posix.isAbsolute(rel)) out.add(rel);
  }
  return out;
}

/** The ATIF trajectory built from the stored parsed trace, or undefined when there is none to build from (or no step). */
function builtTrajectory(home: string, t: TrialRecord, version: string): Buffer | undefined {
  if (!hasTrace(home, t.id)) return undefined;
  const b = new TrajectoryBuilder({ agent: { name: t.agent, version, ...(t.model ? { model_name: t.model } : {}) }, sessionId: t.id });
  for (const s of traceLines(home, t.id)) b.push(parseLine(s));
  const traj = b.finish();
  return traj.steps.length > 0 ? json(traj) : undefined;
}

/** The exception as exception.txt states it (the trial runner's wording: type, message, then the traceback). */
function exceptionText(e: NonNullable<TrialRecord["exception"]>): string {
  return `${e.type}: ${e.message}\n${e.traceback ? `\n${e.traceback}\n` : ""}`;
}

/**
 * Writes trial `t`'s tree into `sink` (paths relative to the trial's folder). `warn` hears of each file left out (a
 * link the box planted, a file too large); those never stop the rest.
 */
export async function writeTrialTree(home: string, t: TrialRecord, sink: TreeSink, profile: TreeProfile, place: TreePlace, warn: (m: string) => void = () => {}): Promise<void> {
  const root = trialDir(home, t.id);
  const p = trialPaths(root);
  const storedConfig = await readJson(root, p.config);
  const storedResult = await readJson(root, p.result);
  const config = harborTrialConfig(t, storedConfig, { trialName: place.trialName, trialsDir: place.trialsDir, storedResult });
  const result = harborTrialResult(t, storedResult, config, { trialName: place.trialName, trialDir: place.trialDir });
  await sink.file("config.json", json(config));
  await sink.file("result.json", json(result));
  const evolve = await readTreeFile(root, p.evolve, warn);
  if (evolve) await sink.file("evolve.json", evolve.data);
  if (t.exception) await sink.file("exception.txt", Buffer.from(exceptionText(t.exception)));

  // agent/: the harness's streams, sessions and home; the trial download keeps the home's text view only
  const homeRecord = await readJson(root, `${p.agent}/${HOME_RECORD}`);
  const leaveOut = profile === "trial" ? nonTextHomeFiles(homeRecord) : new Set<string>();
  const copied = await copyFolder(root, p.agent, "agent", sink, warn, (rel) => leaveOut.has(rel) || rel === TRACE);
  if (!copied.includes(TRAJECTORY)) {
    const version = (result.agent_info as { version: string }).version;
    const traj = builtTrajectory(home, t, version);
    if (traj) await sink.file(`agent/${TRAJECTORY}`, traj);
  }
  if (hasTrace(home, t.id)) await sink.file(`agent/${TRACE}`, Buffer.concat([...traceBytes(home, t.id)]));

  // verifier/: its log, and the rewards map the store holds (the reward the trial settled with)
  if (profile === "job") await copyFolder(root, p.verifier, "verifier", sink, warn, (rel) => rel === "reward.json" && !!t.rewards);
  else {
    const log = await readTreeFile(root, p.testStdout, warn);
    if (log) await sink.file("verifier/test-stdout.txt", log.data);
  }
  if (t.rewards) await sink.file("verifier/reward.json", json(t.rewards));
  if (profile === "trial") return;

  // what only the job's tree carries
  const log = await readTreeFile(root, p.log, warn);
  if (log) await sink.file("trial.log", log.data);
  await sink.file("lock.json", json(trialLock(t, config)));
  const artifacts = await copyFolder(root, p.artifacts, "artifacts", sink, warn, (rel) => rel === "manifest.json");
  if (artifacts.length > 0) await sink.file("artifacts/manifest.json", json(await artifactManifest(root, p.artifacts, artifacts)));
  await copyFolder(root, p.steps, "steps", sink, warn, (rel) => /^[^/]+\/verifier\/reward\.json$/.test(rel));
  for (const s of t.step_results ?? []) {
    const rewards = (s as { rewards?: unknown }).rewards;
    if (isSafeSegment(s.name) && rewards && typeof rewards === "object") await sink.file(`steps/${s.name}/verifier/reward.json`, json(rewards));
  }
}

/**
 * A trial's lock.json: the resolved inputs that replay it (Harbor's TrialLock: the task by digest, the agent, the
 * timeout multiplier, the environment), evolve's ids under `x_evolve`.
 */
function trialLock(t: TrialRecord, config: Record<string, unknown>): Record<string, unknown> {
  const c = config as { task: { path: string; source: string | null }; timeout_multiplier: number; agent: unknown; environment: unknown; verifier: unknown };
  return {
    schema_version: 1,
    created_at: t.created_at,
    task: { name: t.task_name ?? null, type: "local", digest: t.task_digest, source: c.task.source, path: c.task.path },
    timeout_multiplier: c.timeout_multiplier,
    agent: c.agent,
    environment: c.environment,
    verifier: c.verifier,
    x_evolve: { trial_id: t.id, job_id: t.job_id, attempt: t.attempt ?? 1 },
  };
}

/** artifacts/manifest.json: each collected artifact's box source path, its place under artifacts/, size and sha256. */
async function artifactManifest(root: string, dir: string, rels: readonly string[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const rel of rels) {
    const got = await readTreeFile(root, `${dir}/${rel}`, () => {});
    if (!got) continue;
    out.push({ source: `/${rel}`, destination: rel, size: got.data.length, sha256: createHash("sha256").update(got.data).digest("hex") });
  }
  return out;
}
