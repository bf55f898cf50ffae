/**
 * `evolve harness scaffold|screen|round|install|genebank show|eval`: the evolver's verbs over a project folder (the
 * live `.agent/` and `evolve/` beside it). These parse flags and print; the engine (engine/evolve on engine/eval) does the work.
 * `harness diagnose` is commands/harness-diagnose.ts.
 */
import { preflightModel } from "../engine/model-preflight.ts";
import { join, resolve } from "node:path";
import { loadConfig } from "../engine/config.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { EvolveError } from "../engine/errors.ts";
import {
  installCandidate,
  newRunId,
  parentCost,
  round,
  type RoundsResult,
  scaffoldCandidate,
  screen,
  type ScreenRecord,
  undoInstall,
  unscreenedCandidates,
} from "../engine/evolve/mod.ts";
import {
  appendOverlayEpisodes,
  attemptPassed,
  boxedCardsEvaluator,
  cardsEvaluator,
  conductorCardRunner,
  datasetEvaluator,
  type Evaluator,
  HOST_MODE_NOTICE,
  loadCards,
  loadRunner,
  type LocalGateway,
  openLocalGateway,
  passAt1,
  projectPaths,
  runCardCheck,
} from "../engine/eval/mod.ts";
import { namesDataset } from "../engine/dataset-ref.ts";
import type { Store } from "../engine/store/mod.ts";
import { geneBankDocument, roundsResultDocument, screenDocument } from "../engine/evolve/mod.ts";
import { out, outJson, outTable, style } from "./output.ts";
import { withStore } from "./store.ts";

const projectOf = (p?: string) => resolve(p ?? process.cwd());

/** Parses a whole number flag ≥ `min`. */
function intFlag(name: string, v: string | undefined, min = 1): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new EvolveError("usage", `${name} must be a whole number ≥ ${min}, got ${JSON.stringify(v)}`);
  return n;
}

/** An AbortSignal raised by SIGINT/SIGTERM for the duration of `fn`, so a killed screen stops between records. */
async function interruptible<T>(fn: (signal: AbortSignal) => Promise<T>, what: string, again = "run the same command again: it resumes where it stopped"): Promise<T> {
  const ctl = new AbortController();
  const stop = () => ctl.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    return await fn(ctl.signal);
  } catch (e) {
    if (ctl.signal.aborted) throw new EvolveError("evolve_interrupted", `${what} was interrupted; its finished runs are recorded`, again);
    throw e;
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
}

/** Options shared by the commands that run harnesses. */
export interface RunOpts {
  project?: string;
  dataset?: string;
  model?: string;
  agent?: string;
  sample?: string;
  seed?: string;
  activationGate?: boolean;
  /** `--on-host`: cards run on the host (engine/eval/evals.ts cardsEvaluator), not in podman boxes (the default). */
  onHost?: boolean;
  json?: boolean;
}

/**
 * Opens what the evaluator needs (the store; an engine for boxes; a local gateway for host cards) around `fn`: the
 * cards of `evolve/evals/` with runner.json, in podman boxes (engine/eval/card-tasks.ts) or, with `--on-host`, on
 * this machine; or the dataset `-d name@version` as real jobs.
 */
