/**
 * Where a results tree goes: a folder on the host (a job folder under the jobs dir, a download, an export) or one
 * `.tar.gz` file. Both take files one at a time by relative path, so a tree is never held whole.
 *
 * The folder writer never follows a link: every folder on the way to a file is checked with lstat and refused
 * (`results_target_refused`) when it is a link or not a folder, and every file is written to a fresh temp name in
 * its own folder (O_EXCL, so a planted link at that name is not opened) and renamed over its place, which replaces
 * a link rather than writing through it and lets a reader of a running job see the old file or the new, never half.
 */
import { createWriteStream, type WriteStream } from "node:fs";
import { lstat, mkdir, readdir, rename, rm, unlink, writeFile } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { dirname, join, posix } from "node:path";
import { createGzip, type Gzip } from "node:zlib";
import { EvolveError } from "../errors.ts";
import { endBlocks, entryBlocks } from "../driver/tar.ts";

/** Takes a tree's files one by one; `close` finishes it (the archive's end, the folder's stale files removed). */
export interface TreeSink {
  file(rel: string, data: Uint8Array, mode?: number): Promise<void>;
  close(): Promise<void>;
}

/** Refuses a relative path that could leave its root: empty parts, `.`/`..`, absolute, backslashes or NUL. */
export function checkRel(rel: string): string[] {
  const parts = rel.split("/");
  if (rel === "" || rel.startsWith("/") || rel.includes("\0") || parts.some((p) => p === "" || p === "." || p === "..")) {
    throw new EvolveError("internal", `a results path is not a plain relative path: ${JSON.stringify(rel)}`, "this is a bug in evolve");
  }
  return parts;
}

function refused(path: string, what: string): EvolveError {
  return new EvolveError("results_target_refused", `refusing to write under ${path}: it is ${what}, and is never followed`, "remove it (or choose another folder) and run the command again");
}

/**
 * Makes `dir` and its missing parents, refusing a link or a non-folder at any of the `parts` below `root` (the
 * root itself the caller chose, links in its own parents included).
 */
async function ensureDirs(root: string, parts: readonly string[]): Promise<void> {
  let at = root;
  for (const p of parts) {
    at = join(at, p);
    const st = await lstat(at).catch((e: NodeJS.ErrnoException) => (e.code === "ENOENT" ? undefined : Promise.reject(e)));
    if (st === undefined) {
      await mkdir(at).catch((e: NodeJS.ErrnoException) => (e.code === "EEXIST" ? undefined : Promise.reject(e)));
      const again = await lstat(at);
      if (!again.isDirectory()) throw refused(at, again.isSymbolicLink() ? "a symbolic link" : "not a folder");
    } else if (!st.isDirectory()) {
      throw refused(at, st.isSymbolicLink() ? "a symbolic link" : "not a folder");
    }
  }
}

/** Checks that `root` is a real folder (not a link), making it and its parents when missing. */
export async function ensureRoot(root: string): Promise<void> {
  const st = await lstat(root).catch(() => undefined);
  if (st === undefined) await mkdir(root, { recursive: true });
  else if (!st.isDirectory()) throw refused(root, st.isSymbolicLink() ? "a symbolic link" : "not a folder");
}

/**
 * A folder sink rooted at `root` (made when missing; a link there is refused). With `prune`, files under the
 * tree's first-level folders and files that this write did not produce are removed at close (a stale
 * exception.txt after a resume), links among them unlinked, never followed.
 */
export class DirSink implements TreeSink {
  private written = new Set<string>();
  constructor(
    readonly root: string,
    private opts: { prune?: boolean } = {},
  ) {}

  /** Writes one file atomically (temp name + rename) after checking every folder on its way. */
  async file(rel: string, data: Uint8Array, mode = 0o644): Promise<void> {
    const parts = checkRel(rel);
    await ensureDirs(this.root, parts.slice(0, -1));
    const path = join(this.root, ...parts);
    const st = await lstat(path).catch(() => undefined);
    if (st?.isDirectory()) throw refused(path, "a folder where a file goes");
    const tmp = join(dirname(path), `.${parts.at(-1)}.tmp-${randomBytes(6).toString("hex")}`);
    await writeFile(tmp, data, { flag: "wx", mode: mode & 0o777 });
    try {
      await rename(tmp, path);
    } catch (e) {
      await unlink(tmp).catch(() => {});
      throw e;
    }
    this.written.add(parts.join("/"));
  }

  async close(): Promise<void> {
    if (this.opts.prune) await this.pruneUnder("");
  }

  private async pruneUnder(rel: string): Promise<void> {
    const dir = rel ? join(this.root, ...rel.split("/")) : this.root;
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        await this.pruneUnder(r);
        // a folder this write left empty goes too (Harbor's readers take a folder's presence as an output)
        if (![...this.written].some((w) => w.startsWith(`${r}/`))) await rm(join(dir, e.name), { recursive: true, force: true });
      } else if (!this.written.has(r)) {
        await unlink(join(dir, e.name)).catch(() => {});
      }
    }
  }
}

/**
 * A `.tar.gz` sink: ustar entries (engine/driver/tar.ts) through gzip into a temp file beside `file`, renamed into
 * place at close; folders get their own entries before their first file. `wx`: an existing temp is never reused.
 */
export class TarGzSink implements TreeSink {
  private gz: Gzip;
  private out: WriteStream;
  private tmp: string;
  private dirs = new Set<string>();
  private done: Promise<void>;
  private mtime = Math.floor(Date.now() / 1000);

  constructor(readonly path: string) {
    this.tmp = join(dirname(path), `.${posix.basename(path)}.tmp-${randomBytes(6).toString("hex")}`);
    this.gz = createGzip();
    this.out = createWriteStream(this.tmp, { flags: "wx", mode: 0o644 });
    this.done = new Promise((resolve, reject) => {
      this.out.on("close", resolve);
      this.out.on("error", reject);
      this.gz.on("error", reject);
    });
    this.done.catch(() => {});
    this.gz.pipe(this.out);
  }

  private async write(blocks: Buffer[]): Promise<void> {
    for (const b of blocks) {
      if (!this.gz.write(b)) await new Promise((r) => this.gz.once("drain", r));
    }
  }

  async file(rel: string, data: Uint8Array, mode = 0o644): Promise<void> {
    const parts = checkRel(rel);
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join("/");
      if (this.dirs.has(d)) continue;
      this.dirs.add(d);
      await this.write(entryBlocks({ name: d, type: "dir", mode: 0o755, mtime: this.mtime }));
    }
    await this.write(entryBlocks({ name: parts.join("/"), type: "file", mode: mode & 0o777, data, mtime: this.mtime }));
  }

  async close(): Promise<void> {
    this.gz.end(endBlocks());
    await this.done;
    await rename(this.tmp, this.path);
  }

  /** Drops the unfinished archive (a failed download leaves no half file). */
  async abort(): Promise<void> {
    this.gz.destroy();
    this.out.destroy();
    await rm(this.tmp, { force: true });
  }
}
