/**
 * A round of evolution: screen the candidates → the survivors (and their parents) get full utility, pass@1 over
 * every card → optionally the winner and its parent run on held-out tasks → the confirmed candidates are offered to
 * the gene bank. `evolve/rounds/<n>/round.json` is written after every stage, so a killed round resumes at the stage
 * it stopped in and never re-runs a finished stage (nor a finished harness run within one).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { EvolveError, firstLine } from "../errors.ts";
import { lineage, listCandidates, readCandidate } from "./candidate.ts";
import { offerToGeneBank } from "./genebank.ts";
import { projectPaths } from "../eval/project.ts";
import { judge, parentCost, readRun, readScreen, runHarnessCached, screen, writeJsonAtomic } from "./screen.ts";
import { pairedGainGate, passAt1, statsFromJson, statsToJson } from "../eval/stats.ts";
import type { Attempt, Evaluator, PairedStats } from "../eval/types.ts";
import type { RoundRecord, ScreenRecord } from "./types.ts";

/** The rollouts a round will take, before it starts (`--dry-run`). */
export interface RoundPlan {
  round: number;
  candidates: string[];
  parents: string[];
  sample_size: number;
  all_tasks: number;
  /** (candidates + distinct parents) × sample. */
  screen_rollouts: number;
  /** At most (candidates + parents) × every card: 0 when the sample is every card (the screen's runs are re-used). */
  utility_rollouts: number;
  /** 2 × held-out tasks (the winner and its parent), when a holdout is given. */
  holdout_rollouts: number;
  total_rollouts: number;
}

/** What {@link round} returns. */
export interface RoundsResult {
  rounds: RoundRecord[];
  /** The screens of those rounds, by screen id. */
  screens: Record<string, ScreenRecord>;
  /** Why rounds stopped: the last round's stop, or `no_candidates` when no new candidate was left to screen. */
  stop: "stagnation" | "max_rounds" | "no_candidates" | null;
  /** Set instead of running anything for `dryRun`. */
  plan?: RoundPlan;
}

/** Options of {@link round}. */
export interface RoundOptions {
  project: string;
  /** Runs the screen and the utility (the cards). */
  evaluator: Evaluator;
  /** Default: the scaffolded candidates no round has screened yet. */
  candidates?: string[];
  /** Rounds at most (default 1). */
  maxRounds?: number;
  /** Held-out tasks the winner must also beat its parent on before it may be installed. */
  holdout?: Evaluator;
  /** What the record calls the holdout (default its evaluator's source; e.g. the cards folder given). */
  holdoutLabel?: string;
  dryRun?: boolean;
  /** Resume an unfinished round (default true); false starts a new round beside it. */
  resume?: boolean;
  sampleSize?: number;
  seed?: string;
  noActivationGate?: boolean;
  signal?: AbortSignal;
  /** Progress: a stage starts, a harness runs. */
  onEvent?: (e: { round: number; stage: RoundRecord["stage"]; harness?: string; phase?: "start" | "done" | "reused" }) => void;
}

type HoldoutResult = PairedStats & { held: boolean };

/** A round record as written: the holdout's infinite t as strings. */
export function roundToJson(r: RoundRecord): unknown {
  if (!r.holdout) return r;
  const results: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r.holdout.results)) results[k] = { ...statsToJson(v), held: v.held };
  return { ...r, holdout: { ...r.holdout, results } };
}

/** Every round record of the project, by round number. */
export function readRounds(project: string): RoundRecord[] {
  const dir = projectPaths(project).rounds;
  if (!existsSync(dir)) return [];
  const out: RoundRecord[] = [];
  for (const name of readdirSync(dir)) {
    if (!/^\d+$/.test(name)) continue;
    const file = join(dir, name, "round.json");
    if (!existsSync(file)) continue;
    let raw: RoundRecord;
    try {
      raw = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      throw new EvolveError("round_record_invalid", `cannot read the round record ${file}: ${firstLine(e)}`, "move the round's folder aside and run the round again");
    }
    if (raw.holdout) {
      const results: Record<string, HoldoutResult> = {};
      for (const [k, v] of Object.entries(raw.holdout.results)) results[k] = { ...statsFromJson(v), held: (v as HoldoutResult).held };
      raw = { ...raw, holdout: { ...raw.holdout, results } };
    }
    out.push(raw);
  }
  return out.sort((a, b) => a.round - b.round);
}

