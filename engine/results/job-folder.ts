/**
 * A job as a Harbor job folder (shared/reference/harbor.md §3.1): `<jobs dir>/<job name>/config.json`,
 * `result.json`, and one `<task>__<short id>/` per trial (tree.ts, profile "job"). Derived from the store, so it can
 * always be rebuilt (`job export`, `job download`); `evolve run` keeps one up to date as its trials settle
 * (JobFolderWriter), so a running job can be read by `harbor view` and scripts. A failure to write it is a warning:
 * it never touches a trial's record.
 */
import { lstat, readdir, readFile, rm } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { EvolveError } from "../errors.ts";
import { taskBlobDir, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { isSettledStatus, type TrialStatus } from "../trial/lifecycle.ts";
import { trialDir } from "../store/index.ts";
import { existsSync } from "node:fs";
import { jobConfig } from "../job/job.ts";
import type { JobFolderHook } from "../job/drive.ts";
import { harborJobConfig, harborJobResult } from "./harbor.ts";
import { jobFolderName, trialFolderName } from "./ids.ts";
import { DirSink, ensureRoot, TarGzSink, type TreeSink } from "./sink.ts";
import { writeTrialTree } from "./tree.ts";

/** Harbor's default jobs dir, relative to where the command runs. */
export const DEFAULT_JOBS_DIR = "jobs";

const json = (v: unknown) => Buffer.from(JSON.stringify(v, null, 2) + "\n");

/** A trial's folder name in its job's folder. */
export function trialName(t: TrialRecord): string {
  return trialFolderName(t.task_name ?? t.task_digest, t.id);
}

/** Whether a trial has anything to show: it settled, or its folder exists (it started). */
function shown(home: string, t: TrialRecord): boolean {
  return isSettledStatus(t.status as TrialStatus) || existsSync(trialDir(home, t.id));
}

/**
 * Which job a folder under the jobs dir holds: "empty" (absent or empty: free), the job id its config.json names,
 * or "foreign" (files that are no evolve job folder, or a link: never written into).
 */
async function folderOwner(dir: string): Promise<"empty" | "foreign" | { jobId: string }> {
  const st = await lstat(dir).catch(() => undefined);
  if (!st) return "empty";
  if (!st.isDirectory()) return "foreign";
  if ((await readdir(dir)).length === 0) return "empty";
  const cfg = await lstat(join(dir, "config.json")).catch(() => undefined);
  if (!cfg?.isFile()) return "foreign";
  try {
    const id = (JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as { x_evolve?: { job_id?: unknown } }).x_evolve?.job_id;
    return typeof id === "string" ? { jobId: id } : "foreign";
  } catch {
    return "foreign";
  }
}

/**
 * Picks the job's folder under `jobsDir`: its `--job-name` (when a safe folder name), else its id; a name another
 * job's folder holds falls back to the id. Refuses (`job_folder_taken`) when even the id's folder is someone else's.
 */
export async function jobFolderFor(job: JobRecord, jobsDir: string): Promise<{ dir: string; name: string; fellBack?: string }> {
  const name = jobConfig(job).name;
  const first = jobFolderName(job.id, name);
  const candidates = first === job.id ? [first] : [first, jobFolderName(job.id, undefined)];
  for (const c of candidates) {
    const owner = await folderOwner(join(jobsDir, c));
    if (owner === "empty" || (typeof owner === "object" && owner.jobId === job.id)) return { dir: join(jobsDir, c), name: c, ...(c !== first ? { fellBack: first } : {}) };
  }
  throw new EvolveError("job_folder_taken", `${join(jobsDir, candidates.at(-1)!)} holds files that are not job ${job.id}'s folder`, "move it away, or give another --jobs-dir");
}

/** Writes the job's own config.json and result.json into its folder (atomically, file by file). */
async function writeJobFiles(store: Store, home: string, job: JobRecord, sink: TreeSink, o: { name: string; jobsDir: string }): Promise<void> {
  const trials = store.listTrials(job.id);
  const names = new Map(trials.map((t) => [t.id, trialName(t)]));
  await sink.file("config.json", json(harborJobConfig(job, { jobName: o.name, jobsDir: o.jobsDir, taskDir: (d) => taskBlobDir(home, d) })));
  await sink.file("result.json", json(harborJobResult(job, trials, names, new Date().toISOString())));
}

/** Writes one trial's folder under the job's folder, replacing what an earlier write left (stale files pruned). */
async function writeTrialFolder(home: string, t: TrialRecord, jobDir: string, warn: (m: string) => void): Promise<void> {
  const name = trialName(t);
  const dir = join(jobDir, name);
  await ensureRoot(dir);
  const sink = new DirSink(dir, { prune: true });
  await writeTrialTree(home, t, sink, "job", { trialName: name, trialDir: resolve(dir), trialsDir: resolve(jobDir) }, warn);
  await sink.close();
}

/**
 * Writes job `jobId` whole as a job folder under `jobsDir` (`job export`, `job download -o DIR`): every trial that
 * settled or started. Returns the folder written.
 */
export async function exportJob(store: Store, home: string, jobId: string, jobsDir: string, warn: (m: string) => void = () => {}): Promise<string> {
  const job = store.getJob(jobId)!;
  await ensureRoot(jobsDir);
  const { dir, name } = await jobFolderFor(job, jobsDir);
  await ensureRoot(dir);
  for (const t of store.listTrials(jobId)) if (shown(home, t)) await writeTrialFolder(home, t, dir, warn);
  await writeJobFiles(store, home, job, new DirSink(dir), { name, jobsDir: resolve(jobsDir) });
  return dir;
}

/**
 * Writes job `jobId` as one `.tar.gz` at `file` (`job download -o f.tar.gz`): the same job folder, its entries under
 * `<job name>/`. The archive appears whole or not at all (temp file, renamed at the end).
 */
export async function archiveJob(store: Store, home: string, jobId: string, file: string, warn: (m: string) => void = () => {}): Promise<string> {
  const job = store.getJob(jobId)!;
  const name = jobFolderName(job.id, jobConfig(job).name);
  const tar = new TarGzSink(file);
  const under = (prefix: string): TreeSink => ({ file: (rel, data, mode) => tar.file(`${prefix}/${rel}`, data, mode), close: async () => {} });
  try {
    for (const t of store.listTrials(jobId)) {
      if (!shown(home, t)) continue;
      const tn = trialName(t);
      await writeTrialTree(home, t, under(`${name}/${tn}`), "job", { trialName: tn, trialDir: `${name}/${tn}`, trialsDir: name }, warn);
    }
    await writeJobFiles(store, home, job, under(name), { name, jobsDir: "." });
    await tar.close();
  } catch (e) {
    await tar.abort();
    throw e;
  }
  return file;
}

/**
 * Keeps a running job's folder up to date (every run of a job's trials, through engine/job/drive.ts): the job's
 * files at start, each trial's folder as it settles, and the job's files again at each settle and at the end.
 * Writes run one at a time in the background; a failure is reported through `warn` once and never thrown, so a job
 * runs and scores exactly as without a folder. The folder started is recorded on the job (`folder`).
 */
export class JobFolderWriter implements JobFolderHook {
  private chain: Promise<void> = Promise.resolve();
  private dir: string | undefined;
  private name = "";
  private failed = false;

  constructor(
    private store: Store,
    private home: string,
    private jobId: string,
    private jobsDir: string,
    private warn: (m: string) => void,
    /** The exact folder to write (the one the job recorded), rather than one picked under `jobsDir`. */
    private at?: string,
  ) {
    if (at !== undefined) this.jobsDir = dirname(at);
  }

  /** The job folder, once `start` found it (undefined before, or when it could not be written). */
  get folder(): string | undefined {
    return this.dir;
  }

  private queue(what: string, f: () => Promise<void>): Promise<void> {
    this.chain = this.chain.then(async () => {
      if (this.failed) return;
      try {
        await f();
      } catch (e) {
        this.failed = true;
        const msg = e instanceof Error ? e.message : String(e);
        this.warn(`the job folder${this.dir ? ` ${this.dir}` : ""} is no longer updated (${what}: ${msg}); \`evolve job export ${this.jobId} -o ${this.jobsDir}\` rebuilds it`);
      }
    });
    return this.chain;
  }

  /** Picks and starts the folder (config.json, result.json); resolves with its path, or undefined when it cannot be. */
  async start(): Promise<string | undefined> {
    await this.queue("starting it", async () => {
      const job = this.store.getJob(this.jobId)!;
      await ensureRoot(this.jobsDir);
      const got = this.at !== undefined ? await recordedFolder(job, this.at) : await jobFolderFor(job, this.jobsDir);
      if (got.fellBack) this.warn(`${join(this.jobsDir, got.fellBack)} is another job's folder: this job's is ${got.dir}`);
      await ensureRoot(got.dir);
      this.dir = got.dir;
      this.name = got.name;
      rememberFolder(this.store, this.jobId, resolve(got.dir));
      await this.jobFiles();
    });
    return this.failed ? undefined : this.dir;
  }

  private async jobFiles(): Promise<void> {
    const job = this.store.getJob(this.jobId)!;
    await writeJobFiles(this.store, this.home, job, new DirSink(this.dir!), { name: this.name, jobsDir: resolve(this.jobsDir) });
  }

  /** Writes a settled trial's folder and the job's result.json (the record is read again: the store is the truth). */
  trialSettled(trialId: string): Promise<void> {
    return this.queue(`writing trial ${trialId}`, async () => {
      if (!this.dir) return;
      const t = this.store.getTrial(trialId);
      if (!t) return;
      await writeTrialFolder(this.home, t, this.dir, (m) => this.warn(`job folder, trial ${trialId}: ${m}`));
      await this.jobFiles();
    });
  }

  /** The job's files once more at its end (status, finished_at); resolves when every queued write is done. */
  finish(): Promise<void> {
    return this.queue("finishing it", async () => {
      if (this.dir) await this.jobFiles();
    });
  }
}

/** The folder a job recorded, when it is still free or still the job's own; else `job_folder_taken`. */
async function recordedFolder(job: JobRecord, dir: string): Promise<{ dir: string; name: string; fellBack?: string }> {
  const owner = await folderOwner(dir);
  if (owner === "empty" || (typeof owner === "object" && owner.jobId === job.id)) return { dir, name: basename(dir) };
  throw new EvolveError("job_folder_taken", `${dir} (job ${job.id}'s folder) now holds files that are not its`, `move them away; \`evolve job export ${job.id} -o DIR\` writes the job elsewhere`);
}

/** Records on the job the folder its trials are written to (read again in the transaction: the runner writes it too). */
function rememberFolder(store: Store, jobId: string, dir: string): void {
  store.transaction(() => {
    const job = store.getJob(jobId);
    if (job && job.folder !== dir) store.putJob({ ...job, folder: dir });
  });
}

/** The job whose trials `job` was made from (`job retry`, `trial retry|regrade`), when it is still stored. */
function originJob(store: Store, job: JobRecord): JobRecord | undefined {
  if (job.retry_of !== undefined) return store.getJob(job.retry_of);
  const first = store.listTrials(job.id)[0];
  const from = first?.retry_of ?? first?.regrade_of;
  const t = from !== undefined ? store.getTrial(from) : undefined;
  return t ? store.getJob(t.job_id) : undefined;
}

/**
 * The folder job `jobId`'s trials are written to as they run, started; undefined when it gets none. The one place
 * that decides it: with `[jobs] folder = false` (`enabled` false) none; a job that recorded a folder (`job resume`)
 * keeps it; a new `run` job gets one under `jobsDir` (`evolve run` passes it: ./jobs by default, like Harbor); a job
 * made from another's trials (`job retry`, `trial retry|regrade`) gets one beside its origin's folder when that job
 * had one; others (`check`, a job run with the folder off, the evolve loop's jobs) none. Returns the writer to hand
 * to driveJob (engine/job/drive.ts) as its `folder`.
 */
export async function openJobFolder(
  store: Store,
  home: string,
  jobId: string,
  o: { enabled: boolean; /** where a new `run` job's folder goes */ jobsDir?: string; warn: (m: string) => void },
): Promise<JobFolderWriter | undefined> {
  const job = store.getJob(jobId);
  if (!o.enabled || !job) return undefined;
  let writer: JobFolderWriter | undefined;
  if (job.folder !== undefined) writer = new JobFolderWriter(store, home, jobId, dirname(job.folder), o.warn, job.folder);
  else if (o.jobsDir !== undefined && jobConfig(job).kind === "run") writer = new JobFolderWriter(store, home, jobId, o.jobsDir, o.warn);
  else {
    const origin = originJob(store, job)?.folder;
    if (origin !== undefined) writer = new JobFolderWriter(store, home, jobId, dirname(origin), o.warn);
  }
  await writer?.start();
  return writer;
}

/** Empties `dir` for `--overwrite` (a link at `dir` itself is removed, never followed). */
export async function clearTarget(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
