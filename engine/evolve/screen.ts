/**
 * A paired screen: every candidate and its parent run the same fixed sample of tasks, each in its own copied
 * overlay of `.agent/`, and three gates decide (validity, activation, paired gain). The record is written after each
 * harness's run, so a killed screen loses at most the run in progress, and a resumed one re-uses the finished runs.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EvolveError, firstLine } from "../errors.ts";
import { buildOverlay, readCandidate } from "./candidate.ts";
import { projectPaths } from "../eval/project.ts";
import { modelUnavailableError, pairedGainGate, pairedStats, SIGN_TEST_ALPHA, SIGN_TEST_MIN_N, signTestEvidence, statsFromJson, statsToJson } from "../eval/stats.ts";
import type { Attempt, Evaluator, GateResult } from "../eval/types.ts";
import type { CandidateScreen, ScreenRecord } from "./types.ts";

/** Limits every screen states, in its record and its report. */
export const SCREEN_LIMITS = [
  "utilities are only as good as the task cards: a screen measures the sample, not the world",
  "overlays are copies of .agent/: anything a task writes outside .agent/ leaks between runs",
  "the evolver proposes nothing by itself: diagnoses point at a file, a person or the host agent writes the candidate",
];

/** The limit of a screen on task cards: they run on the host, not in a box. */
export const CARDS_ON_HOST = "task cards run on the host, not in a box: the agent's shell and a card's check command run as you, in the screen's folder; screen -d name@version runs isolated podman trials";

/** The limit added when the sample is too small to be evidence. */
export function smokeLimit(n: number): string {
  return `n = ${n}: a smoke test, not evidence`;
}

/** The limit added when the sample is too small for the exact sign test to reach significance. */
export function signTestLimit(n: number): string {
  return `n = ${n}: below ${SIGN_TEST_MIN_N} pairs the exact sign test cannot reach p < ${SIGN_TEST_ALPHA}; a pass rests on the t gate alone (weak evidence)`;
}

/** One harness's finished run in a screen (`runs/<harness>.json`): what a resumed screen re-uses. */
export interface HarnessRun {
  harness: string;
  sample: string[];
  source: string;
  attempts: Attempt[];
  jobId?: string;
  wall_sec: number;
}

/**
 * Runs `harness` (an overlay built fresh under `dir/overlays/<harness>/`) on `tasks`, unless `dir/runs/<harness>.json`
 * already holds its run of the same tasks and source, which is returned instead (a resume re-runs nothing finished).
 */
export async function runHarnessCached(o: {
  project: string;
  dir: string;
  harness: string;
  marker: string | null;
  tasks: string[];
  evaluator: Evaluator;
  signal?: AbortSignal;
  onHarness?: ScreenOptions["onHarness"];
}): Promise<HarnessRun> {
  const file = join(o.dir, "runs", `${o.harness}.json`);
  const old = readRun(file);
  if (old && sameList(old.sample, o.tasks) && old.source === o.evaluator.source) {
    o.onHarness?.({ harness: o.harness, phase: "reused", attempts: old.attempts });
    return old;
  }
  o.signal?.throwIfAborted();
  o.onHarness?.({ harness: o.harness, phase: "start" });
  const overlayDir = join(o.dir, "overlays", o.harness);
  rmSync(overlayDir, { recursive: true, force: true });
  mkdirSync(overlayDir, { recursive: true });
  const agentRoot = buildOverlay(o.project, o.harness, overlayDir);
  const outDir = join(o.dir, "attempts", o.harness);
  rmSync(outDir, { recursive: true, force: true });
  const started = Date.now();
  const r = await o.evaluator.run({ harnessId: o.harness, agentRoot, tasks: o.tasks, marker: o.marker, outDir, signal: o.signal });
  // a run whose model was never reached is not kept (a rerun runs it again) and nothing is judged from it
  const unreached = modelUnavailableError(o.harness, r.attempts, outDir);
  if (unreached) throw unreached;
  const run: HarnessRun = { harness: o.harness, sample: o.tasks, source: o.evaluator.source, attempts: r.attempts, wall_sec: (Date.now() - started) / 1000, ...(r.jobId ? { jobId: r.jobId } : {}) };
  mkdirSync(join(o.dir, "runs"), { recursive: true });
  writeJsonAtomic(file, run);
  o.onHarness?.({ harness: o.harness, phase: "done", attempts: r.attempts });
  return run;
}

/**
 * A new run id under the project's `evolve/screens/`, `<prefix>-<UTC time to the second>-<6 hex>`, whose folder this
 * call creates (an exclusive mkdir), so two screens or evals started in the same second never share a folder: the
 * second would otherwise re-use the first one's runs as its own (an eval after an install reporting the
 * pre-install score, a screen drawing its sample from another's seed).
 */
