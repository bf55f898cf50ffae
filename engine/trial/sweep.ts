/**
 * The persist sweep: what a settled trial's tree goes through before it is kept (run once every box of the trial is
 * gone). Set-id bits come off, device nodes, FIFOs and sockets go, and every secret value is replaced in every
 * file, link target and name. The tree was written by a hostile box that knows this code, so:
 *
 * - evolve's own temporary files live in a folder of the trial that no box ever mounts (`.evolve-tmp-<random>` in
 *   the 0700 trial folder), opened O_EXCL under random names: nothing a box planted can collide with them, and no
 *   name or message carries evolve's pid;
 * - the walk goes by descriptors, never by full paths: each folder is opened O_NOFOLLOW|O_DIRECTORY relative to its
 *   parent's descriptor (through `/proc/self/fd/N/name`, Node having no openat), so a path deeper than PATH_MAX is
 *   walked like any other and no link is ever followed; a tree deeper than DEPTH_LIMIT is moved out whole (one
 *   rename) and removed without descending by path;
 * - what it reads is bounded: a file larger than FILE_LIMIT (a 100 GB sparse file), reads past READ_BUDGET and
 *   anything left when the deadline passes are not read; a large file that holds no data at all (all hole) needs
 *   no read;
 * - an entry that cannot be read, rewritten or passed over safely is removed: a file persist could not check for
 *   secrets never stays in plain text;
 * - every such entry is recorded (the caller writes them to `persist-skipped.json` and trial.log); nothing the box
 *   wrote makes the sweep throw. Only evolve's own failures do (its temp folder, a full disk).
 */
