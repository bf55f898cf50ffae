/**
 * Datasets: named, versioned lists of tasks, published from a folder of task directories into the store. A
 * version's content is immutable once published (republishing it with other content is refused), and tasks are
 * stored once per content digest however many datasets use them. Pure engine: never prints.
 */
import { createHash } from "node:crypto";
import { chmod, copyFile, mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { existsSync, renameSync, rmSync } from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { loadConfig } from "./config.ts";
import { EvolveError, firstLine } from "./errors.ts";
import { checkDatasetName, checkDatasetVersion, parseDatasetRef } from "./dataset-ref.ts";
export { checkDatasetName, checkDatasetVersion, isPinnedDatasetRef, namesDataset, parseDatasetRef, type DatasetRef } from "./dataset-ref.ts";
import { newId, taskBlobDir, type DatasetRecord, type Store, type TaskSummaryRecord } from "./store/index.ts";
import type { TaskReport } from "./task/codes.ts";
import { digestFiles, listTaskFiles, type TaskFile } from "./task/digest.ts";
import { summarizeTask } from "./task/model.ts";
import { validateTasks } from "./task/validate.ts";


/** Publish refused because tasks have error findings; `reports` holds every task's report, in folder order. */
export class DatasetInvalidError extends EvolveError {
  constructor(readonly reports: TaskReport[]) {
    const bad = reports.filter((r) => !r.ok).length;
    super(
      "dataset_invalid",
      `${bad} of ${reports.length} task${reports.length === 1 ? "" : "s"} ${bad === 1 ? "has" : "have"} errors; nothing was published`,
      "fix the findings listed above, or check one task with `evolve task validate <dir>`",
    );
    this.name = "DatasetInvalidError";
  }
}

/** Options for {@link publishDataset}. */
export interface PublishOptions {
  name: string;
  version: string;
  /** Validate every task first (default true). Only a caller that has just validated the same tree passes false. */
  validate?: boolean;
  /** The organization a new dataset lands in (`--org`, engine/org); a new version of an existing dataset stays where it is. */
  org?: string;
  /** Who publishes it (engine/org's local identity). */
  created_by?: string;
}

/**
 * What a publish did. `unchanged`: this name@version already held exactly this content; `restored`: it had been
 * deleted, and held exactly this content then.
 */
export interface PublishResult {
  status: "published" | "unchanged" | "restored";
  dataset: DatasetRecord;
}

/** The `sha256:` digest of a dataset's content: its (task name, task digest) pairs sorted by name. */
export function datasetDigest(tasks: readonly { name: string; digest: string }[]): string {
  const hash = createHash("sha256");
  const sorted = [...tasks].sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  for (const t of sorted) hash.update(`${t.name}\0${t.digest}\n`, "utf8");
  return `sha256:${hash.digest("hex")}`;
}

/** The task directories of a dataset folder: the folder itself if it has task.toml, else its visible subfolders. */
async function findTaskDirs(dir: string): Promise<string[]> {
  let st;
  try {
    st = await stat(dir);
  } catch (e) {
    throw new EvolveError("dataset_dir_invalid", `cannot read ${dir}: ${firstLine(e)}`, "give a folder of task directories");
  }
  if (!st.isDirectory()) throw new EvolveError("dataset_dir_invalid", `${dir} is not a directory`, "give a folder of task directories");
  if (existsSync(join(dir, "task.toml"))) return [dir];
  const entries = await readdir(dir, { withFileTypes: true });
  // An entry that links to a folder is refused, not followed: the link can lead anywhere on the machine, and what
  // it leads to would be published as if it were part of the dataset (the same rule as links inside a task).
  const link = entries.find((e) => !e.name.startsWith(".") && e.isSymbolicLink() && existsSync(join(dir, e.name, ".")));
  if (link) {
    throw new EvolveError(
      "task_symlink",
      `${link.name} in ${dir} is a symbolic link to a folder; a dataset holds its task folders themselves`,
      "replace the link with a copy of the task folder",
    );
  }
  // Every visible subfolder counts, task.toml or not: a task with a misspelt task.toml must be refused, not
  // silently left out of the dataset.
  const dirs = entries
    .filter((e) => !e.name.startsWith(".") && e.isDirectory())
    .map((e) => e.name)
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
    .map((n) => join(dir, n));
  if (dirs.length === 0) {
    throw new EvolveError("dataset_empty", `${dir} holds no task directories`, "a dataset folder holds one sub-folder per task, each with a task.toml");
  }
  return dirs;
}

interface PreparedTask {
  name: string;
  dir: string;
  digest: string;
  files: TaskFile[];
  summary: TaskSummaryRecord;
}

/**
 * Copies a task's files to its blob folder unless it is already there. The copy is made in a temporary folder in
 * the same parent and renamed into place, so a reader never sees half a task; its digest is recomputed from the
 * copy, so the blob is exactly what its name says even if the source changed meanwhile.
 */
async function storeBlob(home: string, t: PreparedTask): Promise<void> {
  const final = taskBlobDir(home, t.digest);
  if (existsSync(final)) return;
  const tmp = join(dirname(final), `.tmp-${newId()}`);
  try {
    await mkdir(tmp, { recursive: true });
    for (const f of t.files) {
      const to = join(tmp, ...f.path.split("/"));
      await mkdir(dirname(to), { recursive: true });
      await copyFile(f.abs, to);
      await chmod(to, f.executable ? 0o755 : 0o644);
    }
    const copied = await digestFiles(await listTaskFiles(tmp));
    if (copied !== t.digest) {
      throw new EvolveError("task_changed", `${t.dir} changed while it was being published`, "retry once nothing is writing to the task");
    }
    try {
      await rename(tmp, final);
    } catch (e) {
      // Another publisher stored the same content first: same digest, same bytes, keep theirs.
      if (!existsSync(final)) throw e;
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Reads each task directory once: its summary, its file list and its digest. Two tasks with one name are refused
 * (`dataset_task_duplicate`) unless `duplicates` is "allow": a dataset's tasks are told apart by name in its
 * listings, while a folder run (`run -p`, as Harbor does) tells them apart by path.
 */
async function prepareTasks(dirs: readonly string[], duplicates: "refuse" | "allow" = "refuse"): Promise<PreparedTask[]> {
  const tasks: PreparedTask[] = [];
  const seen = new Map<string, string>();
  for (const d of dirs) {
    const { name, ...summary } = await summarizeTask(d);
    const other = seen.get(name);
    if (other !== undefined && duplicates === "refuse") {
      throw new EvolveError(
        "dataset_task_duplicate",
        `two tasks are named ${name}: ${other} and ${d}`,
        "give each task a distinct [task] name (or folder name)",
      );
    }
    if (other === undefined) seen.set(name, d);
    const files = await listTaskFiles(d);
    tasks.push({ name, dir: d, files, summary, digest: await digestFiles(files) });
  }
  return tasks;
}

/** A task as stored: its name, its content digest and the immutable folder holding its files. */
export interface StoredTask {
  name: string;
  digest: string;
  dir: string;
  /** Where it was in the folder run (`run -p`), relative to it; set only when another task there has its name. */
  path?: string;
}

/** What `importTasks` read: the tasks, and each name more than one of them has, with their paths. */
export interface ImportedTasks {
  tasks: StoredTask[];
  duplicates: { name: string; paths: string[] }[];
}

/**
 * Imports the task(s) under `dir` (one task, or a folder of tasks) into the store without making a dataset, so a
 * job runs from immutable copies (`run -p`): the user's folder may change while the job runs or before it resumes.
 * Validation uses the secrets the caller will attach; any error refuses the whole import (DatasetInvalidError).
 * Tasks sharing a name all run, as in Harbor: each of them carries its path in the folder, and the name is listed
 * in `duplicates` for the caller to warn about.
 */
export async function importTasks(store: Store, home: string, dir: string, opts: { secrets: ReadonlySet<string> }): Promise<ImportedTasks> {
  const dirs = await findTaskDirs(dir);
  const config = loadConfig(home);
  const reports = await validateTasks(dirs, { ceilings: config.ceilings, secrets: opts.secrets });
  if (reports.some((r) => !r.ok)) throw new DatasetInvalidError(reports);
  const tasks = await prepareTasks(dirs, "allow");
  await commitTasks(store, home, tasks, () => undefined);
  const byName = new Map<string, PreparedTask[]>();
  for (const t of tasks) byName.set(t.name, [...(byName.get(t.name) ?? []), t]);
  const rel = (t: PreparedTask) => relative(dir, t.dir) || basename(t.dir);
  return {
    tasks: tasks.map((t) => ({
      name: t.name,
      digest: t.digest,
      dir: taskBlobDir(home, t.digest),
      ...(byName.get(t.name)!.length > 1 ? { path: rel(t) } : {}),
    })),
    duplicates: [...byName].filter(([, ts]) => ts.length > 1).map(([name, ts]) => ({ name, paths: ts.map(rel) })),
  };
}

/**
 * Copies the tasks' blobs into place, then in one write transaction records the tasks and runs `then` (which
 * may throw to abort everything). A concurrent `dataset delete` may collect a blob between the copy and the
 * commit; it does so under the store's write lock, so checking inside the transaction and copying again is enough.
 */
async function commitTasks<R>(store: Store, home: string, tasks: readonly PreparedTask[], then: () => R): Promise<R> {
  for (let attempt = 0; ; attempt++) {
    for (const t of tasks) await storeBlob(home, t);
    const result = store.transaction((): { value: R } | "retry" => {
      if (tasks.some((t) => !existsSync(taskBlobDir(home, t.digest)))) return "retry";
      const now = new Date().toISOString();
      for (const t of tasks) {
        if (!store.getTask(t.digest)) store.putTask({ digest: t.digest, name: t.name, stored_at: now, summary: t.summary });
      }
      return { value: then() };
    });
    if (result !== "retry") return result.value;
    if (attempt >= 3) throw new EvolveError("store_busy", "task files kept disappearing while being stored", "retry");
  }
}

/**
 * Publishes the tasks in `dir` as dataset `name@version`. Every task is validated (ceilings from the home's
 * config, secrets deferred to run time); any error finding refuses the whole publish with a
 * {@link DatasetInvalidError}. Tasks are stored by content digest. Republishing a version with the same content
 * is a no-op; with other content it is refused (`dataset_version_exists`) and the stored version stays intact. A
 * deleted version comes back only with the content it held (`restored`); other content is `dataset_version_deleted`.
 */
export async function publishDataset(store: Store, home: string, dir: string, opts: PublishOptions): Promise<PublishResult> {
  checkDatasetName(opts.name);
  checkDatasetVersion(opts.version);
  const dirs = await findTaskDirs(dir);

  if (opts.validate !== false) {
    const config = loadConfig(home);
    const reports = await validateTasks(dirs, { ceilings: config.ceilings, secrets: "deferred" });
    if (reports.some((r) => !r.ok)) throw new DatasetInvalidError(reports);
  }

  const tasks = await prepareTasks(dirs);
  const entries = tasks.map((t) => ({ name: t.name, digest: t.digest }));
  const digest = datasetDigest(entries);

  const settled = (existing: DatasetRecord | undefined): PublishResult | undefined => {
    if (!existing) return undefined;
    if (existing.status === "deleted") {
      // the same content may come back under its old name; other content would make one name mean two things
      if (existing.digest === digest) return undefined;
      throw new EvolveError(
        "dataset_version_deleted",
        `${opts.name}@${opts.version} was deleted${existing.deleted_at ? ` (${existing.deleted_at})` : ""} and held other content; a deleted version is never reused with other content`,
        "publish under a new version (e.g. bump it); republishing the exact content it held restores it",
      );
    }
    if (existing.digest === digest) return { status: "unchanged", dataset: existing };
    throw new EvolveError(
      "dataset_version_exists",
      `${opts.name}@${opts.version} is already published with different content`,
      "publish under a new version (e.g. bump it); a published version never changes",
    );
  };
  const early = settled(store.getDataset(opts.name, opts.version));
  if (early) return early;

  return commitTasks(store, home, tasks, (): PublishResult => {
    const again = settled(store.getDataset(opts.name, opts.version));
    if (again) return again;
    const now = new Date().toISOString();
    const tomb = store.getDataset(opts.name, opts.version);
    // a dataset lives in one place: a new version goes where its name already is, whatever --org says
    const first = store.listDatasets(opts.name)[0];
    const org = first ? first.org : opts.org;
    const rec: DatasetRecord = {
      name: opts.name,
      version: opts.version,
      digest,
      tasks: entries,
      status: "active",
      created_at: tomb?.created_at ?? now,
      updated_at: now,
      ...(org !== undefined ? { org } : {}),
      ...(opts.created_by !== undefined ? { created_by: opts.created_by } : {}),
    };
    store.putDataset(rec);
    return { status: tomb ? "restored" : "published", dataset: rec };
  });
}

/** One row of `dataset list`. */
export interface DatasetRow {
  name: string;
  version: string;
  task_count: number;
  status: DatasetRecord["status"];
  digest: string;
  created_at: string;
  updated_at: string;
}

/** Every published name@version, newest first (deleted ones are not listed). */
export function listDatasets(store: Store): DatasetRow[] {
  return liveDatasets(store)
    .map((d) => ({
      name: d.name,
      version: d.version,
      task_count: d.tasks.length,
      status: d.status,
      digest: d.digest,
      created_at: d.created_at,
      updated_at: d.updated_at,
    }))
    .sort((a, b) => cmp(b.updated_at, a.updated_at) || cmp(a.name, b.name) || cmp(b.version, a.version));
}

/** The versions that are published now (not deleted); of one name, or of every name. */
function liveDatasets(store: Store, name?: string): DatasetRecord[] {
  return store.listDatasets(name).filter((d) => d.status === "active");
}

/** The versions `ref` names, newest first: one for `name@version`, every version for a bare `name`; never a deleted one. */
export function resolveDataset(store: Store, ref: string): DatasetRecord[] {
  const r = parseDatasetRef(ref);
  const one = r.version !== undefined ? store.getDataset(r.name, r.version) : undefined;
  const found =
    r.version !== undefined
      ? [one].filter((d): d is DatasetRecord => d !== undefined && d.status === "active")
      : liveDatasets(store, r.name).sort((a, b) => cmp(b.created_at, a.created_at) || cmp(b.version, a.version));
  if (found.length === 0) {
    const gone = one?.status === "deleted" ? ` (it was deleted${one.deleted_at ? ` ${one.deleted_at}` : ""})` : "";
    const held = liveDatasets(store, r.name).map((d) => `${d.name}@${d.version}`);
    // evolve downloads no registry (Harbor's terminal-bench@2.0 is not fetched): a dataset is published here from a folder
    const hint =
      held.length > 0
        ? `held here: ${held.slice(0, 5).join(", ")}${held.length > 5 ? ", …" : ""} (see \`evolve dataset list\`)`
        : `evolve downloads no dataset: get its tasks as a folder (e.g. a git clone) and publish it with \`evolve dataset publish <folder> --name ${r.name} --version ${r.version ?? "1.0"}\`, or run the folder directly with -p <folder>`;
    throw new EvolveError("dataset_not_found", `no dataset ${ref}${gone}`, hint);
  }
  return found;
}

/** One task of a shown dataset. */
export interface ShownTask {
  name: string;
  digest: string;
  summary: TaskSummaryRecord;
}

/** A dataset version with each task's summary. `ref` is `name@version`, or `name` for its newest version. */
export function showDataset(store: Store, ref: string): { dataset: DatasetRecord; tasks: ShownTask[] } {
  const dataset = resolveDataset(store, ref)[0];
  const tasks = dataset.tasks.map((t) => {
    const rec = store.getTask(t.digest);
    if (!rec) {
      throw new EvolveError(
        "store_corrupt",
        `${dataset.name}@${dataset.version} lists task ${t.name} (${t.digest}) but the store has no such task`,
        "republish the dataset under a new version",
      );
    }
    return { name: t.name, digest: t.digest, summary: rec.summary };
  });
  return { dataset, tasks };
}

/** What a delete removed: `name@version` strings, and the task digests no longer used by anything. */
export interface DeleteResult {
  versions: string[];
  tasks_removed: string[];
}

/**
 * Deletes `name@version`, or every version of a bare `name`, leaving a tombstone of each (see publishDataset). Task records and blob folders that no remaining
 * dataset version and no trial refers to are removed in the same write transaction (blobs are first renamed
 * out of the way under the lock, then erased after commit); anything still referenced is kept.
 */
export function deleteDataset(store: Store, ref: string): DeleteResult {
  const home = store.home;
  const trash: { from: string; to: string }[] = [];
  const result = store.transaction((): DeleteResult => {
    try {
      return collect();
    } catch (e) {
      // The transaction rolls the records back; put the blobs we already moved back beside them.
      for (const t of trash.reverse()) renameSync(t.to, t.from);
      trash.length = 0;
      throw e;
    }
  });
  for (const t of trash) rmSync(t.to, { recursive: true, force: true });
  return result;

  function collect(): DeleteResult {
    const victims = resolveDataset(store, ref);
    const at = new Date().toISOString();
    // a tombstone, not a removal: the digest it keeps is what refuses other content under this name@version later
    for (const d of victims) store.putDataset({ ...d, status: "deleted", updated_at: at, deleted_at: at });
    const candidates = new Set(victims.flatMap((d) => d.tasks.map((t) => t.digest)));
    for (const d of liveDatasets(store)) for (const t of d.tasks) candidates.delete(t.digest);
    for (const t of store.listTrials()) candidates.delete(t.task_digest);
    const removed = [...candidates].sort();
    for (const digest of removed) {
      store.deleteTask(digest);
      const blob = taskBlobDir(home, digest);
      if (existsSync(blob)) {
        const to = join(dirname(blob), `.trash-${newId()}`);
        renameSync(blob, to);
        trash.push({ from: blob, to });
      }
    }
    return { versions: victims.map((d) => `${d.name}@${d.version}`), tasks_removed: removed };
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
