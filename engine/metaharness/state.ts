/**
 * The evolver's state machine and its records (the filesystem D the proposer reads). One step evaluates one
 * candidate: the rollouts' scores are recorded against the candidate handed back last ({@link recordEvaluation}); when
 * nothing is queued a proposal round writes candidates into workspace/scratch/candidates/, which {@link ingestRound}
 * validates, stores and queues; {@link handBack} then hands back the queue's head, or with nothing queued the best
 * candidate so far to be evaluated again. {@link finalize} picks the best mean on the search set.
 *
 * The proposer's sandbox can write the state folder, so nothing here trusts what it finds there: a stored candidate's
 * files are checked against their digest before they are handed back (changed → `tampered`, never handed back), and
 * every write of the evolver's goes through {@link writeRunFile}, which never follows a link the proposer left (a
 * link in a folder's place is replaced by a real folder, a link in a file's place is replaced by the file; the state
 * folder itself being a link is refused, since the records would then live somewhere else).
 */
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { EvolveError } from "../errors.ts";
import { digestOrReason, layTrees } from "../eval/candidate-store.ts";
import { lstatOrNone, newBudget, readPlainFile, writeFileAtomic } from "../eval/tree.ts";
import { CANDIDATE_NAME, HERMIT_DIR, isCandidateName, runPaths, SEED_ID, stepName, templatePaths } from "./layout.ts";
import { checkSpec, shown } from "./spec.ts";

/** One evaluation of a candidate: one step's rollouts on the whole search set. */
export interface MetaEvaluation {
  step: number;
  /** Task name → the verifier's score. */
  scores: Record<string, number>;
  /** The mean of `scores`; null when the step scored no task. */
  mean: number | null;
  cost_usd: number;
  tokens: number;
}

/** Where a candidate stands: waiting to be evaluated, evaluated at least once, rejected, or changed after storing. */
export type MetaStatus = "queued" | "evaluated" | "invalid" | "tampered";

/** One candidate, as meta_harness_adapter.json records it. */
export interface MetaCandidate {
  id: string;
  /** The proposal round that wrote it; 0 for the starting adapter. */
  round: number;
  hypothesis: string;
  /** The candidate it says it builds on, or null. */
  base: string | null;
  status: MetaStatus;
  /** `sha256:…` of the stored files (engine/eval/candidate-store.ts digestTree); null for an invalid candidate, which is never stored. */
  digest: string | null;
  /** Why it is invalid or tampered, one line each. */
  problems?: string[];
  /** The proposer's folder name, when the record's id had to differ from it (a bad name, a duplicate). */
  entry?: string;
  evaluations: MetaEvaluation[];
  /** The mean over all its evaluations' per-task scores (see {@link candidateMean}); null before any. */
  mean: number | null;
  created_at: string;
}

/** workspace/state/meta_harness_adapter.json. */
export interface MetaState {
  version: 1;
  /** The last step whose scores were recorded (0 before any). */
  step: number;
  /** The last proposal round ingested (0: only the starting adapter). */
  round: number;
  /** Stored candidates waiting to be handed back, head first. */
  queue: string[];
  /** The candidate the next step's rollouts evaluate. */
  handed_back: string | null;
  candidates: MetaCandidate[];
  /** The candidate finalize chose. */
  finalized?: string;
  /** Each proposal round run so far (run.ts; additive: a state written before it has none). */
  rounds?: MetaRound[];
}

/** A proposal round as the state records it: the step it belongs to, its proposer session and its spend. */
export interface MetaRound {
  round: number;
  /** The step whose proposal round it was. */
  step: number;
  trial_id: string | null;
  job_id: string | null;
  exit_code: number | null;
  queued: string[];
  rejected: string[];
  cost_usd: number;
  /** Where the cost came from: the gateway's price, the run's price, or what the gateway priced (a lower bound). */
  cost_source: string;
  tokens: Record<string, number>;
  at: string;
}