async function withEvaluator<T>(project: string, o: { dataset?: string; model?: string; agent?: string; holdout?: string; onHost?: boolean; dryRun?: boolean; command: string }, fn: (ev: Evaluator, holdout: Evaluator | undefined) => Promise<T>): Promise<T> {
  return withStore(async (store, home) => {
    let gateway: LocalGateway | undefined;
    const warn = (m: string) => process.stderr.write(`${style.yellow("warning")}: ${m}\n`);
    const needCards = !o.dataset || (o.holdout !== undefined && !namesDataset(o.holdout));
    // cards run on the host only when the user said so; a dry run runs nothing and needs no gateway
    const hostCards = needCards && !!o.onHost && !o.dryRun;
    // said once, when the first card runs on the host (not before a refusal, which keeps its one line)
    let noticed = false;
    const onHost = (ev: Evaluator): Evaluator => ({
      ...ev,
      run: (r) => {
        if (!noticed) warn(HOST_MODE_NOTICE);
        noticed = true;
        return ev.run(r);
      },
    });
    const engine = () => openEngine({ home: loadConfig(home).home });
    try {
      const cards = async (dir?: string): Promise<Evaluator> => {
        const runner = loadRunner(project);
        if (o.model) runner.model = o.model;
        const list = loadCards(project, dir);
        if (!hostCards) {
          // the default: every card a podman trial of the conductor (a command runner is refused: it is a host program)
          if (runner.agent === "conductor") preflightModel({ home, agent: "conductor", model: runner.model });
          if (o.dryRun) return cardsEvaluator({ project, cards: list, runner, gateway, conductor: conductorCardRunner });
          return boxedCardsEvaluator({ store, home, engine, project, cards: list, runner, warn });
        }
        // the conductor reaches its model through the local gateway: refused here if it cannot (engine/model-preflight.ts)
        if (runner.agent === "conductor") preflightModel({ home, agent: "conductor", model: runner.model });
        return onHost(cardsEvaluator({ project, cards: list, runner, gateway, conductor: conductorCardRunner }));
      };
      const dataset = (ref: string) => {
        preflightModel({ home, agent: o.agent ?? "conductor", model: o.model });
        return datasetFor(store, home, ref, o, warn);
      };
      if (hostCards) gateway = await openLocalGateway({ home, store, warn });
      const ev = o.dataset ? dataset(o.dataset) : await cards();
      const holdout = o.holdout === undefined ? undefined : namesDataset(o.holdout) ? dataset(o.holdout) : await cards(resolve(o.holdout));
      return await fn(ev, holdout);
    } finally {
      await gateway?.close();
    }
  });
}

function datasetFor(store: Store, home: string, ref: string, o: { agent?: string; model?: string }, warn: (m: string) => void): Evaluator {
  return datasetEvaluator({ store, home, engine: () => openEngine({ home: loadConfig(home).home }), ref, agent: o.agent ?? "conductor", model: o.model, warn });
}

const num = (v: number | null | undefined, digits = 3) => (v === null || v === undefined ? "–" : v === Infinity ? "+inf" : v === -Infinity ? "-inf" : v.toFixed(digits));
const gateWord = (g: { status: string }) => (g.status === "pass" ? style.green("pass") : g.status === "fail" ? style.red("FAIL") : style.yellow(g.status));

/** The gates, stats and cost of every candidate of a screen, as a table, then the limits. */
function printScreen(project: string, rec: ScreenRecord): void {
  out(`${style.bold("screen")} ${rec.id}  ${style.dim(`${rec.source}, ${rec.sample.length} tasks${rec.seed ? `, seed ${rec.seed}` : ""}`)}`);
  outTable(
    ["CANDIDATE", "PARENT", "VALID", "ACTIVE", "GAIN", "t", "MEAN", "95% CI", "SIGN p", "RESULT", "ROLLOUTS", "WALL", "COST"],
    rec.candidates.map((c) => [
      c.candidate,
      c.parent,
      gateWord(c.gates.validity),
      gateWord(c.gates.activation),
      gateWord(c.gates.paired_gain),
      num(c.stats.t, 2),
      num(c.stats.mean_gain),
      c.stats.ci95 ? `[${num(c.stats.ci95[0])}, ${num(c.stats.ci95[1])}]` : "–",
      num(c.stats.sign_test.p, 4),
      c.passed ? style.green("passed") : style.red("rejected"),
      c.cost.rollouts,
      `${c.cost.wall_sec.toFixed(1)}s`,
      `$${c.cost.cost_usd.toFixed(4)}`,
    ]),
  );
  for (const c of rec.candidates) {
    for (const [name, g] of Object.entries(c.gates)) if (g.status !== "pass") out(`  ${c.candidate} ${name}: ${g.detail}`);
    // the seed's t gate decides; a pass the sign test does not back is said, not hidden
    if (c.passed && c.sign_test && !c.sign_test.significant) out(style.yellow(`  ${c.candidate} sign test: ${c.sign_test.detail}`));
  }
  for (const [p, cost] of Object.entries(parentCost(project, rec))) out(style.dim(`  parent ${p}: ${cost.rollouts} rollouts, ${cost.wall_sec.toFixed(1)}s, $${cost.cost_usd.toFixed(4)}`));
  for (const [h, job] of Object.entries(rec.jobs ?? {})) out(style.dim(`  job of ${h}: ${job} (evolve job show ${job})`));
  for (const l of rec.limits) out(style.dim(`  limit: ${l}`));
}