/** The candidates no round has screened yet, in id order. */
export function unscreenedCandidates(project: string): string[] {
  const screened = new Set(readRounds(project).flatMap((r) => r.candidates));
  return listCandidates(project)
    .map((d) => d.id)
    .filter((id) => !screened.has(id));
}

/** The rollouts a round of `candidates` takes (the dry run's count). */
export function planRound(o: { project: string; round: number; candidates: string[]; evaluator: Evaluator; holdout?: Evaluator; sampleSize?: number }): RoundPlan {
  const all = o.evaluator.tasks().length;
  const sample = o.sampleSize === undefined ? all : Math.min(o.sampleSize, all);
  const parents = [...new Set(o.candidates.map((c) => readCandidate(o.project, c).descriptor.parent))];
  const harnesses = o.candidates.length + parents.length;
  const screen_rollouts = harnesses * sample;
  const utility_rollouts = sample === all ? 0 : harnesses * all;
  const holdout_rollouts = o.holdout && o.candidates.length > 0 ? 2 * o.holdout.tasks().length : 0;
  return { round: o.round, candidates: o.candidates, parents, sample_size: sample, all_tasks: all, screen_rollouts, utility_rollouts, holdout_rollouts, total_rollouts: screen_rollouts + utility_rollouts + holdout_rollouts };
}

/**
 * The plan of an unfinished round: what is left of it. Stages it finished take nothing, and the screen's finished
 * harness runs (of its recorded sample) are not counted again, since the resume re-uses them.
 */
function planResume(o: RoundOptions, rec: RoundRecord): RoundPlan {
  const screenDir = projectPaths(o.project).screen(rec.screen_id ?? `round-${rec.round}`);
  let recorded: string[] | undefined;
  try {
    recorded = (JSON.parse(readFileSync(join(screenDir, "screen.json"), "utf8")) as ScreenRecord).sample;
  } catch {}
  const plan = planRound({ project: o.project, round: rec.round, candidates: rec.candidates, evaluator: o.evaluator, holdout: o.holdout, sampleSize: recorded?.length ?? o.sampleSize });
  const stages = ["screen", "utility", "holdout", "genebank", "done"];
  const at = stages.indexOf(rec.stage);
  if (at > 0) plan.screen_rollouts = 0;
  else if (recorded) {
    for (const h of [...plan.candidates, ...plan.parents]) {
      const run = readRun(join(screenDir, "runs", `${h}.json`));
      if (run && sameOrder(run.sample, recorded)) plan.screen_rollouts -= recorded.length;
    }
  }
  if (at > 1) plan.utility_rollouts = 0;
  if (at > 2 || (at === 2 && !o.holdout)) plan.holdout_rollouts = 0;
  plan.total_rollouts = plan.screen_rollouts + plan.utility_rollouts + plan.holdout_rollouts;
  return plan;
}

/**
 * Runs rounds until one confirms nothing (stagnation), `maxRounds` have run, or no unscreened candidate is left.
 * An unfinished round on disk is resumed first (unless `resume: false`).
 */
export async function round(o: RoundOptions): Promise<RoundsResult> {
  const maxRounds = o.maxRounds ?? 1;
  if (!Number.isInteger(maxRounds) || maxRounds < 1) throw new EvolveError("usage", `--max-rounds must be a whole number ≥ 1, got ${o.maxRounds}`);
  const result: RoundsResult = { rounds: [], screens: {}, stop: null };
  const existing = readRounds(o.project);
  const last = existing.at(-1);
  let unfinished = (o.resume ?? true) && last && last.stage !== "done" ? last : undefined;
  let next = (last?.round ?? 0) + 1;

  for (let k = 0; k < maxRounds; k++) {
    let rec: RoundRecord;
    if (unfinished) {
      if (o.candidates && !sameSet(o.candidates, unfinished.candidates)) {
        throw new EvolveError("screen_mismatch", `round ${unfinished.round} is unfinished with candidates ${unfinished.candidates.join(", ")}`, "run `evolve harness round` without candidates to resume it, or pass --no-resume");
      }
      rec = unfinished;
      unfinished = undefined;
    } else {
      const candidates = k === 0 && o.candidates ? o.candidates : unscreenedCandidates(o.project);
      if (candidates.length === 0) {
        if (k === 0) throw new EvolveError("screen_no_candidates", "no candidate left to screen: every scaffolded candidate was screened in an earlier round", "scaffold one with `evolve harness scaffold` (the evolver proposes nothing by itself)");
        result.stop = "no_candidates";
        break;
      }
      for (const c of candidates) readCandidate(o.project, c);
      if (o.dryRun) {
        result.plan = planRound({ project: o.project, round: next, candidates, evaluator: o.evaluator, holdout: o.holdout, sampleSize: o.sampleSize });
        return result;
      }
      rec = { round: next++, stage: "screen", candidates, utility: {}, confirmed: [], rejected: {} };
    }
    if (o.dryRun) {
      result.plan = planResume(o, rec);
      return result;
    }
    await runStages(o, rec, result);
    result.rounds.push(rec);
    result.stop = rec.stop ?? null;
    if (rec.stop === "stagnation") break;
    if (k === maxRounds - 1 && rec.stop !== "max_rounds") {
      rec.stop = "max_rounds";
      save(o.project, rec);
      result.stop = "max_rounds";
    }
  }
  return result;
}

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().every((x, i) => x === [...b].sort()[i]);

