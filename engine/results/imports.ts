/**
 * The record of one `evolve upload`: an import, with its own id, kept as a small JSON file under
 * `<home>/imports/<id>.json` beside its working folder `<home>/imports/<id>/` (an archive unpacked there; removed
 * once the import ends). An import is RUNNING while a process works on it (its pid recorded), then COMPLETED with
 * the job it made or FAILED with the refusal's code; a RUNNING import whose process is gone reads as FAILED
 * (`import_interrupted`). `job imports` and `job import` read these files; only the importing process writes one.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";

/** What an uploaded job shows as its provider (platform-upload.md): it ran on another machine and was ported here. */


/** An import's statuses. */
export const IMPORT_STATUSES = ["RUNNING", "COMPLETED", "FAILED"] as const; // in this order: code names them by position
export type ImportStatus = (typeof IMPORT_STATUSES)[number];

/** A trial left out of an import, and why (`trial_too_large`). */
export interface SkippedTrial {
  trial: string;
  code: string;
  reason: string;
}

/** An archive entry or folder entry that was not taken (a link, a device, `..`, a duplicate), and why. */
export interface SkippedEntry {
  path: string;
  reason: string;
}

/** One import as `job imports --json` and `job import --json` print it (docs/json.md). */
export interface ImportRecord {
  id: string;
  status: ImportStatus;
  /** What was uploaded: the folder or archive path as given. */
  source: string;
  /** `-d name@version`, when given. */
  dataset: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  /** The job the import made, once it exists. */
  job_id: string | null;
  /** The trials imported, and how many of them carry a reward. */
  trials: number;
  scored: number;
  skipped_trials: SkippedTrial[];
  skipped_entries: SkippedEntry[];
  /** Why a FAILED import failed: the refusal's stable code and message. */
  error: { code: string; message: string } | null;
  /** The process working on it while RUNNING. */
  runner: { pid: number; host: string } | null;
}

/** The folder of every import's record. */
export function importsDir(home: string): string {
  return join(home, "imports");
}

/** An import's working folder (an archive is unpacked here). */
export function importWorkDir(home: string, id: string): string {
  return join(importsDir(home), id);
}

const recordPath = (home: string, id: string) => join(importsDir(home), `${id}.json`);

/** Writes an import's record atomically (temp file + rename). */
export function putImport(home: string, rec: ImportRecord): void {
  mkdirSync(importsDir(home), { recursive: true });
  const tmp = join(importsDir(home), `.${rec.id}.json.tmp-${process.pid}`);
  writeFileSync(tmp, JSON.stringify(rec, null, 2) + "\n");
  renameSync(tmp, recordPath(home, rec.id));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A RUNNING import whose process is gone, read as FAILED (`import_interrupted`): nothing will finish it. */
function settled(rec: ImportRecord): ImportRecord {
  if (rec.status !== IMPORT_STATUSES[0] || !rec.runner || rec.runner.host !== hostname() || alive(rec.runner.pid)) return rec;
  return { ...rec, status: IMPORT_STATUSES[2], error: { code: "import_interrupted", message: `the process importing it (pid ${rec.runner.pid}) is gone` }, runner: null };
}

/** The import `id`, or undefined. */
export function getImport(home: string, id: string): ImportRecord | undefined {
  if (!/^[0-9A-Za-z]+$/.test(id)) return undefined;
  const p = recordPath(home, id);
  if (!existsSync(p)) return undefined;
  try {
    return settled(JSON.parse(readFileSync(p, "utf8")) as ImportRecord);
  } catch {
    return undefined;
  }
}

/** Every import, newest first; with `status`, only those in it. */
export function listImports(home: string, status?: string): ImportRecord[] {
  const dir = importsDir(home);
  if (!existsSync(dir)) return [];
  const out: ImportRecord[] = [];
  for (const n of readdirSync(dir)) {
    if (!n.endsWith(".json") || n.startsWith(".")) continue;
    const r = getImport(home, n.slice(0, -5));
    if (r && (status === undefined || r.status === status)) out.push(r);
  }
  return out.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
}
