/**
 * `evolve metaharness check-spec|status|finalize`: the Meta-Harness Adapter search's checks and records from the
 * command line (engine/metaharness). Parsing and printing only; the run loop itself is another command's.
 */
import { readdirSync } from "node:fs";
import { resolve } from "node:path";
import { EvolveError } from "../engine/errors.ts";
import { out, outJson, outTable } from "./output.ts";
import type { MetaRunFlags } from "../engine/metaharness/mod.ts";

/** `check-spec <dir>`: exit 0 when the folder is a complete adapter, 1 with its problems one per line. */
export async function checkSpecCommand(dir: string, opts: { template?: string; json?: boolean }): Promise<number> {
  const { checkSpec, templateHermit } = await import("../engine/metaharness/mod.ts");
  const template = opts.template === undefined ? undefined : resolve(opts.template);
  // a template that is not one is the command line's fault, not the candidate's: say so before judging the candidate
  if (template !== undefined) templateHermit(template);
  const r = checkSpec(dir, template === undefined ? {} : { template });
  if (opts.json) outJson({ dir: resolve(dir), ok: r.ok, problems: r.problems });
  else if (r.ok) out(`ok: ${dir} is a complete adapter`);
  else for (const p of r.problems) out(p);
  return r.ok ? 0 : 1;
}

const fmt = (m: number | null) => (m === null ? "-" : m.toFixed(4));

/** `status <run>`: every candidate with its round, status, mean and evaluations; the queue, the one handed back, the final one. */
export async function statusCommand(run: string, opts: { json?: boolean }): Promise<number> {
  const doc = (await import("../engine/metaharness/mod.ts")).statusDocument(resolve(run));
  if (opts.json) return outJson(doc), 0;
  const { candidates, spend } = doc;
  const s = doc;
  out(`step ${s.step}, round ${s.round}`);
  outTable(
    ["ID", "ROUND", "STATUS", "MEAN", "EVALS", "HYPOTHESIS"],
    candidates.map((c) => [c.id, c.round, c.status, fmt(c.mean), c.evaluations, c.hypothesis.length > 60 ? `${c.hypothesis.slice(0, 57)}...` : c.hypothesis]),
  );
  out(`queue: ${s.queue.length > 0 ? s.queue.join(", ") : "(empty)"}`);
  out(`handed back: ${s.handedBack ?? "-"}`);
  out(`finalized: ${s.finalized ?? "-"}`);
  outTable(
    ["ROUND", "STEP", "ROLLOUTS", "ROLLOUT $", "PROPOSER $", "PROPOSER TOKENS"],
    spend.map((r) => [r.round, r.step ?? "-", r.rollouts, `$${r.rollouts_usd.toFixed(4)}`, r.round === 0 ? "-" : `$${r.proposer_usd.toFixed(4)}${r.proposer_cost_source === "lower_bound" ? " (at least)" : ""}`, r.round === 0 ? "-" : r.proposer_tokens]),
  );
  return 0;
}