export function newRunId(project: string, prefix: "s" | "eval", now = new Date()): string {
  const root = projectPaths(project).screens;
  mkdirSync(root, { recursive: true });
  const stamp = now.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
  for (;;) {
    const id = `${prefix}-${stamp}-${randomBytes(3).toString("hex")}`;
    try {
      mkdirSync(join(root, id));
      return id;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
  }
}

/** Options of {@link screen}. */
export interface ScreenOptions {
  project: string;
  candidates: string[];
  evaluator: Evaluator;
  /** The sample (task ids); drawn from the evaluator's tasks when absent. */
  sample?: string[];
  /** Tasks to draw (all tasks when absent). */
  sampleSize?: number;
  /** Seed of the draw (default: the screen id). */
  seed?: string;
  noActivationGate?: boolean;
  signal?: AbortSignal;
  /** The screen's id (default a new {@link newRunId}); a screen with this id already on disk is resumed. */
  id?: string;
  /** Called as each harness starts and ends (progress for the CLI). */
  onHarness?: (e: { harness: string; phase: "start" | "done" | "reused"; attempts?: Attempt[] }) => void;
}

/** A string's 32-bit FNV-1a hash: the seed of the sample's draw. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** mulberry32: small, deterministic on every runtime, so a recorded seed redraws the same sample anywhere. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * `size` of `tasks` drawn without replacement by `seed`, kept in the tasks' own order; all of them when `size` is
 * absent or not smaller.
 */
export function drawSample(tasks: readonly string[], size: number | undefined, seed: string): string[] {
  if (size === undefined || size >= tasks.length) return [...tasks];
  if (!Number.isInteger(size) || size < 1) throw new EvolveError("usage", `--sample must be a whole number ≥ 1, got ${size}`);
  const idx = tasks.map((_, i) => i);
  const r = rng(hash32(seed));
  for (let i = idx.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx
    .slice(0, size)
    .sort((a, b) => a - b)
    .map((i) => tasks[i]);
}

/** Writes JSON to `file` through a temp file and a rename, so a kill never leaves half a record. */
export function writeJsonAtomic(file: string, value: unknown): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(value, null, 2) + "\n");
  renameSync(tmp, file);
}

/** A screen record as written: its stats with infinite t as strings (stats.ts statsToJson). */
export function screenToJson(r: ScreenRecord): unknown {
  return { ...r, candidates: r.candidates.map((c) => ({ ...c, stats: statsToJson(c.stats) })) };
}

/** Reads `evolve/screens/<id>/screen.json`. */
export function readScreen(project: string, id: string): ScreenRecord {
  const file = join(projectPaths(project).screen(id), "screen.json");
  let raw: ScreenRecord;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new EvolveError("screen_mismatch", `cannot read the screen record ${file}: ${firstLine(e)}`, "move the screen's folder aside and screen again");
  }
  return { ...raw, candidates: raw.candidates.map((c) => ({ ...c, stats: statsFromJson(c.stats) })) };
}

/** A cached harness run, or undefined when absent or unreadable (it is then run again). */
export function readRun(file: string): HarnessRun | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as HarnessRun;
  } catch {
    return undefined;
  }
}

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** The three gates and the paired stats of one candidate against its parent's run on the same sample. */
export function judge(o: { candidate: string; parent: string; marker: string | null; cand: Attempt[]; par: Attempt[]; noActivationGate?: boolean }): Omit<CandidateScreen, "attempts" | "cost"> {
  const badC = o.cand.filter((a) => !a.valid);
  const badP = o.par.filter((a) => !a.valid);
  let validity: GateResult;
  if (badC.length > 0) validity = { status: "fail", detail: `${badC.length} of ${o.cand.length} attempts invalid (${badC[0].task}: ${badC[0].invalid_reason ?? "invalid"})` };
  else if (badP.length > 0) validity = { status: "fail", detail: `the parent ${o.parent} has ${badP.length} invalid attempts (${badP[0].task}: ${badP[0].invalid_reason ?? "invalid"}): the pairs are unusable` };
  else validity = { status: "pass", detail: `${o.cand.length} attempts, each with a complete log and an exit code` };
  let activation: GateResult;
  if (o.noActivationGate) activation = { status: "skipped", detail: "--no-activation-gate" };
  else if (o.marker === null) activation = { status: "unverified", detail: "the candidate has no activation marker: nothing shows its change ran" };
  else {
    const seen = o.cand.filter((a) => a.marker_seen).length;
    activation = seen > 0 ? { status: "pass", detail: `marker seen in ${seen} of ${o.cand.length} transcripts` } : { status: "fail", detail: `marker ${JSON.stringify(o.marker)} in no transcript: the change never ran` };
  }
  // only tasks both harnesses scored pair up; with any invalid attempt validity has failed anyway
  const parentScore = new Map(o.par.map((a) => [a.task, a.score]));
  const c: number[] = [];
  const p: number[] = [];
  for (const a of o.cand) {
    const ps = parentScore.get(a.task);
    if (a.score !== null && ps !== null && ps !== undefined) {
      c.push(a.score);
      p.push(ps);
    }
  }
  const stats = pairedStats(c, p);
  const paired_gain = pairedGainGate(stats);
  const passed = validity.status === "pass" && activation.status !== "fail" && paired_gain.status === "pass";
  return { candidate: o.candidate, parent: o.parent, gates: { validity, activation, paired_gain }, stats, sign_test: signTestEvidence(stats), passed };
}