/** A candidate the evolver rejected, and why. */
export interface Rejected {
  id: string;
  problems: string[];
}

const STATE_FOLDERS = new Set(["workspace", join("workspace", "state")]);

function stateUnsafe(path: string, what: string): EvolveError {
  return new EvolveError("metaharness_state_unsafe", `${path} is ${what}; the evolver's records are kept only in a real folder`, "replace it with a real folder (the run's records may have been moved or replaced) and run again");
}

/**
 * Makes the folder `rel` (relative to `run`) real folders all the way down, never following a link: a link or a file
 * in a folder's place is removed and a folder made there, except where the state folder (or the workspace holding it)
 * should be, which is refused: replacing it would drop the records.
 */
export function realDirs(run: string, rel: string): string {
  let at = run;
  let relAt = "";
  for (const part of rel.split(sep).filter((p) => p !== "" && p !== ".")) {
    if (part === "..") throw new Error(`realDirs: ${rel} climbs out of ${run}`);
    at = join(at, part);
    relAt = relAt ? join(relAt, part) : part;
    const st = lstatOrNone(at);
    if (st?.isDirectory()) continue;
    if (st && STATE_FOLDERS.has(relAt)) throw stateUnsafe(at, st.isSymbolicLink() ? "a symbolic link" : "not a folder");
    if (st) rmSync(at, { force: true, recursive: true });
    mkdirSync(at);
  }
  return at;
}

/**
 * Writes `data` to the file `path` inside the run folder whole or not at all, never through a link: its folders are
 * made real ({@link realDirs}) and the file is renamed into place, which replaces a link there rather than writing
 * where it points.
 */
export function writeRunFile(run: string, path: string, data: string | Uint8Array, mode = 0o644): void {
  const rel = relative(run, dirname(path));
  if (rel.startsWith("..")) throw new Error(`writeRunFile: ${path} is outside ${run}`);
  realDirs(run, rel);
  writeFileAtomic(path, typeof data === "string" ? new TextEncoder().encode(data) : data, mode);
}

/** The state folder, which must be a real folder (made when missing); a link there → metaharness_state_unsafe. */
function stateFolder(run: string): string {
  return realDirs(run, runPaths(run).rel.state);
}

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** Whether the file holds a state this version reads (the shape's essentials; the rest is the evolver's own writing). */
function isState(v: unknown): v is MetaState {
  if (!isObj(v) || v.version !== 1 || typeof v.step !== "number" || typeof v.round !== "number") return false;
  if (!Array.isArray(v.queue) || !v.queue.every((q) => typeof q === "string")) return false;
  if (v.handed_back !== null && typeof v.handed_back !== "string") return false;
  if (!Array.isArray(v.candidates)) return false;
  return v.candidates.every((c) => isObj(c) && typeof c.id === "string" && typeof c.status === "string" && Array.isArray(c.evaluations));
}

/** Whether the run folder holds a state file (without reading it). */
export function hasState(run: string): boolean {
  return lstatOrNone(runPaths(run).stateFile) !== undefined;
}

/**
 * Reads workspace/state/meta_harness_adapter.json. None there → metaharness_run_missing; the state folder or the
 * file a link → metaharness_state_unsafe; not JSON or not a state → metaharness_state_invalid.
 */
export function loadState(run: string): MetaState {
  const p = runPaths(run);
  for (const dir of [p.workspace, p.state]) {
    const st = lstatOrNone(dir);
    if (!st) throw new EvolveError("metaharness_run_missing", `${run} holds no Meta-Harness Adapter state (${p.stateFile})`, "give the run folder of a meta_harness_adapter run");
    if (!st.isDirectory()) throw stateUnsafe(dir, st.isSymbolicLink() ? "a symbolic link" : "not a folder");
  }
  const st = lstatOrNone(p.stateFile);
  if (!st) throw new EvolveError("metaharness_run_missing", `${run} holds no Meta-Harness Adapter state (${p.stateFile})`, "give the run folder of a meta_harness_adapter run");
  if (!st.isFile()) throw stateUnsafe(p.stateFile, st.isSymbolicLink() ? "a symbolic link" : "not a regular file");
  let parsed: unknown;
  try {
    parsed = JSON.parse(readPlainFile(p.stateFile, newBudget()).data.toString("utf8"));
  } catch (e) {
    if (e instanceof EvolveError) throw e;
    throw new EvolveError("metaharness_state_invalid", `${p.stateFile} is not JSON (${(e as Error).message})`, "restore it from a backup, or start the run again");
  }
  if (!isState(parsed)) throw new EvolveError("metaharness_state_invalid", `${p.stateFile} is not a Meta-Harness Adapter state (version 1)`, "restore it from a backup, or start the run again");
  return parsed;
}

