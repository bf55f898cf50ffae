/**
 * `evolve trial download -o`, `evolve job download` and `evolve job export`: argument checks and printing; what is
 * written is engine/results' (tree.ts, job-folder.ts, download.ts).
 */
import { EvolveError } from "../engine/errors.ts";
import { jobConfig, requireTrial } from "../engine/job/mod.ts";
import {
  clearTarget,
  DEFAULT_JOBS_DIR,
  downloadJob,
  downloadTrial,
  exportJob,
  jobFolderFor,
  jobFolderName,
} from "../engine/results/mod.ts";
import { join } from "node:path";
import { out, outJson, style } from "./output.ts";
import { withStore } from "./store.ts";
import { jobFromArg } from "./job.ts";

const warnLine = (m: string) => process.stderr.write(`${style.yellow("warning")}: ${m}\n`);

/** `evolve trial download <id> -o DIR [--overwrite]`: the trial tree under DIR/<trial id>/. `--json` prints `{trial_id, path}`. */
export async function trialDownloadCommand(arg: string, opts: { output: string; overwrite?: boolean; json?: boolean }): Promise<number> {
  return withStore(async (store, home) => {
    const t = requireTrial(store, arg);
    const path = await downloadTrial(home, t, opts.output, { overwrite: opts.overwrite, warn: warnLine });
    if (opts.json) outJson({ trial_id: t.id, path });
    else out(`trial ${t.id} saved to ${path}/`);
    return 0;
  });
}

/** `evolve job download <id> -o f.tar.gz|DIR [--overwrite]`. `--json` prints `{job_id, path}`. */
export async function jobDownloadCommand(arg: string, opts: { output?: string; overwrite?: boolean; json?: boolean }): Promise<number> {
  if (!opts.output) throw new EvolveError("usage", "job download needs -o <file.tar.gz | dir>", "e.g. evolve job download 01JB... -o job.tar.gz");
  return withStore(async (store, home) => {
    const job = jobFromArg(store, arg);
    const path = await downloadJob(store, home, job.id, opts.output!, { overwrite: opts.overwrite, warn: warnLine });
    if (opts.json) outJson({ job_id: job.id, path });
    else out(`job ${job.id} saved to ${path}`);
    return 0;
  });
}

/**
 * `evolve job export <id> [-o JOBS_DIR] [--overwrite]`: (re)builds the job's Harbor job folder from the store under
 * JOBS_DIR (default ./jobs). Its own folder is refreshed in place; another's is refused unless --overwrite.
 * `--json` prints `{job_id, path}`.
 */
export async function jobExportCommand(arg: string, opts: { output?: string; overwrite?: boolean; json?: boolean }): Promise<number> {
  const jobsDir = opts.output ?? DEFAULT_JOBS_DIR;
  return withStore(async (store, home) => {
    const job = jobFromArg(store, arg);
    if (opts.overwrite) {
      // --overwrite frees the name this job's folder would take, whoever held it
      const name = jobFolderName(job.id, jobConfig(job).name);
      await jobFolderFor(job, jobsDir).catch(() => clearTarget(join(jobsDir, name)));
    }
    const path = await exportJob(store, home, job.id, jobsDir, warnLine);
    if (opts.json) outJson({ job_id: job.id, path });
    else out(`job ${job.id} written to ${path}/`);
    return 0;
  });
}
