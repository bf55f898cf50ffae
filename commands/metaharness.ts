/**
 * `evolve metaharness check-spec|status|finalize`: the Meta-Harness Adapter search's checks and records from the
 * command line (engine/metaharness). Parsing and printing only; the run loop itself is another command's.
 */
import { readdirSync } from "node:fs";
import { resolve } from "node:path";
import { EvolveError } from "../engine/errors.ts";
import { out, outJson, outTable } from "./output.ts";

/** `check-spec <dir>`: exit 0 when the folder is a complete adapter, 1 with its problems one per line. */
export async function checkSpecCommand(dir: string, opts: { template?: string; json?: boolean }): Promise<number> {
  const { checkSpec, templateHermit } = await import("../engine/metaharness/spec.ts");
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
  const { loadState } = await import("../engine/metaharness/state.ts");
  const s = loadState(resolve(run));
  const candidates = s.candidates.map((c) => ({ id: c.id, round: c.round, status: c.status, mean: c.mean, evaluations: c.evaluations.length, hypothesis: c.hypothesis, base: c.base, problems: c.problems ?? [] }));
  if (opts.json) {
    outJson({ run: resolve(run), step: s.step, round: s.round, candidates, queue: s.queue, handedBack: s.handed_back, finalized: s.finalized ?? null });
    return 0;
  }
  out(`step ${s.step}, round ${s.round}`);
  outTable(
    ["ID", "ROUND", "STATUS", "MEAN", "EVALS", "HYPOTHESIS"],
    candidates.map((c) => [c.id, c.round, c.status, fmt(c.mean), c.evaluations, c.hypothesis.length > 60 ? `${c.hypothesis.slice(0, 57)}...` : c.hypothesis]),
  );
  out(`queue: ${s.queue.length > 0 ? s.queue.join(", ") : "(empty)"}`);
  out(`handed back: ${s.handed_back ?? "-"}`);
  out(`finalized: ${s.finalized ?? "-"}`);
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
  const { candidateOf, finalize, loadState } = await import("../engine/metaharness/state.ts");
  const { runPaths } = await import("../engine/metaharness/layout.ts");
  const root = resolve(run);
  const s = loadState(root);
  const id = finalize(root, s);
  const c = candidateOf(s, id);
  if (outDir !== undefined) {
    const { copyTreeOver, newBudget } = await import("../engine/evolve/tree.ts");
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