/** Whether `dir` is missing or an empty folder (what `--out` may be). */
function usableOut(dir: string): boolean {
  try {
    return readdirSync(dir).length === 0;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/** `finalize <run>`: the intact candidate with the best mean; `--out DIR` gets a copy of its adapter. */
export async function finalizeCommand(run: string, opts: { out?: string; json?: boolean }): Promise<number> {
  const outDir = opts.out === undefined ? undefined : resolve(opts.out);
  if (outDir !== undefined && !usableOut(outDir)) throw new EvolveError("metaharness_out_exists", `--out ${outDir} exists and is not an empty folder`, "give a new folder (or an empty one)");
  const { candidateOf, finalize, loadState } = await import("../engine/metaharness/mod.ts");
  const { runPaths } = await import("../engine/metaharness/mod.ts");
  const root = resolve(run);
  const s = loadState(root);
  const id = finalize(root, s);
  const c = candidateOf(s, id);
  if (outDir !== undefined) {
    const { copyTreeOver, newBudget } = await import("../engine/eval/mod.ts");
    copyTreeOver(runPaths(root).candidateAdapter(id), outDir, newBudget());
  }
  if (opts.json) {
    outJson({ id, mean: c.mean, evaluations: c.evaluations.length, adapter: runPaths(root).candidateAdapter(id), out: outDir ?? null });
    return 0;
  }
  out(`finalized ${id}: mean ${fmt(c.mean)} over ${c.evaluations.length} evaluation${c.evaluations.length === 1 ? "" : "s"} on the search set`);
  out(outDir !== undefined ? `copied its adapter to ${outDir}` : `its adapter: ${runPaths(root).candidateAdapter(id)}`);
  return 0;
}

/** The flags of `evolve metaharness run` as commander gives them: the engine's MetaRunFlags, and the printing ones. */
export interface RunFlags extends MetaRunFlags {
  dryRun?: boolean;
  /** `--on-host`: task cards run on the host (engine/eval/evals.ts cardsEvaluator), not in podman boxes (the default). */
  onHost?: boolean;
  json?: boolean;
}

/**
 * `run`: the search loop (engine/metaharness/run.ts) over the real evaluator (the search set as jobs) and the real
 * proposer (runProposer); `--dry-run` prints the projected rollouts and proposer sessions and runs nothing. SIGINT
 * or SIGTERM stops it between records (`evolve_interrupted`); the same command resumes it.
 */
export async function runCommand(flags: RunFlags): Promise<number> {
  const { resolveRunConfig } = await import("../engine/metaharness/mod.ts");
  const cfg = resolveRunConfig(flags);
  const { readFileSync } = await import("node:fs");
  const { loadConfig } = await import("../engine/config.ts");
  const { openEngine } = await import("../engine/engine-choice.ts");
  const { datasetEvaluator } = await import("../engine/eval/mod.ts");
  const { importTasks } = await import("../engine/dataset.ts");
  const { boxedCardsSearch, cardsSearch, planRun, realPropose, runMetaHarness, searchOf, trialMaterial } = await import("../engine/metaharness/mod.ts");
  const { withStore } = await import("./store.ts");
  const { style } = await import("./output.ts");
  const warn = (m: string) => process.stderr.write(`${style.yellow("warning")}: ${m}\n`);
  let prompt: string | undefined;
  if (cfg.proposer.prompt !== undefined) {
    try {
      prompt = readFileSync(cfg.proposer.prompt, "utf8");
    } catch (e) {
      throw new EvolveError("metaharness_config_invalid", `proposer.prompt: ${cfg.proposer.prompt} cannot be read (${(e as NodeJS.ErrnoException).code ?? "unreadable"})`, "give the round prompt's file (PROPOSE.md)");
    }
  }
  return withStore(async (store, home) => {
    // before anything is recorded: an agent whose model the gateway cannot serve would score nothing but failures
    // and the proposer's: a round whose proposer never met its model would write no candidate and end the search
    if (!flags.dryRun) {
      const { preflightModel } = await import("../engine/model-preflight.ts");
      const { proposerAgent } = await import("../engine/metaharness/mod.ts");
      preflightModel({ home, agent: cfg.agent, model: cfg.model });
      preflightModel({ home, agent: proposerAgent(cfg.proposer.backend), model: cfg.proposer.model });
    }
    const engine = () => openEngine({ home: loadConfig(home).home });
    const evaluatorOf = async (search: Exclude<typeof cfg.search, { kind: "cards" }>) => {
      const base = { store, home, engine, agent: cfg.agent, model: cfg.model, warn, ...(cfg.concurrency !== undefined ? { concurrency: cfg.concurrency } : {}) };
      if (search.kind === "path") {
        const imported = await importTasks(store, home, search.dir, { secrets: new Set() });
        return datasetEvaluator({ ...base, ref: search.dir, imported: { path: search.dir, tasks: imported.tasks } });
      }
      return datasetEvaluator({ ...base, ref: search.ref });
    };
    // cards run in podman boxes unless the user said --on-host
    const hostCards = cfg.search.kind === "cards" && !!flags.onHost;
    // on the host, the conductor reaches its model through a local gateway, open for the whole run
    let gateway: Awaited<ReturnType<typeof import("../engine/eval/mod.ts").openLocalGateway>> | undefined;
    if (hostCards && !flags.dryRun) {
      const { openLocalGateway } = await import("../engine/eval/mod.ts");
      gateway = await openLocalGateway({ home, store, warn });
    }
    try {
      return await runWith(gateway);
    } finally {
      await gateway?.close();
    }
    /** The run (or its dry run) once the search set's evaluator can be made: a cards run on the host needs the gateway open. */
    async function runWith(gateway: import("../engine/eval/mod.ts").CardsGateway | undefined): Promise<number> {
      let search: import("../engine/metaharness/mod.ts").SearchEvaluator;
      let tasks: number;
      if (cfg.search.kind === "cards" && !hostCards) {
        search = boxedCardsSearch({ store, home, engine, dir: cfg.search.dir, run: cfg.run, agent: cfg.agent, ...(cfg.model !== undefined ? { model: cfg.model } : {}), ...(cfg.concurrency !== undefined ? { concurrency: cfg.concurrency } : {}), warn });
        tasks = search.tasks().length;
      } else if (cfg.search.kind === "cards") {
        const { conductorCardRunner } = await import("../engine/eval/mod.ts");
        search = cardsSearch({ dir: cfg.search.dir, agent: cfg.agent, ...(cfg.model !== undefined ? { model: cfg.model } : {}), ...(gateway ? { gateway } : {}), conductor: conductorCardRunner });
        tasks = search.tasks().length;
      } else {
        const ev = await evaluatorOf(cfg.search);
        search = searchOf(ev, (a) => trialMaterial(store, home, a));
        tasks = ev.tasks().length;
      }
      const hev = cfg.holdout !== undefined ? datasetEvaluator({ store, home, engine, ref: cfg.holdout, agent: cfg.agent, model: cfg.model, warn }) : undefined;
      if (flags.dryRun) {
        const plan = planRun(cfg, tasks, hev ? { source: hev.source, tasks: hev.tasks().length } : undefined);
        if (flags.json) return outJson({ run: cfg.run, dry_run: true, plan, result: null }), 0;
        out(`${style.bold("metaharness run")} ${cfg.run}  ${style.dim("(dry run: nothing runs)")}`);
        out(`search set: ${plan.search}, ${plan.tasks} task${plan.tasks === 1 ? "" : "s"}; agent ${cfg.agent}${cfg.model ? ` (${cfg.model})` : ""}`);
        out(`steps: ${plan.epochs} (k ${plan.k}, max_rounds ${plan.max_rounds ?? "none"}), ${plan.done_steps} already recorded`);
        out(`rollouts: ${plan.rollouts} = ${plan.epochs} × ${plan.tasks}${plan.done_steps > 0 ? `, ${plan.remaining_rollouts} left` : ""}`);
        out(`proposer sessions: ${plan.proposer_sessions} (${cfg.proposer.backend}, ${cfg.proposer.model})`);
        if (plan.holdout) out(`holdout: ${plan.holdout.source}, ${plan.holdout.rollouts} rollouts (the chosen and the starting adapter × ${plan.holdout.tasks})`);
        return 0;
      }
      const plan = planRun(cfg, tasks, hev ? { source: hev.source, tasks: hev.tasks().length } : undefined);
      if (!flags.json) out(style.dim(`${plan.search}: ${plan.tasks} tasks × ${plan.epochs} steps = ${plan.rollouts} rollouts${plan.done_steps > 0 ? ` (${plan.remaining_rollouts} left)` : ""}, up to ${plan.proposer_sessions} proposer session${plan.proposer_sessions === 1 ? "" : "s"}`));
      const material = (a: Parameters<typeof trialMaterial>[2]) => trialMaterial(store, home, a);
      const ctl = new AbortController();
      const stop = () => ctl.abort();
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      const say = (line: string) => {
        if (!flags.json) out(line);
      };
      const fmt4 = (m: number | null) => (m === null ? "-" : m.toFixed(4));
      if (hostCards) {
        const { HOST_MODE_NOTICE } = await import("../engine/eval/mod.ts");
        warn(HOST_MODE_NOTICE);
      }
      try {
        const r = await runMetaHarness({
          config: cfg,
          search,
          ...(hev ? { holdout: searchOf(hev, material) } : {}),
          propose: realPropose({ store, home, engine, config: cfg, ...(prompt !== undefined ? { prompt } : {}), warn }),
          signal: ctl.signal,
          onEvent: (e) => {
            if (e.type === "seeded") say(`seeded ${cfg.run} with the starting adapter (${e.id})`);
            else if (e.type === "resumed") say(`resuming ${cfg.run} after step ${e.step}, round ${e.round}`);
            else if (e.type === "step_start") say(`step ${e.step}: evaluating ${e.candidate} on ${e.tasks} tasks`);
            else if (e.type === "step_done") say(`step ${e.step}: ${e.candidate} mean ${fmt4(e.mean)}, $${e.cost_usd.toFixed(4)}`);
            else if (e.type === "round_start") say(`round ${e.round}: proposer session (${cfg.proposer.backend})`);
            else if (e.type === "round_done") say(`round ${e.round}: queued ${e.queued.join(", ") || "none"}; rejected ${e.rejected.map((x) => x.id).join(", ") || "none"}; $${e.cost_usd.toFixed(4)}`);
            else if (e.type === "tampered") say(`${style.red("tampered")}: ${e.id} (${e.reason}); never handed back`);
            else if (e.type === "handed_back") say(`handed back ${e.id}${e.reason === "best" ? " (nothing queued: the best so far, again)" : ""}`);
          },
        });
        if (flags.json) {
          outJson({ run: cfg.run, dry_run: false, plan: null, result: { finalized: r.finalized, mean: r.mean, steps: r.steps, rounds: r.rounds, holdout: r.holdout ?? null } });
          return 0;
        }
        out(`finalized ${r.finalized}: mean ${fmt4(r.mean)} on the search set after ${r.steps} steps, ${r.rounds} rounds`);
        if (r.holdout) {
          const h = r.holdout;
          const ci = h.stats.ci95 ? `[${h.stats.ci95[0].toFixed(3)}, ${h.stats.ci95[1].toFixed(3)}]` : "-";
          out(`holdout ${h.source}: ${h.chosen.id} ${fmt4(h.chosen.mean)} vs ${h.seed.id} ${fmt4(h.seed.mean)}; gain ${h.stats.mean_gain.toFixed(3)}, 95% CI ${ci}, sign test p ${h.stats.sign_test.p.toFixed(4)} (n ${h.stats.n})`);
        }
        return 0;
      } catch (e) {
        if (ctl.signal.aborted && !(e instanceof EvolveError && e.code === "evolve_interrupted")) throw new EvolveError("evolve_interrupted", "the Meta-Harness Adapter run was interrupted", "run the same command again: it resumes from the run's state");
        throw e;
      } finally {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
      }
    }
  });
}
