/**
 * `trial download -o` and `job download -o`: a trial's tree under `<dir>/<trial id>/` (tree.ts, profile "trial"),
 * a job as a job folder under `<dir>/` or as one `.tar.gz`. A target that exists and is not empty is refused
 * (`download_target_exists`) unless `overwrite`, which removes it first (a link there is removed, never followed).
 */
import { lstat, mkdir, readdir } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { EvolveError } from "../errors.ts";
import type { Store, TrialRecord } from "../store/index.ts";
import { jobConfig } from "../job/job.ts";
import { jobFolderName } from "./ids.ts";
import { archiveJob, clearTarget, exportJob } from "./job-folder.ts";
import { DirSink, ensureRoot, TarGzSink, type TreeSink } from "./sink.ts";
import { writeTrialTree } from "./tree.ts";

/** Whether `-o` names an archive rather than a folder. */
export const isArchivePath = (p: string) => /\.(tar\.gz|tgz)$/i.test(p);

/** Refuses an existing, non-empty `path` unless `overwrite`, which removes it. */
async function claimTarget(path: string, overwrite: boolean, what: string): Promise<void> {
  const st = await lstat(path).catch(() => undefined);
  if (!st) return;
  const empty = st.isDirectory() && (await readdir(path)).length === 0;
  if (empty) return;
  if (!overwrite) throw new EvolveError("download_target_exists", `${path} already exists${st.isDirectory() ? " and is not empty" : ""}: ${what} is never written over it`, "pass --overwrite to replace it, or choose another -o");
  await clearTarget(path);
}

/** Saves trial `t` under `<outDir>/<trial id>/`; returns that folder. `warn` hears of files left out. */
export async function downloadTrial(home: string, t: TrialRecord, outDir: string, o: { overwrite?: boolean; warn?: (m: string) => void } = {}): Promise<string> {
  const target = join(outDir, t.id);
  await mkdir(outDir, { recursive: true });
  await claimTarget(target, o.overwrite === true, `trial ${t.id}'s download`);
  await ensureRoot(target);
  const sink = new DirSink(target);
  await writeTrialTree(home, t, sink, "trial", { trialName: t.id, trialDir: resolve(target), trialsDir: resolve(outDir) }, o.warn);
  await sink.close();
  return target;
}

/**
 * Saves job `jobId` to `out`: a `.tar.gz` (entries under `<job name>/`) or a folder holding `<job name>/`.
 * Returns what was written.
 */
export async function downloadJob(store: Store, home: string, jobId: string, out: string, o: { overwrite?: boolean; warn?: (m: string) => void } = {}): Promise<string> {
  const job = store.getJob(jobId)!;
  if (isArchivePath(out)) {
    await claimTarget(out, o.overwrite === true, `job ${jobId}'s archive`);
    const parent = resolve(out, "..");
    await mkdir(parent, { recursive: true });
    return archiveJob(store, home, jobId, join(parent, basename(out)), o.warn);
  }
  await mkdir(out, { recursive: true });
  await claimTarget(join(out, jobFolderName(job.id, jobConfig(job).name)), o.overwrite === true, `job ${jobId}'s download`);
  return exportJob(store, home, jobId, out, o.warn);
}

/**
 * Writes trial `t`'s tree (the `trial download` layout) as one `.tar.gz` at `file`, its entries under `<trial id>/`:
 * what the local API hands out for a trial. The archive appears whole or not at all (TarGzSink).
 */
export async function archiveTrial(home: string, t: TrialRecord, file: string, warn: (m: string) => void = () => {}): Promise<string> {
  const tar = new TarGzSink(file);
  const under: TreeSink = { file: (rel, data, mode) => tar.file(`${t.id}/${rel}`, data, mode), close: async () => {} };
  try {
    await writeTrialTree(home, t, under, "trial", { trialName: t.id, trialDir: t.id, trialsDir: "." }, warn);
    await tar.close();
  } catch (e) {
    await tar.abort();
    throw e;
  }
  return file;
}
