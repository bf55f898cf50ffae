/**
 * Plain-file trees for the evaluation layer and the strategies on it: walking, copying and atomically writing the
 * files of a `.agent/`, a candidate (candidate-store.ts), an adapter and a backup. A harness is text a person edits, so anything that is not a plain file or folder (a link, a
 * FIFO, a socket, a device) is refused rather than followed: a link in a candidate would let a screen or an install
 * read or write outside the project, and a FIFO would hang the copy.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, writeSync, type Stats } from "node:fs";
import { basename, dirname, join } from "node:path";
import { readOpenFile } from "../regular-file.ts";
import { MAX_AGENT_BYTES, MAX_AGENT_FILES } from "../conductor/layout.ts";
import { EvolveError, diskFullError } from "../errors.ts";

/** The most files and bytes one copy (an overlay, a scaffold, an install) takes: a `.agent/`'s limit (layout.ts), so a trial can take any overlay. */
export const MAX_TREE_FILES = MAX_AGENT_FILES;
export const MAX_TREE_BYTES = MAX_AGENT_BYTES;

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** What one copy has taken so far, against {@link MAX_TREE_FILES} and {@link MAX_TREE_BYTES}. */
export interface CopyBudget {
  files: number;
  bytes: number;
}

/** A fresh budget. */
export function newBudget(): CopyBudget {
  return { files: 0, bytes: 0 };
}

/** What a non-plain entry is, in words for an error (its lstat: a link is never followed); `other` for anything else. */
export function kindOf(st: Stats, other = "not a plain file"): string {
  if (st.isSymbolicLink()) return "a symbolic link";
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  return other;
}

/** The refusal of `path`, which is `what` rather than a plain file or folder. */
export function unsafe(path: string, what: string): EvolveError {
  return new EvolveError("agent_dir_unsafe", `${path} is ${what}; agent folders are copied only as plain files and folders`, "replace it with a plain file (or remove it) and run the command again");
}

/** lstat, or undefined when nothing is there. */
export function lstatOrNone(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw e;
  }
}

/** Charges one file of `size` bytes to `budget`; over either limit → agent_dir_too_large naming `path`. */
function charge(budget: CopyBudget, size: number, path: string): void {
  budget.files++;
  budget.bytes += size;
  if (budget.files > MAX_TREE_FILES || budget.bytes > MAX_TREE_BYTES) {
    throw new EvolveError(
      "agent_dir_too_large",
      `copying ${path} goes over ${MAX_TREE_FILES} files or ${MAX_TREE_BYTES / 1024 / 1024} MiB`,
      "an agent folder holds text a harness reads; move large data out of it",
    );
  }
}

