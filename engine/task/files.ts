/**
 * Read-only file helpers for the validator. Every helper answers "no" instead of throwing, so odd trees
 * (dangling links, unreadable files, a file where a folder belongs) become findings, never crashes.
 */
import { constants } from "node:fs";
import { open, readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/** True when `p` is a regular file (following links). */
export async function isFile(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isFile();
  } catch {
    return false;
  }
}

/** True when `p` is a directory (following links). */
export async function isDir(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The text of a regular file, cut at `limit` bytes; undefined when unreadable, not a regular file, or binary (NUL
 * bytes). The file is opened non-blocking and checked on the open handle, so a FIFO cannot hang the validator and a
 * link to /dev/zero or a huge file costs at most `limit` bytes of memory.
 */
export async function readText(p: string, limit = 1 << 20): Promise<string | undefined> {
  let fh;
  try {
    fh = await open(p, constants.O_RDONLY | constants.O_NONBLOCK);
    if (!(await fh.stat()).isFile()) return undefined;
    const chunks: Buffer[] = [];
    let total = 0;
    while (total < limit) {
      const chunk = Buffer.alloc(Math.min(limit - total, 1 << 16));
      const { bytesRead } = await fh.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      chunks.push(bytesRead === chunk.length ? chunk : chunk.subarray(0, bytesRead));
      total += bytesRead;
    }
    const cut = Buffer.concat(chunks, total);
    if (cut.includes(0)) return undefined;
    return cut.toString("utf8");
  } catch {
    return undefined;
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/** Names of the sub-directories of `p`, sorted; empty when `p` is not a readable directory. */
export async function subdirs(p: string): Promise<string[]> {
  try {
    const ents = await readdir(p, { withFileTypes: true });
    const out: string[] = [];
    for (const e of ents) if (e.isDirectory() || (e.isSymbolicLink() && (await isDir(join(p, e.name))))) out.push(e.name);
    return out.sort();
  } catch {
    return [];
  }
}

/**
 * Files under `root` as paths relative to `base`, depth-first, bounded so that a task with a huge tests/ folder
 * (datasets, node_modules) cannot stall validation.
 */
export async function walkFiles(root: string, base: string, maxFiles = 2000, maxDepth = 8): Promise<string[]> {
  const out: string[] = [];
  async function walk(dir: string, rel: string, depth: number): Promise<void> {
    if (depth > maxDepth || out.length >= maxFiles) return;
    let ents;
    try {
      ents = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    ents.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of ents) {
      if (out.length >= maxFiles) return;
      const r = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) await walk(join(dir, e.name), r, depth + 1);
      else if (e.isFile()) out.push(r);
    }
  }
  const relRoot = root.startsWith(base) ? root.slice(base.length).replace(/^[/\\]+/, "").replace(/\\/g, "/") : "";
  await walk(root, relRoot, 0);
  return out;
}