import { randomBytes } from "node:crypto";
import { constants, type Dirent } from "node:fs";
import { chmod, lstat, mkdir, open, readdir, readlink, rename, rm, rmdir, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { isDiskFull } from "../errors.ts";

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/** The largest file redaction reads (apparent size): a larger one holding data is removed, recorded. */
export const FILE_LIMIT = 1 * GIB;
/** What redaction reads of all files together in one persist. */
export const READ_BUDGET = 8 * GIB;
/** How long one persist sweep may take before it settles with what it has. */
export const PERSIST_DEADLINE_MS = 5 * 60_000;
/** Folder levels walked below the trial folder; a deeper tree is removed whole, recorded. */
export const DEPTH_LIMIT = 256;
/** Entries kept in the recorded list (the count says how many in all). */
export const SKIPPED_LIST_LIMIT = 1000;
/** The prefix of evolve's own temporary folder in a trial folder; nothing of a box is ever named so at that level. */
export const TMP_PREFIX = ".evolve-tmp-";

/** Why an entry was not kept as the box wrote it. */
export type SkipReason = "too_large" | "read_budget" | "deadline" | "too_deep" | "unreadable" | "secret_in_name" | "all_hole";

/** One entry the sweep did not keep as the box wrote it (or did not read): its path in the trial folder, why, and what was done. */
export interface SkippedEntry {
  path: string;
  reason: SkipReason;
  /** `kept` for a large file that is all hole (nothing in it to read), or an entry that could not be removed. */
  action: "removed" | "renamed" | "kept";
  /** The file's apparent size, and its allocated bytes (less for a sparse file), when known. */
  bytes?: number;
  allocated?: number;
  /** The error code of an entry that could not be read or rewritten. */
  code?: string;
}

/** What one sweep did, for trial.log and persist-skipped.json. */
export interface SweepReport {
  setid: string[];
  special: string[];
  redacted: number;
  /** Up to SKIPPED_LIST_LIMIT entries; `skippedCount` counts them all. */
  skipped: SkippedEntry[];
  skippedCount: number;
  /** The deadline passed before the walk ended: what was left was removed, unread. */
  deadlineHit: boolean;
  bytesRead: number;
}

/** How one sweep runs: the values it replaces and its bounds (the defaults above unless a test narrows them). */
export interface SweepOptions {
  /** The values to replace (each 4 bytes or more; shorter ones are dropped). */
  secrets: readonly string[];
  replacement?: string;
  fileLimit?: number;
  readBudget?: number;
  /** Epoch milliseconds after which nothing more a box wrote is read. */
  deadline?: number;
  depthLimit?: number;
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const CHUNK = 1 * MIB;

const fdPath = (fh: FileHandle) => `/proc/self/fd/${fh.fd}`;
const codeOf = (e: unknown) => (e as NodeJS.ErrnoException)?.code ?? "EIO";
const randomName = (kind: string) => `${kind}-${randomBytes(12).toString("hex")}`;

/** Evolve's own failures (a full disk) pass; anything else an entry raised is the box's content's doing. */
function ownFailure(e: unknown): boolean {
  return isDiskFull(e);
}

/**
 * Sweeps the trial folder `root` (see the module's comment). Throws only for evolve's own failures; everything the
 * box's content causes is handled entry by entry and recorded in the report.
 */
export async function sweepTree(root: string, o: SweepOptions): Promise<SweepReport> {
  const values = [...new Set(o.secrets.filter((s) => s.length >= 4))].map((s) => Buffer.from(s));
  const replacement = Buffer.from(o.replacement ?? "[redacted]");
  const fileLimit = o.fileLimit ?? FILE_LIMIT;
  const readBudget = o.readBudget ?? READ_BUDGET;
  const deadline = o.deadline ?? Date.now() + PERSIST_DEADLINE_MS;
  const depthLimit = o.depthLimit ?? DEPTH_LIMIT;
  const report: SweepReport = { setid: [], special: [], redacted: 0, skipped: [], skippedCount: 0, deadlineHit: false, bytesRead: 0 };
  const keep = values.length > 0 ? Math.max(...values.map((v) => v.length)) - 1 : 0;

  // a stale temp folder of a killed persist is evolve's own: it goes first
  for (const n of await readdir(root).catch(() => [] as string[])) if (n.startsWith(TMP_PREFIX)) await removeOut(root, n, null);
  const tmpName = TMP_PREFIX + randomBytes(12).toString("hex");
  const tmp = join(root, tmpName);
  await mkdir(tmp, { mode: 0o700 });

  const skip = (e: SkippedEntry) => {
    report.skippedCount++;
    if (report.skipped.length < SKIPPED_LIST_LIMIT) report.skipped.push(e);
  };
  const late = () => {
    if (Date.now() < deadline) return false;
    report.deadlineHit = true;
    return true;
  };
  /** Moves `dir/name` out of the tree into the temp folder (one rename, whatever its depth); removes it when it cannot. */
  const moveOut = async (dir: string, name: string): Promise<void> => {
    try {
      await rename(`${dir}/${name}`, join(tmp, randomName("gone")));
    } catch (e) {
      if (ownFailure(e)) throw e;
      await removeOut(dir, name, tmp);
    }
  };
  const removed = async (dir: string, name: string, entry: Omit<SkippedEntry, "action">) => {
    await moveOut(dir, name);
    // the record says what is true: an entry that could be neither moved nor removed (a folder we may not write) stays
    const left = await lstat(`${dir}/${name}`).then(() => true, () => false);
    skip({ ...entry, action: left ? "kept" : "removed" });
  };

  /** One regular file: set-id bits off, then (with secrets) read within the bounds and rewritten when it holds one. */
  const visitFile = async (dir: string, name: string, shown: string, own: boolean): Promise<void> => {
    let fh: FileHandle;
    try {
      fh = await open(`${dir}/${name}`, READ_FLAGS);
    } catch (e) {
      if (ownFailure(e)) throw e;
      // unreadable (a mapped id's 0600 file under rootless podman): it cannot be checked, so it cannot stay
      if (values.length > 0) await removed(dir, name, { path: shown, reason: "unreadable", code: codeOf(e) });
      return;
    }
    let replaceWith: string | undefined;
    try {
      const st = await fh.stat();
      if (!st.isFile()) return;
      if ((st.mode & 0o6000) !== 0) {
        await fh.chmod(st.mode & 0o1777);
        report.setid.push(shown);
      }
      if (values.length === 0) return;
      const sized = { path: shown, bytes: st.size, allocated: st.blocks * 512 };
      if (st.size > fileLimit) {
        // a large file with no block allocated is all hole (small files may live inline with 0 blocks: they are read)
        if (st.blocks === 0) return void skip({ ...sized, reason: "all_hole", action: "kept" });
        return void (await removedAfter(fh, () => removed(dir, name, { ...sized, reason: "too_large" })));
      }
      if (report.bytesRead + st.size > readBudget) return void (await removedAfter(fh, () => removed(dir, name, { ...sized, reason: "read_budget" })));
      if (!own && late()) return void (await removedAfter(fh, () => removed(dir, name, { ...sized, reason: "deadline" })));
      const found = await containsAny(fh, values, keep, report, own ? Infinity : deadline);
      if (found === "late") return void (await removedAfter(fh, () => removed(dir, name, { ...sized, reason: "deadline" })));
      if (!found) return;
      const out = join(tmp, randomName("redact"));
      await rewriteRedacted(fh, out, st.mode & 0o777, values, replacement, keep);
      replaceWith = out;
    } catch (e) {
      if (ownFailure(e)) throw e;
      await fh.close().catch(() => {});
      if (values.length > 0) await removed(dir, name, { path: shown, reason: "unreadable", code: codeOf(e) });
      return;
    } finally {
      await fh.close().catch(() => {});
    }
    if (replaceWith) {
      try {
        await rename(replaceWith, `${dir}/${name}`);
        report.redacted++;
      } catch (e) {
        if (ownFailure(e)) throw e;
        await rm(replaceWith, { force: true });
        await removed(dir, name, { path: shown, reason: "unreadable", code: codeOf(e) });
      }
    }
  };

  /** Replaces a secret in a name by the replacement (a free name beside it); the name the entry has now ("" when removed). */
  const renameIfSecret = async (dir: string, name: string, shown: string): Promise<string> => {
    if (values.length === 0 || !values.some((v) => Buffer.from(name).includes(v))) return name;
    const next = redactText(name, values, replacement);
    for (let i = 0; ; i++) {
      const candidate = i === 0 ? next : `${next}.${i}`;
      if (await lstat(`${dir}/${candidate}`).then(() => true, () => false)) continue;
      try {
        await rename(`${dir}/${name}`, `${dir}/${candidate}`);
      } catch (e) {
        if (ownFailure(e)) throw e;
        await removed(dir, name, { path: redactText(shown, values, replacement), reason: "secret_in_name", code: codeOf(e) });
        return "";
      }
      skip({ path: redactText(shown, values, replacement), reason: "secret_in_name", action: "renamed" });
      return candidate;
    }
  };

  const walk = async (dir: string, shownDir: string, depth: number): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (e) {
      if (ownFailure(e)) throw e;
      return; // a folder that cannot be listed was opened, so it can be listed: nothing else to do here
    }
    for (const ent of entries) {
      if (depth === 0 && ent.name === tmpName) continue;
      const shown0 = shownDir ? `${shownDir}/${ent.name}` : ent.name;
      // evolve's own files at the top (trial.log, config.json, setup.log: bounded by their writers) are always swept
      const own = depth === 0 && ent.isFile();
      if (!own && late()) {
        // past the deadline nothing more a box wrote is read or walked: the rest leaves the tree unread
        await removed(dir, ent.name, { path: redactText(shown0, values, replacement), reason: "deadline" });
        continue;
      }
      const name = await renameIfSecret(dir, ent.name, shown0);
      if (!name) continue;
      const shown = shownDir ? `${shownDir}/${name}` : name;
      if (ent.isDirectory()) {
        if (depth + 1 > depthLimit) {
          await removed(dir, name, { path: shown, reason: "too_deep" });
          continue;
        }
        let fh: FileHandle;
        try {
          fh = await open(`${dir}/${name}`, DIR_FLAGS);
        } catch (e) {
          if (ownFailure(e)) throw e;
          await removed(dir, name, { path: shown, reason: "unreadable", code: codeOf(e) });
          continue;
        }
        try {
          await walk(fdPath(fh), shown, depth + 1);
        } finally {
          await fh.close();
        }
      } else if (ent.isFile()) {
        await visitFile(dir, name, shown, own);
      } else if (ent.isSymbolicLink()) {
        // never followed; a link whose target text holds a secret goes
        if (values.length === 0) continue;
        const to = await readlink(`${dir}/${name}`, { encoding: "buffer" }).catch(() => undefined);
        if (to === undefined || values.some((v) => to.includes(v))) await removed(dir, name, { path: shown, reason: to === undefined ? "unreadable" : "secret_in_name" });
      } else {
        try {
          await unlink(`${dir}/${name}`);
        } catch (e) {
          if (ownFailure(e)) throw e;
          await moveOut(dir, name);
        }
        report.special.push(shown);
      }
    }
  };

  try {
    await walk(root, "", 0);
  } finally {
    await removeOut(root, tmpName, null);
  }
  return report;
}

async function removedAfter(fh: FileHandle, fn: () => Promise<void>): Promise<void> {
  await fh.close().catch(() => {});
  await fn();
}

function redactText(s: string, values: readonly Buffer[], by: Buffer): string {
  for (const v of values) s = s.split(v.toString()).join(by.toString());
  return s;
}

/**
 * Removes `path` (a file, a link or a folder a box wrote) whatever its depth: Node's recursive rm walks by full
 * paths and fails with ENAMETOOLONG past PATH_MAX, which would leave a box's tree in place (or fail the trial).
 */
export async function removeTree(path: string): Promise<void> {
  await removeOut(dirname(path), basename(path), null);
}

/**
 * Removes `dir/name` whatever its depth, holding at most two descriptors: each sub-folder met is moved up into
 * `spill` (or beside `name` in `dir` when there is none) by one rename, files are unlinked, the emptied folder
 * removed, and the moved ones are taken the same way. Never descends by path, never follows a link.
 */
async function removeOut(dir: string, name: string, spill: string | null): Promise<void> {
  const queue: string[] = [name];
  const up = spill ?? dir;
  let first = true;
  while (queue.length > 0) {
    const n = queue.pop()!;
    const base = first ? dir : up;
    first = false;
    const p = `${base}/${n}`;
    try {
      await unlink(p);
      continue;
    } catch (e) {
      const c = codeOf(e);
      if (c !== "EISDIR" && c !== "EPERM") continue;
    }
    let fh: FileHandle;
    try {
      fh = await open(p, DIR_FLAGS);
    } catch {
      continue;
    }
    try {
      // a folder without write or search permission for us (a box's 0500 folder) is opened up first: it is ours to remove
      await chmod(fdPath(fh), 0o700).catch(() => {});
      const entries = await readdir(fdPath(fh), { withFileTypes: true }).catch(() => [] as Dirent[]);
      for (const e of entries) {
        const child = `${fdPath(fh)}/${e.name}`;
        if (e.isDirectory()) {
          // named as evolve's temp folder: one a killed run leaves at a trial's top is swept by the next persist
          const moved = randomName(`${TMP_PREFIX}rm`);
          if (await rename(child, `${up}/${moved}`).then(() => true, () => false)) queue.push(moved);
        } else {
          await unlink(child).catch(() => {});
        }
      }
    } finally {
      await fh.close();
    }
    await rmdir(p).catch(() => {});
  }
}

/** Whether any value occurs in the open file; "late" when the deadline passed before the file was read through. */
async function containsAny(src: FileHandle, values: readonly Buffer[], keep: number, report: SweepReport, deadline: number): Promise<boolean | "late"> {
  const chunk = Buffer.alloc(CHUNK);
  let carry = Buffer.alloc(0);
  let pos = 0;
  for (;;) {
    if (Date.now() >= deadline) {
      report.deadlineHit = true;
      return "late";
    }
    const { bytesRead } = await src.read(chunk, 0, chunk.length, pos);
    if (bytesRead === 0) return false;
    pos += bytesRead;
    report.bytesRead += bytesRead;
    const text = Buffer.concat([carry, chunk.subarray(0, bytesRead)]);
    if (values.some((v) => text.includes(v))) return true;
    carry = Buffer.from(text.subarray(Math.max(0, text.length - keep)));
  }
}

/** Writes the open file with every value replaced into the fresh file `tmp` (O_EXCL: never an existing one). */
async function rewriteRedacted(src: FileHandle, tmp: string, mode: number, values: readonly Buffer[], replacement: Buffer, keep: number): Promise<void> {
  const out = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    const chunk = Buffer.alloc(CHUNK);
    let carry = Buffer.alloc(0);
    let pos = 0;
    for (;;) {
      const { bytesRead } = await src.read(chunk, 0, chunk.length, pos);
      pos += bytesRead;
      const final = bytesRead === 0;
      let text: Buffer = Buffer.concat([carry, chunk.subarray(0, bytesRead)]);
      for (const v of values) text = replaceAll(text, v, replacement);
      const cut = final ? text.length : Math.max(0, text.length - keep);
      await out.write(text.subarray(0, cut));
      carry = Buffer.from(text.subarray(cut));
      if (final) break;
    }
  } finally {
    await out.close();
  }
}

function replaceAll(buf: Buffer, needle: Buffer, by: Buffer): Buffer {
  let i = buf.indexOf(needle);
  if (i < 0) return buf;
  const parts: Buffer[] = [];
  let from = 0;
  while (i >= 0) {
    parts.push(buf.subarray(from, i), by);
    from = i + needle.length;
    i = buf.indexOf(needle, from);
  }
  parts.push(buf.subarray(from));
  return Buffer.concat(parts);
}

/**
 * Empties a folder a box could write, without following any link in it (links are removed, never their targets),
 * whatever the depth of what the box left there (removeTree walks by descriptors, not full paths).
 * The folder itself stays (it is a mount point of the box).
 */
export async function emptyBoxDir(dir: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const n of names) await removeTree(join(dir, n));
}