/** `evolve harness scaffold --where W --pathology P --hypothesis H [--marker M] [--parent ID] [--file PATH]…`. */
export async function scaffoldCommand(opts: { project?: string; where: string; pathology: string; hypothesis: string; marker?: string; parent?: string; file?: string[]; json?: boolean }): Promise<number> {
  const project = projectOf(opts.project);
  const d = scaffoldCandidate(project, { where: opts.where, pathology: opts.pathology, hypothesis: opts.hypothesis, marker: opts.marker, parent: opts.parent, files: opts.file && opts.file.length > 0 ? opts.file : undefined });
  const files = `${projectPaths(project).candidate(d.id)}/files`;
  if (opts.json) return outJson({ ...d, files_dir: files }), 0;
  out(`${style.bold("candidate")} ${d.id}  ${style.dim(`(${d.where}, parent ${d.parent})`)}`);
  out(`edit its files in ${files}, then: evolve harness screen ${d.id}`);
  if (!d.activation.marker) out(style.yellow("no --marker: its activation gate will be reported unverified"));
  return 0;
}

/** `evolve harness screen [CANDIDATE…]`: exit 0 when at least one candidate passed, 1 when none did. */
export async function screenCommand(candidates: string[], opts: RunOpts & { id?: string }): Promise<number> {
  const project = projectOf(opts.project);
  const ids = candidates.length > 0 ? candidates : unscreenedCandidates(project);
  if (ids.length === 0) throw new EvolveError("screen_no_candidates", "no candidate to screen: none named, and every scaffolded one was screened in a round", "scaffold one with `evolve harness scaffold`");
  const rec = await withEvaluator(project, { ...opts, command: "harness screen" }, (ev) => {
    // the screen's folder is made once the model passed the preflight (withEvaluator): a refusal leaves none behind
    const id = opts.id ?? newRunId(project, "s");
    return interruptible(
      (signal) =>
        screen({
          project,
          candidates: ids,
          evaluator: ev,
          sampleSize: intFlag("--sample", opts.sample),
          seed: opts.seed,
          noActivationGate: opts.activationGate === false,
          signal,
          id,
          onHarness: opts.json ? undefined : (e) => e.phase !== "start" && process.stderr.write(style.dim(`${e.harness}: ${e.phase === "reused" ? "re-used its finished run" : `${e.attempts?.length ?? 0} attempts`}\n`)),
        }),
      `screen ${id}`,
      `run it again with --id ${id}: it re-uses the finished runs`,
    );
  });
  if (opts.json) outJson(screenDocument(project, rec));
  else printScreen(project, rec);
  return rec.candidates.some((c) => c.passed) ? 0 : 1;
}

