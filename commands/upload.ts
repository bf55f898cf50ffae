/**
 * `evolve upload`, `evolve job imports` and `evolve job import`: argument checks and printing; the import itself is
 * engine/results/upload.ts's, its records engine/results/imports.ts's. `upload` follows the import until the job
 * exists; `--no-wait` starts it in a detached process of this same binary and prints the import id at once.
 */
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../engine/config.ts";
import { EvolveError } from "../engine/errors.ts";
import { isCompiledBinary } from "../engine/runtime.ts";
import { getImport, IMPORT_STATUSES, listImports, putImport, type ImportRecord } from "../engine/results/mod.ts";
import { PORTED_PROVIDER } from "../engine/job/mod.ts";
import { runImport, startImport, uploadLimits } from "../engine/results/mod.ts";
import { out, outJson, outTable, style, when } from "./output.ts";
import { withStore } from "./store.ts";

const warnLine = (m: string) => process.stderr.write(`${style.yellow("warning")}: ${m}\n`);

/** The closing lines of a finished import: the job, the provider, `scored N of M trial(s)`, what was skipped. */
function printDone(rec: ImportRecord): void {
  out(`job ${rec.job_id} imported from ${rec.source} (import ${rec.id})`);
  out(`provider: ${PORTED_PROVIDER}`);
  out(`scored ${rec.scored} of ${rec.trials} trial(s)`);
  // zero of many is worth a look: the rewards may sit where evolve does not read them
  if (rec.scored === 0 && rec.trials > 1) warnLine(`no trial carries a reward: check verifier_result.rewards in the trials' result.json`);
  for (const s of rec.skipped_trials) warnLine(`trial ${s.trial} skipped (${s.code}): ${s.reason}`);
  for (const s of rec.skipped_entries) warnLine(`${s.path} not taken: ${s.reason}`);
}

/** The command line that runs import `id` in a new process of this binary (`job import <id> --run`). */
function selfCommand(id: string): string[] {
  // from sources, the runtime runs main.ts beside this folder (argv[1] may be a test host, not the CLI's entry)
  const entry = isCompiledBinary() ? [] : [fileURLToPath(new URL("../main.ts", import.meta.url))];
  return [process.execPath, ...process.execArgv, ...entry, "job", "import", id, "--run"];
}

/** `evolve upload <job folder | .tar.gz> [-d name@version] [--no-wait] [--json]`. */
export async function uploadCommand(path: string, opts: { dataset?: string; wait?: boolean; json?: boolean }): Promise<number> {
  const config = loadConfig();
  const source = resolve(path);
  const rec = startImport(config.home, source, opts.dataset);
  if (opts.wait === false) {
    const [bin, ...args] = selfCommand(rec.id);
    const child = spawn(bin, args, { detached: true, stdio: "ignore", env: process.env });
    child.unref();
    // the record names the worker at once, so it does not read as interrupted once this process has exited
    if (child.pid !== undefined) putImport(config.home, { ...rec, runner: { pid: child.pid, host: rec.runner!.host } });
    if (opts.json) outJson({ import_id: rec.id, status: rec.status });
    else out(`import ${rec.id} started: \`evolve job import ${rec.id} --watch\` follows it`);
    return 0;
  }
  return withStore(async (store, home) => {
    const { record } = await runImport(store, home, rec.id, uploadLimits(config.limits.uploads.job_archive_bytes));
    if (opts.json) outJson({ ...record, provider: PORTED_PROVIDER });
    else printDone(record);
    return 0;
  });
}

/** `evolve job imports [--status S] [--json]`: every import, newest first. */
export async function jobImportsCommand(opts: { status?: string; json?: boolean }): Promise<number> {
  const status = opts.status?.toUpperCase();
  if (status !== undefined && !(IMPORT_STATUSES as readonly string[]).includes(status)) {
    throw new EvolveError("usage", `--status ${opts.status} is not an import status`, `one of ${IMPORT_STATUSES.join(", ")}`);
  }
  const home = loadConfig().home;
  const list = listImports(home, status);
  if (opts.json) {
    outJson(list);
    return 0;
  }
  if (list.length === 0) {
    out("no imports");
    return 0;
  }
  outTable(
    ["IMPORT", "STATUS", "JOB", "SCORED", "CREATED", "SOURCE"],
    list.map((r) => [r.id, r.status, r.job_id ?? "-", r.status === "COMPLETED" ? `${r.scored}/${r.trials}` : "-", when(r.created_at), r.source]),
  );
  return 0;
}

/** `evolve job import <id> [--watch] [--json]`: one import; `--watch` waits for it to end. (`--run`: the detached worker.) */
export async function jobImportCommand(id: string, opts: { watch?: boolean; json?: boolean; run?: boolean }): Promise<number> {
  const config = loadConfig();
  if (opts.run) {
    return withStore(async (store, home) => {
      await runImport(store, home, id, uploadLimits(config.limits.uploads.job_archive_bytes));
      return 0;
    });
  }
  let rec = getImport(config.home, id);
  if (!rec) throw new EvolveError("import_not_found", `no import ${id}`, "see `evolve job imports`");
  while (opts.watch && rec.status === "RUNNING") {
    await new Promise((r) => setTimeout(r, 500));
    rec = getImport(config.home, id) ?? rec;
  }
  if (opts.json) outJson(rec);
  else if (rec.status === "COMPLETED") printDone(rec);
  else if (rec.status === "FAILED") out(`import ${rec.id} FAILED: error[${rec.error?.code}] ${rec.error?.message}`);
  else out(`import ${rec.id} RUNNING since ${when(rec.created_at)} (${rec.source})`);
  return rec.status === "FAILED" ? 1 : 0;
}