/** The bytes and permission bits of the plain file `path`, never following a link (a link or FIFO → agent_dir_unsafe). */
export function readPlainFile(path: string, budget: CopyBudget): { data: Buffer; mode: number } {
  let fd: number;
  try {
    fd = openSync(path, READ_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ELOOP" || code === "EMLINK") throw unsafe(path, "a symbolic link");
    if (code === "ENXIO") throw unsafe(path, "a socket or FIFO");
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw unsafe(path, kindOf(st));
    charge(budget, st.size, path);
    return { data: readOpenFile(fd, st.size), mode: st.mode & 0o777 };
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes `data` to `path` whole or not at all: a temporary file beside it, then a rename, so a crash leaves the old
 * file or the new one and never half of either. A folder in the way is removed (a file replaces a folder).
 */
export function writeFileAtomic(path: string, data: Uint8Array, mode: number): void {
  const st = lstatOrNone(path);
  if (st?.isDirectory()) rmSync(path, { recursive: true, force: true });
  const tmp = join(dirname(path), `.${basename(path)}.evolve-${randomBytes(4).toString("hex")}`);
  try {
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
    try {
      let off = 0;
      while (off < data.length) off += writeSync(fd, data, off, data.length - off);
    } finally {
      closeSync(fd);
    }
    // the mode given to open is cut by the umask; a harness file keeps exactly its permissions
    chmodSync(tmp, mode);
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw diskFullError(e, path);
  }
}

/** Makes `path` a folder: a file in the way is removed (a folder replaces a file). */
export function ensureDir(path: string): void {
  const st = lstatOrNone(path);
  if (st?.isDirectory()) return;
  if (st) rmSync(path, { force: true });
  mkdirSync(path, { recursive: true });
}

/** The plain files and folders under `root`, as `/`-separated relative paths. */
export interface TreeListing {
  /** Relative path → permission bits. */
  files: Map<string, number>;
  /** Every folder under the root (not the root itself). */
  dirs: Set<string>;
}

/**
 * Lists the tree at `root` without following links; a link or special file anywhere → `refuse(path, what)`
 * (agent_dir_unsafe unless the caller says otherwise: a stored candidate's digest calls it tampering). `skip` names
 * top-level entries left out (the live harness's `memory/`). A missing root lists as empty; an entry gone between
 * the folder's read and its lstat is left out, as if it had gone a moment earlier.
 */
export function listTree(root: string, skip: readonly string[] = [], refuse: (path: string, what: string) => Error = unsafe): TreeListing {
  const out: TreeListing = { files: new Map(), dirs: new Set() };
  const top = lstatOrNone(root);
  if (!top) return out;
  if (!top.isDirectory()) throw refuse(root, top.isFile() ? "a file, not a folder" : kindOf(top));
  const walk = (dir: string, rel: string) => {
    for (const name of readdirSync(dir).sort()) {
      if (!rel && skip.includes(name)) continue;
      const path = join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatOrNone(path);
      if (!st) continue;
      if (st.isDirectory()) {
        out.dirs.add(r);
        walk(path, r);
      } else if (st.isFile()) {
        out.files.set(r, st.mode & 0o777);
        if (out.files.size > MAX_TREE_FILES) charge({ files: MAX_TREE_FILES, bytes: 0 }, 0, root);
      } else throw refuse(path, kindOf(st));
    }
  };
  walk(root, "");
  return out;
}

/**
 * Copies the tree at `src` over `dst` file by file (folders merge, a file replaces what is at its path), without
 * following links. `skip` names top-level entries of `src` left out. A missing `src` copies nothing.
 */
export function copyTreeOver(src: string, dst: string, budget: CopyBudget, skip: readonly string[] = []): void {
  const listing = listTree(src, skip);
  ensureDir(dst);
  for (const d of listing.dirs) ensureDir(join(dst, d));
  for (const f of listing.files.keys()) {
    const { data, mode } = readPlainFile(join(src, f), budget);
    writeFileAtomic(join(dst, f), data, mode);
  }
}

/**
 * Copies the one entry `rel` of `srcRoot` (a file or a folder) to the same place under `dstRoot`; returns false when
 * `srcRoot` has nothing there.
 */
export function copyEntry(srcRoot: string, dstRoot: string, rel: string, budget: CopyBudget): boolean {
  const src = join(srcRoot, rel);
  // a link at a folder along the way would be followed by the lstat of the entry itself
  const parts = rel.split("/");
  for (let i = 1; i < parts.length; i++) {
    const along = join(srcRoot, ...parts.slice(0, i));
    const a = lstatOrNone(along);
    if (!a) return false;
    if (!a.isDirectory()) {
      if (a.isFile()) return false;
      throw unsafe(along, kindOf(a));
    }
  }
  const st = lstatOrNone(src);
  if (!st) return false;
  if (st.isDirectory()) copyTreeOver(src, join(dstRoot, rel), budget);
  else if (st.isFile()) {
    ensureDir(dirname(join(dstRoot, rel)));
    const { data, mode } = readPlainFile(src, budget);
    writeFileAtomic(join(dstRoot, rel), data, mode);
  } else throw unsafe(src, kindOf(st));
  return true;
}
