/**
 * The content digest of a task directory: the task's identity in the store. Two directories with the same files
 * (same relative paths, bytes and executable bits) have the same digest on any machine, whatever their mtimes,
 * owners, creation order or location; any other difference changes it.
 *
 * Algorithm (v1; also in docs/store.md):
 *   1. Walk the directory. Skip every directory named `.git` and every file named `.DS_Store`, at any depth.
 *      Empty directories contribute nothing. A symbolic link, socket, FIFO or device anywhere in the tree is
 *      refused (EvolveError `task_symlink` / `task_special_file`): a link can point outside the task, so the
 *      stored copy would not be self-contained.
 *   2. Name each regular file by its path relative to the task root with `/` separators, encoded as UTF-8, and
 *      sort these byte-wise (not locale-wise).
 *   3. For each file in that order feed SHA-256 with: path, 0x00, `x` if any execute bit (0o111) is set else `-`,
 *      0x00, the size in bytes as decimal ASCII, 0x00, then the file's bytes.
 *   4. The digest is `sha256:` followed by the lowercase hex of the hash.
 * The size delimits the bytes and paths cannot contain NUL, so the encoding is unambiguous.
 */
import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { EvolveError, firstLine } from "../errors.ts";

/** One file of a task tree, as the digest sees it. */
export interface TaskFile {
  /** Relative POSIX path, e.g. `environment/Dockerfile`. */
  path: string;
  /** Absolute (or caller-relative) path on this machine. */
  abs: string;
  size: number;
  executable: boolean;
}

const SKIP_DIRS = new Set([".git"]);
const SKIP_FILES = new Set([".DS_Store"]);

/**
 * The files the digest covers, in digest order. Publishing copies exactly these, so the stored tree and its
 * digest always agree.
 */
export async function listTaskFiles(dir: string): Promise<TaskFile[]> {
  try {
    if (!(await stat(dir)).isDirectory()) throw new Error("not a directory");
  } catch (e) {
    throw new EvolveError("task_unreadable", `cannot read task directory ${dir}: ${firstLine(e)}`, "check the path", 2);
  }
  const out: TaskFile[] = [];
  await walk(dir, "", out);
  return out.sort((a, b) => Buffer.compare(Buffer.from(a.path, "utf8"), Buffer.from(b.path, "utf8")));
}

async function walk(root: string, rel: string, out: TaskFile[]): Promise<void> {
  const abs = rel ? join(root, rel) : root;
  let entries;
  try {
    entries = await readdir(abs, { withFileTypes: true });
  } catch (e) {
    throw new EvolveError("task_unreadable", `cannot read ${abs}: ${firstLine(e)}`, "check the folder's permissions", 2);
  }
  for (const ent of entries) {
    const path = rel ? `${rel}/${ent.name}` : ent.name;
    const full = join(root, path);
    if (ent.isSymbolicLink()) {
      throw new EvolveError(
        "task_symlink",
        `${path} in ${root} is a symbolic link; tasks are stored as plain files`,
        "replace the link with a copy of what it points to",
        1,
      );
    }
    if (ent.isDirectory()) {
      if (!SKIP_DIRS.has(ent.name)) await walk(root, path, out);
    } else if (ent.isFile()) {
      if (SKIP_FILES.has(ent.name)) continue;
      const st = await lstat(full);
      out.push({ path, abs: full, size: st.size, executable: (st.mode & 0o111) !== 0 });
    } else {
      throw new EvolveError("task_special_file", `${path} in ${root} is not a regular file or folder`, "remove it from the task", 1);
    }
  }
}

/** Feeds one file's record (see the module comment) into `hash`; refuses a file that changed size meanwhile. */
async function hashFile(hash: Hash, f: TaskFile): Promise<void> {
  hash.update(`${f.path}\0${f.executable ? "x" : "-"}\0${f.size}\0`, "utf8");
  let n = 0;
  for await (const chunk of createReadStream(f.abs)) {
    n += (chunk as Buffer).length;
    hash.update(chunk as Buffer);
  }
  if (n !== f.size) {
    throw new EvolveError("task_changed", `${f.abs} changed while it was being read`, "retry once nothing is writing to the task", 2);
  }
}

/** The digest of the files listed by {@link listTaskFiles} (already sorted). */
export async function digestFiles(files: readonly TaskFile[]): Promise<string> {
  const hash = createHash("sha256");
  for (const f of files) await hashFile(hash, f);
  return `sha256:${hash.digest("hex")}`;
}

/** `sha256:<hex>` over a task directory's files; see the module comment for the exact algorithm. */
export async function taskDigest(dir: string): Promise<string> {
  return digestFiles(await listTaskFiles(dir));
}
