/**
 * `evolve dataset publish|list|show|delete`: argument handling and printing only.
 */
import { createInterface } from "node:readline";
import { deleteDataset, DatasetInvalidError, listDatasets, publishDataset, resolveDataset, showDataset, type DeleteResult } from "../engine/dataset.ts";
import { EvolveError } from "../engine/errors.ts";
import { localUser, resolveOrg } from "../engine/org/mod.ts";
import { isTTY } from "../engine/runtime.ts";
import { withStore } from "./store.ts";
import { formatDuration, out, outJson, outTable, style, when } from "./output.ts";
import { printReports } from "./task.ts";

/** `evolve dataset publish <dir> --name N --version V` */
export async function publishCommand(dir: string, opts: { name: string; version: string; org?: string; json?: boolean }): Promise<number> {
  try {
    const result = await withStore((store, home) => {
      const user = localUser();
      return publishDataset(store, home, dir, { name: opts.name, version: opts.version, created_by: user, org: resolveOrg(store, user, opts.org) });
    });
    if (opts.json) outJson(result);
    else {
      const ref = `${opts.name}@${opts.version}`;
      if (result.status === "unchanged") out(`${style.dim("unchanged")} ${ref} is already published with this content`);
      else if (result.status === "restored") out(`${style.green("restored")} ${ref} ${style.dim(`(deleted before; the same ${result.dataset.tasks.length} tasks, ${result.dataset.digest})`)}`);
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

/**
 * `evolve dataset delete name[@version]`. Asks first on a terminal (`--yes` skips it); with no terminal and no
 * `--yes` it refuses (`confirmation_required`) rather than delete unasked. What is deleted is exactly what was
 * confirmed: a version published meanwhile under the same name is left alone.
 */
export async function deleteCommand(ref: string, opts: { json?: boolean; yes?: boolean }): Promise<number> {
  const versions = await withStore(async (store) => resolveDataset(store, ref));
  const refs = versions.map((d) => `${d.name}@${d.version}`);
  if (!opts.yes) {
    const what = versions.map((d) => `${d.name}@${d.version} (${d.tasks.length} task${d.tasks.length === 1 ? "" : "s"})`).join(", ");
    if (!isTTY(process.stdin) || !isTTY(process.stderr)) {
      throw new EvolveError("confirmation_required", `dataset delete would delete ${what} and asks first, but there is no terminal to ask on`, `pass --yes: evolve dataset delete ${ref} --yes`);
    }
    if (!(await confirm(`delete ${what}? a deleted version can be restored only with the same content [y/N] `))) {
      out("nothing deleted");
      return 1;
    }
  }
  const deleted = await withStore(async (store) => {
    const all: DeleteResult = { versions: [], tasks_removed: [] };
    for (const r of refs) {
      const d = deleteDataset(store, r);
      all.versions.push(...d.versions);
      all.tasks_removed.push(...d.tasks_removed);
    }
    return all;
  });
  if (opts.json) return outJson(deleted), 0;
  for (const d of deleted.versions) out(`${style.red("deleted")} ${d}`);
  return 0;
}

/** Asks a yes/no question on stderr and reads the answer from stdin; only `y` or `yes` is yes. */
async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await new Promise<string>((res) => {
      rl.question(question, res);
      rl.once("close", () => res(""));
    });
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    rl.close();
  }
}
