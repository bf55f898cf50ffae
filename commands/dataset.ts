/**
 * `evolve dataset publish|list|show|delete`: argument handling and printing only.
 */
import { deleteDataset, DatasetInvalidError, listDatasets, publishDataset, showDataset } from "../engine/dataset.ts";
import { withStore } from "./store.ts";
import { formatDuration, out, outJson, outTable, style, when } from "./output.ts";
import { printReports } from "./task.ts";

/** `evolve dataset publish <dir> --name N --version V` */
export async function publishCommand(dir: string, opts: { name: string; version: string; json?: boolean }): Promise<number> {
  try {
    const result = await withStore((store, home) => publishDataset(store, home, dir, { name: opts.name, version: opts.version }));
    if (opts.json) outJson(result);
    else {
      const ref = `${opts.name}@${opts.version}`;
      if (result.status === "unchanged") out(`${style.dim("unchanged")} ${ref} is already published with this content`);
      else out(`${style.green("published")} ${ref} ${style.dim(`(${result.dataset.tasks.length} tasks, ${result.dataset.digest})`)}`);
    }
    return 0;
  } catch (err) {
    if (err instanceof DatasetInvalidError && !opts.json) {
      printReports(err.reports, { onlyProblems: true });
      out("");
    } else if (err instanceof DatasetInvalidError) {
      outJson({ ok: false, code: err.code, message: err.message, tasks: err.reports });
    }
    throw err;
  }
}

/** `evolve dataset list` */
export async function listCommand(opts: { json?: boolean }): Promise<number> {
  const rows = await withStore(async (store) => listDatasets(store));
  if (opts.json) return outJson(rows), 0;
  if (rows.length === 0) {
    out("no datasets yet: publish one with `evolve dataset publish <dir> --name N --version V`");
    return 0;
  }
  outTable(
    ["NAME", "VERSION", "TASKS", "STATUS", "UPDATED"],
    rows.map((d) => [d.name, d.version, d.task_count, d.status, when(d.updated_at)]),
  );
  return 0;
}

/** `evolve dataset show name[@version]` */
export async function showCommand(ref: string, opts: { json?: boolean }): Promise<number> {
  const shown = await withStore(async (store) => showDataset(store, ref));
  if (opts.json) return outJson(shown), 0;
  const d = shown.dataset;
  out(`${style.bold(`${d.name}@${d.version}`)}  ${d.tasks.length} tasks  ${d.status}  updated ${when(d.updated_at)}`);
  out(style.dim(`digest ${d.digest}`));
  out("");
  outTable(
    ["TASK", "STEPS", "GPUS", "AGENT TIMEOUT", "VERIFIER TIMEOUT", "NETWORK", "VERIFIER"],
    shown.tasks.map((t) => [
      t.name,
      t.summary.steps || 1,
      t.summary.gpus ? `${t.summary.gpus}${t.summary.gpu_types.length ? ` (${t.summary.gpu_types.join("|")})` : ""}` : 0,
      t.summary.agent_timeout_sec === null ? "none" : formatDuration(t.summary.agent_timeout_sec * 1000),
      t.summary.verifier_timeout_sec === null ? "none" : formatDuration(t.summary.verifier_timeout_sec * 1000),
      t.summary.network_mode,
      t.summary.verifier_mode,
    ]),
  );
  return 0;
}

/** `evolve dataset delete name[@version]` */
export async function deleteCommand(ref: string, opts: { json?: boolean }): Promise<number> {
  const deleted = await withStore(async (store) => deleteDataset(store, ref));
  if (opts.json) return outJson(deleted), 0;
  for (const d of deleted.versions) out(`${style.red("deleted")} ${d}`);
  return 0;
}