function save(project: string, rec: RoundRecord): void {
  const dir = projectPaths(project).round(rec.round);
  mkdirSync(dir, { recursive: true });
  writeJsonAtomic(join(dir, "round.json"), roundToJson(rec));
}

type StageCost = { rollouts: number; wall_sec: number; cost_usd: number };

/** The rollouts, wall time and spend of harness runs (a re-used run counts where it first ran, not again). */
function costOfRuns(runs: { attempts: Attempt[]; wall_sec: number }[]): StageCost {
  const c = { rollouts: 0, wall_sec: 0, cost_usd: 0 };
  for (const r of runs) {
    c.rollouts += r.attempts.length;
    c.wall_sec += r.wall_sec;
    c.cost_usd += r.attempts.reduce((s, a) => s + a.cost_usd, 0);
  }
  return { ...c, wall_sec: Math.round(c.wall_sec * 1000) / 1000 };
}

async function runStages(o: RoundOptions, rec: RoundRecord, result: RoundsResult): Promise<void> {
  const dir = projectPaths(o.project).round(rec.round);
  const ev = (stage: RoundRecord["stage"]) => (e: { harness: string; phase: "start" | "done" | "reused" }) => o.onEvent?.({ round: rec.round, stage, harness: e.harness, phase: e.phase });
  save(o.project, rec);
  const screenId = rec.screen_id ?? `round-${rec.round}`;
  // the screen is re-read (or resumed) whatever stage the round is at: later stages need its verdicts
  o.onEvent?.({ round: rec.round, stage: "screen" });
  const scr =
    rec.stage === "screen"
      ? await screen({ project: o.project, candidates: rec.candidates, evaluator: o.evaluator, sampleSize: o.sampleSize, seed: o.seed, noActivationGate: o.noActivationGate, signal: o.signal, id: screenId, onHarness: ev("screen") })
      : readScreen(o.project, screenId);
  result.screens[scr.id] = scr;
  const survivors = scr.candidates.filter((c) => c.passed).map((c) => c.candidate);
  if (rec.stage === "screen") {
    rec.screen_id = scr.id;
    const costs = [...scr.candidates.map((c) => c.cost), ...Object.values(parentCost(o.project, scr))];
    rec.cost = { ...rec.cost, screen: sumCosts(costs) };
    for (const c of scr.candidates) {
      if (c.passed) continue;
      const g = c.gates;
      const failed = g.validity.status === "fail" ? ["validity", g.validity] : g.activation.status === "fail" ? ["activation", g.activation] : ["paired_gain", g.paired_gain];
      rec.rejected[c.candidate] = `${failed[0]}: ${(failed[1] as { detail: string }).detail}`;
    }
    rec.stage = "utility";
    save(o.project, rec);
  }

  const parentOf = new Map(scr.candidates.map((c) => [c.candidate, c.parent]));
  if (rec.stage === "utility") {
    o.onEvent?.({ round: rec.round, stage: "utility" });
    const all = o.evaluator.tasks();
    const reuse = sameOrder(scr.sample, all);
    const harnesses = [...new Set(survivors.flatMap((c) => [parentOf.get(c)!, c]))];
    const ran: { attempts: Attempt[]; wall_sec: number }[] = [];
    for (const h of harnesses) {
      let attempts: Attempt[];
      if (reuse) {
        const sc = scr.candidates.find((c) => c.candidate === h) ?? scr.candidates.find((c) => c.parent === h)!;
        attempts = sc.candidate === h ? sc.attempts.candidate : sc.attempts.parent;
      } else {
        const marker = survivors.includes(h) ? readCandidate(o.project, h).descriptor.activation.marker : null;
        const run = await runHarnessCached({ project: o.project, dir: join(dir, "utility"), harness: h, marker, tasks: all, evaluator: o.evaluator, signal: o.signal, onHarness: ev("utility") });
        ran.push(run);
        attempts = run.attempts;
      }
      rec.utility[h] = passAt1(attempts);
    }
    rec.cost = { ...rec.cost, utility: costOfRuns(ran) };
    const parents = [...new Set(survivors.map((c) => parentOf.get(c)!))];
    if (parents.length === 1) rec.parent_utility = rec.utility[parents[0]];
    for (const c of survivors) {
      const pu = rec.utility[parentOf.get(c)!];
      if (rec.utility[c] < pu) rec.rejected[c] = `utility: pass@1 ${fmt(rec.utility[c])} over every card is below the parent's ${fmt(pu)}`;
      else rec.confirmed.push(c);
    }
    rec.stage = o.holdout && rec.confirmed.length > 0 ? "holdout" : "genebank";
    save(o.project, rec);
  }

  if (rec.stage === "holdout") {
    o.onEvent?.({ round: rec.round, stage: "holdout" });
    const h = o.holdout;
    if (!h) throw new EvolveError("screen_mismatch", `round ${rec.round} stopped at its held-out check, and no --holdout was given to finish it`, "run the round again with the same --holdout");
    const winner = [...rec.confirmed].sort((a, b) => rec.utility[b] - rec.utility[a] || (a < b ? -1 : 1))[0];
    const parent = parentOf.get(winner)!;
    const tasks = h.tasks();
    const hdir = join(dir, "holdout");
    const par = await runHarnessCached({ project: o.project, dir: hdir, harness: parent, marker: null, tasks, evaluator: h, signal: o.signal, onHarness: ev("holdout") });
    const cand = await runHarnessCached({ project: o.project, dir: hdir, harness: winner, marker: readCandidate(o.project, winner).descriptor.activation.marker, tasks, evaluator: h, signal: o.signal, onHarness: ev("holdout") });
    const j = judge({ candidate: winner, parent, marker: null, cand: cand.attempts, par: par.attempts, noActivationGate: true });
    // strict: the held-out gain must pass the same paired-gain gate as the screen, on valid pairs only
    const held = j.gates.validity.status === "pass" && pairedGainGate(j.stats).status === "pass";
    rec.holdout = { source: o.holdoutLabel ?? h.source, results: { [winner]: { ...j.stats, held } } };
    rec.cost = { ...rec.cost, holdout: costOfRuns([par, cand]) };
    rec.stage = "genebank";
    save(o.project, rec);
  }

  if (rec.stage === "genebank") {
    o.onEvent?.({ round: rec.round, stage: "genebank" });
    rec.genebank ??= {};
    for (const c of rec.confirmed) {
      if (rec.genebank[c]) continue;
      if (rec.holdout?.results[c]?.held === false) {
        rec.genebank[c] = { accepted: false, reason: "the held-out gain did not hold: not offered" };
        continue;
      }
      const d = readCandidate(o.project, c).descriptor;
      const r = offerToGeneBank(o.project, { where: d.where, pathology: d.pathology, harness_id: c, utility: rec.utility[c], lineage: lineage(o.project, c), round: rec.round, at: new Date().toISOString() });
      rec.genebank[c] = { accepted: r.accepted, reason: r.reason };
      save(o.project, rec);
    }
    rec.stage = "done";
    rec.stop = rec.confirmed.length === 0 ? "stagnation" : null;
    save(o.project, rec);
  }
}

const sumCosts = (cs: StageCost[]): StageCost => ({
  rollouts: cs.reduce((s, c) => s + c.rollouts, 0),
  wall_sec: Math.round(cs.reduce((s, c) => s + c.wall_sec, 0) * 1000) / 1000,
  cost_usd: cs.reduce((s, c) => s + c.cost_usd, 0),
});

const sameOrder = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
const fmt = (v: number) => v.toFixed(3);