function printRound(project: string, r: RoundsResult): void {
  for (const rec of r.rounds) {
    out(`${style.bold(`round ${rec.round}`)}  ${style.dim(`${rec.candidates.length} candidates, stage ${rec.stage}`)}`);
    const scr = rec.screen_id ? r.screens[rec.screen_id] : undefined;
    if (scr) printScreen(project, scr);
    for (const [h, u] of Object.entries(rec.utility)) out(`  utility ${h}: pass@1 ${u.toFixed(3)}`);
    const costs = Object.entries(rec.cost ?? {}).map(([stage, c]) => `${stage} ${c.rollouts} rollouts, ${c.wall_sec.toFixed(1)}s, $${c.cost_usd.toFixed(4)}`);
    if (costs.length > 0) out(style.dim(`  cost: ${costs.join("; ")}`));
    for (const [id, why] of Object.entries(rec.rejected)) out(`  ${style.red("rejected")} ${id}: ${why}`);
    for (const id of rec.confirmed) {
      const h = rec.holdout?.results[id];
      const gb = rec.genebank?.[id];
      out(`  ${style.green("confirmed")} ${id}${h ? `; held-out (${rec.holdout!.source}): mean gain ${num(h.mean_gain)}, t ${num(h.t, 2)}, ${h.held ? style.green("held") : style.red("did not hold: install refused without --override-holdout")}` : ""}${gb ? `; gene bank: ${gb.reason}` : ""}`);
    }
  }
  out(r.stop === "stagnation" ? "stopped: stagnation (no candidate confirmed)" : r.stop === "max_rounds" ? "stopped: --max-rounds reached" : r.stop === "no_candidates" ? "stopped: no new candidate to screen (the evolver proposes nothing by itself)" : "");
}

/** `evolve harness round`: exit 0 when a candidate was confirmed (or a dry run), 1 otherwise. */
export async function roundCommand(candidates: string[], opts: RunOpts & { maxRounds?: string; holdout?: string; dryRun?: boolean; resume?: boolean }): Promise<number> {
  const project = projectOf(opts.project);
  const r = await withEvaluator(project, { ...opts, command: "harness round" }, (ev, holdout) =>
    interruptible(
      (signal) =>
        round({
          project,
          evaluator: ev,
          candidates: candidates.length > 0 ? candidates : undefined,
          maxRounds: intFlag("--max-rounds", opts.maxRounds),
          holdout,
          holdoutLabel: opts.holdout === undefined || namesDataset(opts.holdout) ? undefined : `cards:${resolve(opts.holdout)}`,
          dryRun: opts.dryRun,
          resume: opts.resume,
          sampleSize: intFlag("--sample", opts.sample),
          seed: opts.seed,
          noActivationGate: opts.activationGate === false,
          signal,
          onEvent: opts.json ? undefined : (e) => e.harness && e.phase !== "start" && process.stderr.write(style.dim(`round ${e.round} ${e.stage}: ${e.harness} ${e.phase === "reused" ? "re-used" : "ran"}\n`)),
        }),
      "the round",
    ),
  );
  if (opts.json) outJson(roundsResultDocument(r, project));
  else if (r.plan) {
    const p = r.plan;
    out(`${style.bold(`round ${p.round}`)} would run ${p.total_rollouts} rollouts at most:`);
    out(`  screen   ${p.screen_rollouts}  (${p.candidates.length} candidates + ${p.parents.length} parents) × ${p.sample_size} tasks`);
    out(`  utility  ${p.utility_rollouts}  ${p.utility_rollouts === 0 ? "(the screen's runs are re-used: the sample is every card)" : `(survivors + parents) × ${p.all_tasks} cards, if every candidate survives`}`);
    out(`  holdout  ${p.holdout_rollouts}`);
  } else printRound(project, r);
  return r.plan || r.rounds.some((x) => x.confirmed.length > 0) ? 0 : 1;
}

/** `evolve harness install <id> [--force] [--override-holdout]` or `install --undo`. */
export async function installCommand(id: string | undefined, opts: { project?: string; force?: boolean; overrideHoldout?: boolean; requireSignTest?: boolean; undo?: boolean; json?: boolean }): Promise<number> {
  const project = projectOf(opts.project);
  if (opts.undo && id) throw new EvolveError("usage", "install --undo takes no candidate id: it restores the newest install");
  if (!opts.undo && !id) throw new EvolveError("usage", "install needs a candidate id (or --undo)", "e.g. evolve harness install c-20260102030405-ab12");
  const rec = opts.undo ? undoInstall(project) : installCandidate(project, id!, { force: opts.force, overrideHoldout: opts.overrideHoldout, requireSignTest: opts.requireSignTest });
  if (opts.json) return outJson({ undo: !!opts.undo, ...rec }), 0;
  const files = (rec as { files?: unknown[] }).files?.length ?? 0;
  const st = (rec as { sign_test?: { significant: boolean; detail: string } | null }).sign_test;
  if (!opts.undo && st && !st.significant) out(style.yellow(`warning: ${id} was confirmed on weak evidence: ${st.detail} (--require-sign-test refuses such a candidate)`));
  out(opts.undo ? `restored the live .agent/ from before ${(rec as { candidate?: string }).candidate} (${files} files)` : `installed ${id} into the live .agent/ (${files} files; originals backed up under ${projectPaths(project).backups}); undo with: evolve harness install --undo`);
  return 0;
}