/** Writes the state (a temporary file, then a rename); the state folder or file a link → metaharness_state_unsafe. */
export function saveState(run: string, state: MetaState): void {
  const p = runPaths(run);
  stateFolder(run);
  const st = lstatOrNone(p.stateFile);
  if (st && !st.isFile()) throw stateUnsafe(p.stateFile, st.isSymbolicLink() ? "a symbolic link" : "not a regular file");
  writeRunFile(run, p.stateFile, JSON.stringify(state, null, 2) + "\n");
}

const now = () => new Date().toISOString();

/**
 * The mean over all a candidate's evaluations' per-task scores. Each evaluation covers the whole search set, so the
 * sets are equal in size and this is the mean of the evaluations' means; pooling the scores (rather than averaging
 * the means) keeps it right when an evaluation lost a task.
 */
export function candidateMean(c: Pick<MetaCandidate, "evaluations">): number | null {
  let sum = 0;
  let n = 0;
  for (const e of c.evaluations) {
    for (const s of Object.values(e.scores)) {
      sum += s;
      n++;
    }
  }
  return n === 0 ? null : sum / n;
}

/** The candidate `id` of `state`, or metaharness_candidate_unknown. */
export function candidateOf(state: MetaState, id: string): MetaCandidate {
  const c = state.candidates.find((x) => x.id === id);
  if (!c) throw new EvolveError("metaharness_candidate_unknown", `no candidate ${JSON.stringify(id)} in the run's state`, "`evolve metaharness status <run>` lists them");
  return c;
}

/**
 * Copies the candidate folder `src` to workspace/state/candidates/<id>/adapter/ (never following a link) with its
 * `.hermit/` replaced by the template's, and returns the stored files' digest.
 */
function storeCandidate(run: string, id: string, src: string, template: string): string {
  const p = runPaths(run);
  stateFolder(run);
  realDirs(run, p.rel.candidates);
  // whatever is there (a stale copy, a link the proposer planted) goes; rm never follows a link
  rmSync(p.candidate(id), { recursive: true, force: true });
  const dst = realDirs(run, p.rel.candidateAdapter(id));
  layTrees(dst, [{ from: src, skip: [HERMIT_DIR] }, { from: templatePaths(template).hermit, at: HERMIT_DIR }]);
  const d = digestOrReason(dst);
  if ("reason" in d) throw new Error(`the copy of ${src} cannot be digested: ${d.reason}`);
  return d.digest;
}

/**
 * The starting adapter as candidate `seed` (round 0): checked (a failing check_spec → metaharness_seed_invalid),
 * stored with its digest and queued, so the first {@link handBack} hands it back and step 1 evaluates it. Returns the
 * new state, saved. A run folder that already holds a state → metaharness_state_exists.
 */
