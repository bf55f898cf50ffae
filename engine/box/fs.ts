/**
 * Host-side access to files a box could write (the trial's mounted `agent/`, `verifier/`, `artifacts/` folders).
 * An agent is root in its box and may plant a symbolic link to a host file, a FIFO that never answers, a device
 * that never ends, or swap a file for a link between a read and a write. So every read here opens without
 * following links and without blocking, checks on the open descriptor that it holds a regular file inside the
 * trial's folder, and reads a bounded number of bytes. What evolve writes into those folders (redaction, the
 * set-id sweep) is sweep.ts's, after every box of the trial is gone.
 * A refusal names the path and what it is, never the content of what a link points at.
 */
import { constants } from "node:fs";
import type { Dirent } from "node:fs";
import { lstat, open, readdir, readlink, realpath, type FileHandle } from "node:fs/promises";
import { join, relative, sep } from "node:path";

/** What one box-written file may cost to read: bytes (a tail is read from the end). */
export const BOX_READ_LIMIT = 16 * 1024 * 1024;

/** A box-written path that is not a regular file inside its folder: refused, with what it is. */
export class BoxFileRefused extends Error {
  constructor(
    readonly path: string,
    readonly what: string,
  ) {
    super(`refusing to read ${path}: it is ${what}, not a regular file the box wrote`);
    this.name = "BoxFileRefused";
  }
}

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

function kindOf(mode: number): string {
  switch (mode & constants.S_IFMT) {
    case constants.S_IFLNK:
      return "a symbolic link";
    case constants.S_IFIFO:
      return "a FIFO";
    case constants.S_IFCHR:
      return "a character device";
    case constants.S_IFBLK:
      return "a block device";
    case constants.S_IFSOCK:
      return "a socket";
    case constants.S_IFDIR:
      return "a folder";
    default:
      return "not a regular file";
  }
}

/**
 * Opens `path` for reading when it is a regular file whose real location is inside `root`; undefined when it does
 * not exist. O_NOFOLLOW refuses a link at the last component, O_NONBLOCK keeps a FIFO from hanging the open, and
 * the descriptor's own path (/proc/self/fd) proves no link in a parent folder led outside `root`.
 */
export async function openBoxFile(root: string, path: string): Promise<FileHandle | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, READ_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    if (code === "ELOOP" || code === "EMLINK") throw new BoxFileRefused(path, "a symbolic link");
    if (code === "ENXIO") throw new BoxFileRefused(path, "a socket or a device");
    throw e;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new BoxFileRefused(path, kindOf(st.mode));
    const real = await realRoot(root);
    const at = await readlink(`/proc/self/fd/${fh.fd}`).catch(() => undefined);
    if (at !== undefined && at !== real && !at.startsWith(real + sep)) throw new BoxFileRefused(path, "reached through a link out of its folder");
    return fh;
  } catch (e) {
    await fh.close();
    throw e;
  }
}

async function realRoot(root: string): Promise<string> {
  try {
    return await realpath(root);
  } catch {
    return root;
  }
}

/**
 * Reads at most `limit` bytes of a box-written file as UTF-8 (the first `limit`, or with `tail` the last);
 * undefined when absent. Throws {@link BoxFileRefused} for anything but a regular file inside `root`.
 */
export async function readBoxFile(root: string, path: string, opts: { limit?: number; tail?: boolean } = {}): Promise<string | undefined> {
  const buf = await readBoxBytes(root, path, opts);
  return buf?.toString("utf8");
}

/** {@link readBoxFile} as bytes, with the file's full size. */
export async function readBoxBytes(root: string, path: string, opts: { limit?: number; tail?: boolean; from?: number } = {}): Promise<Buffer | undefined> {
  const fh = await openBoxFile(root, path);
  if (!fh) return undefined;
  try {
    const limit = opts.limit ?? BOX_READ_LIMIT;
    const size = (await fh.stat()).size;
    const start = opts.from !== undefined ? Math.min(opts.from, size) : opts.tail ? Math.max(0, size - limit) : 0;
    return await readRange(fh, start, Math.min(limit, size - start));
  } finally {
    await fh.close();
  }
}

/** Up to `n` bytes of an open file from byte `start` (fewer when the file ends first). */
export async function readRange(fh: FileHandle, start: number, n: number): Promise<Buffer> {
  const buf = Buffer.alloc(n);
  let got = 0;
  while (got < n) {
    const { bytesRead } = await fh.read(buf, got, n - got, start + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return buf.subarray(0, got);
}

/**
 * Visits every entry under `dir`, depth first, never descending into a linked folder (dirents are lstat-based);
 * `visit` returns false to stop the walk. An unreadable folder is skipped.
 */
async function walkBox(dir: string, visit: (path: string, entry: Dirent) => Promise<boolean | void>): Promise<void> {
  const walk = async (d: string): Promise<boolean> => {
    let entries: Dirent[];
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch {
      return true;
    }
    for (const e of entries) {
      const p = join(d, e.name);
      if ((await visit(p, e)) === false) return false;
      if (e.isDirectory() && !(await walk(p))) return false;
    }
    return true;
  };
  await walk(dir);
}

/** Every regular file under `dir` (absolute paths), links and special files left out; at most `max` of them. */
export async function listBoxFiles(dir: string, max = 200_000): Promise<string[]> {
  const out: string[] = [];
  await walkBox(dir, async (p, e) => {
    if (e.isFile()) out.push(p);
    return out.length < max;
  });
  return out;
}

/** `path` relative to `root` for messages, so a refusal names the trial's file and not an absolute host path. */
export function shown(root: string, path: string): string {
  const r = relative(root, path);
  return r && !r.startsWith("..") ? r : path;
}

/**
 * Streams a box-written file from byte `from` to its current end in bounded chunks, returning the offset reached
 * (`from` when absent). For `trial logs`: a log of any size prints without being held in memory, and a FIFO or a
 * link planted at a stream's name is refused instead of hanging or leaking the link's target.
 */
export async function streamBoxFile(root: string, path: string, onChunk: (b: Buffer) => void, from = 0): Promise<number> {
  const fh = await openBoxFile(root, path);
  if (!fh) return from;
  try {
    const size = (await fh.stat()).size;
    let pos = from > size ? 0 : from;
    const chunk = Buffer.alloc(256 * 1024);
    while (pos < size) {
      const { bytesRead } = await fh.read(chunk, 0, Math.min(chunk.length, size - pos), pos);
      if (bytesRead === 0) break;
      onChunk(Buffer.from(chunk.subarray(0, bytesRead)));
      pos += bytesRead;
    }
    return pos;
  } finally {
    await fh.close();
  }
}

/** Why the folders from `agentDir` down to `rel` cannot be walked (one is a link or not a folder), or undefined. */
export async function linkedOnTheWay(agentDir: string, rel: string): Promise<string | undefined> {
  let at = agentDir;
  for (const part of rel.split(sep).filter(Boolean)) {
    at = join(at, part);
    const st = await lstat(at).catch(() => undefined);
    if (!st) return undefined;
    if (st.isSymbolicLink()) return `${relative(agentDir, at)} is a symbolic link`;
    if (!st.isDirectory()) return `${relative(agentDir, at)} is not a folder`;
  }
  return undefined;
}