/** `evolve harness genebank show`: the holder of each (where, pathology) cell, with its lineage. */
export async function genebankShowCommand(opts: { project?: string; json?: boolean }): Promise<number> {
  const project = projectOf(opts.project);
  const doc = geneBankDocument(project);
  const { cells, skipped_lines: skipped } = doc;
  if (opts.json) return outJson(doc), 0;
  if (cells.length === 0) out("the gene bank is empty: a round adds the candidates it confirms");
  else outTable(["WHERE", "PATHOLOGY", "HARNESS", "UTILITY", "ROUND", "LINEAGE"], cells.map((c) => [c.where, c.pathology, c.harness_id, c.utility.toFixed(3), c.round, c.lineage.join(" → ")]));
  if (skipped > 0) out(style.yellow(`${skipped} torn or unreadable lines of ${projectPaths(project).genebank} skipped`));
  return 0;
}

/** `evolve harness eval`: the live .agent/ on every card (a copy, memory kept live): the baseline's pass@1. */
export async function evalCommand(opts: { project?: string; model?: string; onHost?: boolean; json?: boolean }): Promise<number> {
  const project = projectOf(opts.project);
  const { runHarnessCached } = await import("../engine/evolve/mod.ts");
  let id = "";
  let dir = "";
  const run = await withEvaluator(project, { ...opts, command: "harness eval" }, (ev) => {
    // the eval's folder is made once the model passed the preflight (withEvaluator): a refusal leaves none behind
    id = newRunId(project, "eval");
    dir = projectPaths(project).screen(id);
    return interruptible((signal) => runHarnessCached({ project, dir, harness: "live", marker: null, tasks: ev.tasks(), evaluator: ev, signal }), "the eval");
  });
  const episodes = appendOverlayEpisodes(join(dir, "overlays", "live", ".agent"), projectPaths(project).agent);
  const passed = run.attempts.filter(attemptPassed).length;
  const utility = passAt1(run.attempts);
  const invalid = run.attempts.filter((a) => !a.valid).length;
  if (opts.json) return outJson({ id, utility, passed, tasks: run.attempts.length, invalid, episodes, attempts: run.attempts, cost_usd: run.attempts.reduce((s, a) => s + a.cost_usd, 0), wall_sec: run.wall_sec }), 0;
  outTable(["CARD", "SCORE", "VALID", "EXIT", "WALL", "COST"], run.attempts.map((a) => [a.task, a.score === null ? "–" : a.score.toFixed(3), a.valid ? "yes" : style.red(a.invalid_reason ?? "no"), a.exit_code ?? "–", `${a.wall_sec.toFixed(1)}s`, `$${a.cost_usd.toFixed(4)}`]));
  out(`live pass@1 ${utility.toFixed(3)} (${passed}/${run.attempts.length})${invalid ? `, ${invalid} invalid` : ""}; logs under ${dir}${episodes ? `; ${episodes} episodes appended to the live memory` : ""}`);
  return 0;
}

/**
 * `evolve harness card-check --card F --output F --reward F` (hidden): the verifier of a card's box, run there by the
 * read-only evolve binary (engine/eval/card-tasks.ts runCardCheck); prints what the check decided.
 */
export async function cardCheckCommand(opts: { card: string; output: string; reward: string }): Promise<number> {
  const r = await runCardCheck(opts);
  out(`${r.passed ? "passed" : "failed"}: ${r.detail}`);
  return 0;
}