export function seedCandidate(run: string, seedDir: string, template: string): MetaState {
  if (hasState(run)) throw new EvolveError("metaharness_state_exists", `${run} already holds a Meta-Harness Adapter state`, "resume the run, or start it in an empty folder");
  const spec = checkSpec(seedDir, { template, name: seedDir });
  if (!spec.ok) throw new EvolveError("metaharness_seed_invalid", `the starting adapter ${seedDir} fails check_spec: ${spec.problems.join("; ")}`, "fix the starting adapter (`evolve metaharness check-spec DIR` lists every problem)");
  const digest = storeCandidate(run, SEED_ID, seedDir, template);
  const meta = readMeta(seedDir);
  const state: MetaState = {
    version: 1,
    step: 0,
    round: 0,
    queue: [SEED_ID],
    handed_back: null,
    candidates: [{ id: SEED_ID, round: 0, hypothesis: meta.hypothesis || "the starting adapter", base: null, status: "queued", digest, evaluations: [], mean: null, created_at: now() }],
  };
  saveState(run, state);
  return state;
}

const MAX_META_BYTES = 64 * 1024;
const MAX_HYPOTHESIS = 2000;

/** A plain file's text when it is one and small enough (the proposer's notes are optional and bounded). */
function smallText(path: string): string | undefined {
  const st = lstatOrNone(path);
  if (!st?.isFile() || st.size > MAX_META_BYTES) return undefined;
  try {
    return readPlainFile(path, newBudget()).data.toString("utf8");
  } catch {
    return undefined;
  }
}

/** The candidate's hypothesis and base: its candidate.json `{hypothesis, base}`, else HYPOTHESIS.md's first line, else none. */
function readMeta(dir: string): { hypothesis: string; base: string | null } {
  let hypothesis: string | undefined;
  let base: string | null = null;
  const json = smallText(join(dir, "candidate.json"));
  if (json !== undefined) {
    try {
      const v = JSON.parse(json) as unknown;
      if (isObj(v)) {
        if (typeof v.hypothesis === "string") hypothesis = v.hypothesis.trim();
        if (typeof v.base === "string" && v.base.trim() !== "") base = v.base.trim().slice(0, 64);
      }
    } catch {
      // a candidate.json that is not JSON says nothing; the candidate is judged by check_spec alone
    }
  }
  if (hypothesis === undefined || hypothesis === "") {
    const md = smallText(join(dir, "HYPOTHESIS.md"));
    hypothesis = md?.split("\n").map((l) => l.replace(/^#+\s*/, "").trim()).find((l) => l !== "") ?? "";
  }
  return { hypothesis: hypothesis.replace(/[\u0000-\u001f\u007f]+/g, " ").slice(0, MAX_HYPOTHESIS), base };
}

/** A record id for an entry whose name cannot be one: the name in candidate-name characters, unique among `used`. */
function safeId(name: string, used: Set<string>): string {
  let base = name.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 56);
  if (base === "") base = "candidate";
  if (!used.has(base)) return base;
  for (let i = 2; ; i++) {
    const id = `${base}-${i}`;
    if (!used.has(id)) return id;
  }
}

/**
 * Takes in a proposal round: each entry of workspace/scratch/candidates/ in name order. A bad name, a link (the entry
 * itself or anything in it), a special file or a failing check_spec → recorded `invalid` with its problems (under
 * the entry's name, or a safe form of it); an id an earlier candidate has → invalid as a duplicate; a valid one is
 * stored ({@link storeCandidate}), digested and queued — at most `k` of them, the round's ask: a valid one past the
 * first k (in name order) is recorded invalid, so a proposer writing more than asked never widens the search. Updates
 * `state` (round, queue, candidates) and saves it.
 */
export function ingestRound(run: string, state: MetaState, round: number, template: string, k = Infinity): { queued: string[]; rejected: Rejected[] } {
  const p = runPaths(run);
  const queued: string[] = [];
  const rejected: Rejected[] = [];
  const used = new Set(state.candidates.map((c) => c.id));
  const reject = (entry: string, id: string, problems: string[]) => {
    used.add(id);
    state.candidates.push({ id, round, hypothesis: "", base: null, status: "invalid", digest: null, problems, ...(entry !== id ? { entry } : {}), evaluations: [], mean: null, created_at: now() });
    rejected.push({ id, problems });
  };
  state.round = round;
  const top = lstatOrNone(p.scratchCandidates);
  // a link in the scratch folder's place would have the evolver read candidates from anywhere: none this round
  const names = top?.isDirectory() ? readdirSync(p.scratchCandidates).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)) : [];
  if (top && !top.isDirectory()) rejected.push({ id: "candidates", problems: [`workspace/scratch/candidates: is ${top.isSymbolicLink() ? "a symbolic link" : "not a folder"}; no candidate was read`] });
  // a bad name's record id must not take the name of a valid entry of the same round
  const taken = new Set([...used, ...names.filter((n) => isCandidateName(n))]);
  for (const name of names) {
    const src = join(p.scratchCandidates, name);
    const problems: string[] = [];
    let id = name;
    if (!isCandidateName(name)) {
      problems.push(`${shown(name)}: not a candidate name (${CANDIDATE_NAME.source})`);
      id = safeId(name, taken);
      taken.add(id);
    } else if (used.has(name)) {
      const prev = state.candidates.find((c) => c.id === name);
      problems.push(`${name}: the id is already used by a candidate of round ${prev?.round ?? "?"}`);
      id = safeId(`${name}-r${round}`, taken);
      taken.add(id);
    }
    problems.push(...checkSpec(src, { template, name }).problems);
    if (problems.length === 0 && queued.length >= k) problems.push(`${name}: the round asked for ${k} candidate${k === 1 ? "" : "s"} and ${queued.join(", ")} came first (name order), so it was not queued`);
    if (problems.length > 0) {
      reject(name, id, problems);
      continue;
    }
    const meta = readMeta(src);
    let digest: string;
    try {
      digest = storeCandidate(run, id, src, template);
    } catch (e) {
      if (!(e instanceof EvolveError) || e.code === "metaharness_state_unsafe") throw e;
      rmSync(p.candidate(id), { recursive: true, force: true });
      reject(name, id, [`${name}: ${e.message.split("\n")[0]}`]);
      continue;
    }
    used.add(id);
    state.candidates.push({ id, round, hypothesis: meta.hypothesis, base: meta.base, status: "queued", digest, evaluations: [], mean: null, created_at: now() });
    state.queue.push(id);
    queued.push(id);
  }
  saveState(run, state);
  return { queued, rejected };
}