function costOf(attempts: Attempt[], wall_sec: number): CandidateScreen["cost"] {
  return { rollouts: attempts.length, wall_sec: Math.round(wall_sec * 1000) / 1000, cost_usd: attempts.reduce((s, a) => s + a.cost_usd, 0) };
}

/**
 * Screens `candidates`: the sample is drawn once (from `seed`, recorded with it), each distinct parent runs once,
 * each candidate runs in its own overlay under `evolve/screens/<id>/overlays/<harness>/`, and the record is written
 * after every harness's run. A screen whose folder already holds runs of the same sample re-uses them.
 */
export async function screen(o: ScreenOptions): Promise<ScreenRecord> {
  if (o.candidates.length === 0) throw new EvolveError("screen_no_candidates", "no candidate to screen", "scaffold one with `evolve harness scaffold`, or name one");
  const id = o.id ?? newRunId(o.project, "s");
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(id)) throw new EvolveError("usage", `--id must be 1-128 letters, digits, . _ - (starting with a letter or digit), got ${JSON.stringify(id)}`);
  const dir = projectPaths(o.project).screen(id);
  const recordFile = join(dir, "screen.json");
  const descs = o.candidates.map((c) => readCandidate(o.project, c).descriptor);
  let prior: ScreenRecord | undefined;
  if (existsSync(recordFile)) prior = readScreen(o.project, id);
  const seed = o.seed ?? prior?.seed ?? id;
  const sample = o.sample ?? prior?.sample ?? drawSample(o.evaluator.tasks(), o.sampleSize, seed);
  if (sample.length === 0) throw new EvolveError("usage", "the sample is empty: the evaluator has no tasks");
  if (prior && (!sameList(prior.sample, sample) || prior.source !== o.evaluator.source)) {
    throw new EvolveError("screen_mismatch", `screen ${id} was started on another sample or source (${prior.source}, ${prior.sample.length} tasks)`, "resume it as it was started, or screen under a new id");
  }
  mkdirSync(join(dir, "runs"), { recursive: true });
  const limits = [...SCREEN_LIMITS, ...(o.evaluator.source === "cards" && o.evaluator.isolation !== "box" ? [CARDS_ON_HOST] : []), ...(sample.length <= 2 ? [smokeLimit(sample.length)] : []), ...(sample.length < SIGN_TEST_MIN_N ? [signTestLimit(sample.length)] : [])];
  const record: ScreenRecord = { id, at: prior?.at ?? new Date().toISOString(), sample, seed, source: o.evaluator.source, candidates: [], limits };
  const runs = new Map<string, HarnessRun>();

  const runHarness = async (harness: string, marker: string | null): Promise<HarnessRun> => {
    const done = runs.get(harness);
    if (done) return done;
    const run = await runHarnessCached({ project: o.project, dir, harness, marker, tasks: sample, evaluator: o.evaluator, signal: o.signal, onHarness: o.onHarness });
    runs.set(harness, run);
    return run;
  };

  const write = () => writeJsonAtomic(recordFile, screenToJson(record));
  write();
  for (const d of descs) {
    const par = await runHarness(d.parent, null);
    write();
    const cand = await runHarness(d.id, d.activation.marker);
    const verdict = judge({ candidate: d.id, parent: d.parent, marker: d.activation.marker, cand: cand.attempts, par: par.attempts, noActivationGate: o.noActivationGate });
    record.candidates.push({ ...verdict, attempts: { candidate: cand.attempts, parent: par.attempts }, cost: costOf(cand.attempts, cand.wall_sec) });
    for (const r of [par, cand]) if (r.jobId) record.jobs = { ...record.jobs, [r.harness]: r.jobId };
    write();
  }
  return record;
}

/** The cost of the parents' runs of a screen (shared by its candidates, so not in any one candidate's cost). */
export function parentCost(project: string, rec: ScreenRecord): Record<string, CandidateScreen["cost"]> {
  const out: Record<string, CandidateScreen["cost"]> = {};
  for (const c of rec.candidates) {
    if (out[c.parent]) continue;
    const run = readRun(join(projectPaths(project).screen(rec.id), "runs", `${c.parent}.json`));
    out[c.parent] = costOf(c.attempts.parent, run?.wall_sec ?? c.attempts.parent.reduce((s, a) => s + a.wall_sec, 0));
  }
  return out;
}