/**
 * Why the stored files of candidate `c` are no longer what was stored (a folder on its way a link, a link or special
 * file in it, a changed byte or executable bit), or undefined when they are intact.
 */
export function tamperReason(run: string, c: MetaCandidate): string | undefined {
  const p = runPaths(run);
  if (!c.digest) return "it was never stored";
  const rel = p.rel.candidateAdapter(c.id);
  let at = run;
  for (const part of rel.split(sep)) {
    at = join(at, part);
    const st = lstatOrNone(at);
    if (!st) return `${relative(run, at)}: missing`;
    if (!st.isDirectory()) return `${relative(run, at)}: is ${st.isSymbolicLink() ? "a symbolic link" : "not a folder"}`;
  }
  const d = digestOrReason(p.candidateAdapter(c.id));
  if ("reason" in d) return d.reason;
  if (d.digest !== c.digest) return `its files changed since it was stored (digest ${d.digest}, stored ${c.digest})`;
  return undefined;
}

/** Marks `c` tampered with `reason` (it is never handed back again) and takes it out of the queue. */
export function markTampered(state: MetaState, c: MetaCandidate, reason: string): void {
  c.status = "tampered";
  c.problems = [...(c.problems ?? []), reason];
  state.queue = state.queue.filter((q) => q !== c.id);
  if (state.handed_back === c.id) state.handed_back = null;
}

/** Evaluated candidates best first: the higher mean, and on a tie the one evaluated first. */
function ranked(state: MetaState): MetaCandidate[] {
  const first = (c: MetaCandidate) => Math.min(...c.evaluations.map((e) => e.step));
  return state.candidates
    .filter((c) => c.status === "evaluated" && c.mean !== null)
    .sort((a, b) => b.mean! - a.mean! || first(a) - first(b));
}

/**
 * The candidate the next step evaluates: the queue's head, its digest checked first (changed → `tampered`, skipped,
 * never handed back); with nothing queued, the intact evaluated candidate with the best mean (ties: the one evaluated
 * first), to be evaluated again. None left → metaharness_nothing_to_hand_back. Saves the state.
 */
export function handBack(run: string, state: MetaState): { id: string; reason: "queued" | "best" } {
  const done = (id: string, reason: "queued" | "best") => {
    state.handed_back = id;
    saveState(run, state);
    return { id, reason };
  };
  while (state.queue.length > 0) {
    const id = state.queue[0];
    const c = state.candidates.find((x) => x.id === id);
    if (!c || c.status === "invalid" || c.status === "tampered") {
      state.queue.shift();
      continue;
    }
    const why = tamperReason(run, c);
    if (why) {
      markTampered(state, c, why);
      continue;
    }
    state.queue.shift();
    return done(id, "queued");
  }
  for (const c of ranked(state)) {
    const why = tamperReason(run, c);
    if (why) {
      markTampered(state, c, why);
      continue;
    }
    return done(c.id, "best");
  }
  saveState(run, state);
  throw new EvolveError("metaharness_nothing_to_hand_back", "no intact candidate is left to hand back: every stored one is invalid or tampered", "look at `evolve metaharness status <run>`; the starting adapter's files may have been changed in place");
}

/**
 * Records one step's scores against candidate `id`: appends the evaluation and updates its mean over ALL its
 * evaluations ({@link candidateMean}); the candidate becomes `evaluated`. Does not save (the caller saves once a step).
 */
export function recordEvaluation(state: MetaState, id: string, step: number, scores: Record<string, number>, cost: { cost_usd: number; tokens: number } = { cost_usd: 0, tokens: 0 }): MetaCandidate {
  const c = candidateOf(state, id);
  if (c.status === "invalid") throw new EvolveError("metaharness_candidate_unknown", `candidate ${id} is invalid and was never stored, so it cannot have been evaluated`, "record scores against the candidate handBack returned");
  const values = Object.values(scores);
  const mean = values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
  c.evaluations.push({ step, scores: { ...scores }, mean, cost_usd: cost.cost_usd, tokens: cost.tokens });
  c.mean = candidateMean(c);
  if (c.status === "queued") c.status = "evaluated";
  state.step = Math.max(state.step, step);
  return c;
}

/**
 * The run's answer: the intact evaluated candidate with the best mean on the search set (digests re-checked; a
 * changed one is marked tampered and passed over), on a tie the one evaluated first. Records it as `finalized` and
 * saves. None → metaharness_nothing_to_hand_back.
 */
export function finalize(run: string, state: MetaState): string {
  for (const c of ranked(state)) {
    const why = tamperReason(run, c);
    if (why) {
      markTampered(state, c, why);
      continue;
    }
    state.finalized = c.id;
    saveState(run, state);
    return c.id;
  }
  saveState(run, state);
  throw new EvolveError("metaharness_nothing_to_hand_back", "no intact evaluated candidate to finalize", "a run must evaluate at least one candidate; `evolve metaharness status <run>` shows each");
}

/** One line of evolution_summary.jsonl: the proposer's view of a candidate. */
export interface SummaryLine {
  id: string;
  round: number;
  hypothesis: string;
  base: string | null;
  status: MetaStatus;
  mean: number | null;
  /** Task → the mean of its scores over the candidate's evaluations. */
  scores: Record<string, number>;
  evaluations: number;
  cost_usd: number;
  tokens: number;
  /** The stored files, relative to the run folder; null for an invalid candidate. */
  files: string | null;
  /** Each evaluation's learning material (step_NNNN/tasks), relative to the run folder. */
  rollouts: string[];
  problems?: string[];
}

/** The summary line of `c`. */
export function summaryLine(run: string, c: MetaCandidate): SummaryLine {
  const sums = new Map<string, { sum: number; n: number }>();
  for (const e of c.evaluations) {
    for (const [task, s] of Object.entries(e.scores)) {
      const t = sums.get(task) ?? { sum: 0, n: 0 };
      t.sum += s;
      t.n++;
      sums.set(task, t);
    }
  }
  return {
    id: c.id,
    round: c.round,
    hypothesis: c.hypothesis,
    base: c.base,
    status: c.status,
    mean: c.mean,
    scores: Object.fromEntries([...sums].map(([k, v]) => [k, v.sum / v.n])),
    evaluations: c.evaluations.length,
    cost_usd: c.evaluations.reduce((a, e) => a + e.cost_usd, 0),
    tokens: c.evaluations.reduce((a, e) => a + e.tokens, 0),
    files: c.digest ? runPaths(run).rel.candidateAdapter(c.id).split(sep).join("/") : null,
    rollouts: c.evaluations.map((e) => `${stepName(e.step)}/tasks`),
    ...(c.problems?.length ? { problems: c.problems } : {}),
  };
}

/** Rewrites workspace/state/evolution_summary.jsonl: one line per candidate, in the order they were recorded. */
export function writeSummary(run: string, state: MetaState): void {
  stateFolder(run);
  const text = state.candidates.map((c) => JSON.stringify(summaryLine(run, c)) + "\n").join("");
  writeRunFile(run, runPaths(run).summary, text);
}

/** What one step did, for its report. */
export interface StepReport {
  /** The candidate the step's rollouts evaluated, and its mean on them. */
  evaluated: string | null;
  mean: number | null;
  /** The round's candidates: stored and queued, and rejected with why. */
  queued: string[];
  rejected: Rejected[];
  /** The candidate handed back for the next step, and why it was chosen. */
  handedBack: { id: string; reason: "queued" | "best" } | null;
}

const fmt = (m: number | null) => (m === null ? "none" : m.toFixed(4));

/** Writes step_NNNN/output/report.md (never through a link the proposer left). */
export function writeStepReport(run: string, step: number, r: StepReport): void {
  const lines = [`# ${stepName(step)}`, ""];
  lines.push(r.evaluated ? `Evaluated: \`${r.evaluated}\`, mean ${fmt(r.mean)} on the search set.` : "Evaluated: nothing.", "");
  if (r.queued.length === 0 && r.rejected.length === 0) lines.push("No proposal round this step.", "");
  else {
    lines.push("## This round's candidates", "");
    for (const q of r.queued) lines.push(`- \`${q}\`: queued`);
    for (const x of r.rejected) lines.push(`- \`${x.id}\`: rejected`, ...x.problems.map((p) => `  - ${p}`));
    lines.push("");
  }
  lines.push(r.handedBack ? `Handed back: \`${r.handedBack.id}\` (${r.handedBack.reason === "queued" ? "next in the queue" : "nothing queued: the best so far, evaluated again"}).` : "Handed back: nothing.", "");
  writeRunFile(run, runPaths(run).stepOutput(step).report, lines.join("\n"));
}

/** One task's learning material of a step, as the proposer reads it. */
export interface StepTaskMaterial {
  input: string;
  output: string;
  score: unknown;
  verifier: string;
  /** The full ATIF trajectory (a document, or its JSON text). */
  trajectory: unknown;
}

/** Writes step_NNNN/tasks/<task>/{input.md, output.txt, score.json, verifier.txt, trajectory.json}, never through a link. */
export function writeStepTask(run: string, step: number, task: string, m: StepTaskMaterial): void {
  const t = runPaths(run).stepTask(step, task);
  writeRunFile(run, t.input, m.input);
  writeRunFile(run, t.output, m.output);
  writeRunFile(run, t.score, JSON.stringify(m.score, null, 2) + "\n");
  writeRunFile(run, t.verifier, m.verifier);
  writeRunFile(run, t.trajectory, typeof m.trajectory === "string" ? m.trajectory : JSON.stringify(m.trajectory, null, 2) + "\n");
}
