/**
 * The content digest of a task directory: the task's identity in the store. Two directories with the same files
 * (same relative paths, bytes and executable bits) have the same digest on any machine, whatever their mtimes,
 * owners, creation order or location; any other difference changes it.
 *
 * Algorithm (v1; also in docs/store.md):
 *   1. Walk the directory. Skip every directory named `.git` and every file named `.DS_Store`, at any depth.
 *      Empty directories contribute nothing. A symbolic link, socket, FIFO or device anywhere in the tree is
 *      refused (EvolveError `task_symlink` / `task_special_file`): a link can point outside the task, so the
 *      stored copy would not be self-contained. `task validate` reports the same entries under the same codes
 *      ({@link taskTreeProblems}), so validate, publish and run agree on what a task may hold.
 *   2. Name each regular file by its path relative to the task root with `/` separators, encoded as UTF-8, and
 *      sort these byte-wise (not locale-wise).
 *   3. For each file in that order feed SHA-256 with: path, 0x00, `x` if any execute bit (0o111) is set else `-`,
 *      0x00, the size in bytes as decimal ASCII, 0x00, then the file's bytes.
 *   4. The digest is `sha256:` followed by the lowercase hex of the hash.
 * The size delimits the bytes and paths cannot contain NUL, so the encoding is unambiguous.
 */
import { createHash, type Hash } from "node:crypto";
import { createReadStream, type Dirent } from "node:fs";
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
    throw new EvolveError("task_unreadable", `cannot read task directory ${dir}: ${firstLine(e)}`, "check the path");
  }
  const out: TaskFile[] = [];
  await collect(dir, out);
  return out.sort((a, b) => Buffer.compare(Buffer.from(a.path, "utf8"), Buffer.from(b.path, "utf8")));
}

/** An entry of a task tree that a stored task cannot hold, under the code publish refuses it with. */
export interface TreeProblem {
  code: "task_symlink" | "task_special_file";
  /** Relative POSIX path of the entry. */
  path: string;
  /** What is wrong with it, e.g. "is a symbolic link; …"; callers put the path (and the task's location) first. */
  what: string;
  hint: string;
}

/** The rule itself: a link or a special file (FIFO, socket, device) is refused; plain files and folders are not. */
function problemOf(ent: Dirent, path: string): TreeProblem | undefined {
  if (ent.isSymbolicLink()) {
    return { code: "task_symlink", path, what: "is a symbolic link; tasks are stored as plain files", hint: "replace the link with a copy of what it points to" };
  }
  if (!ent.isDirectory() && !ent.isFile()) {
    return { code: "task_special_file", path, what: "is not a regular file or folder", hint: "remove it from the task" };
  }
  return undefined;
}

/**
 * Walks a task tree in the digest's order of discovery, skipping `.git` folders and `.DS_Store` files. Calls
 * `file` for each regular file and `problem` for each refused entry; `problem` returns false to stop the walk.
 * `unreadable` decides what a folder that cannot be listed does (throw, or be skipped).
 */
async function walk(
  root: string,
  rel: string,
  v: { file: (path: string, full: string) => Promise<void> | void; problem: (p: TreeProblem) => boolean; unreadable: (abs: string, e: unknown) => void },
): Promise<boolean> {
  const abs = rel ? join(root, rel) : root;
  let entries;
  try {
    entries = await readdir(abs, { withFileTypes: true });
  } catch (e) {
    v.unreadable(abs, e);
    return true;
  }
  for (const ent of entries) {
    const path = rel ? `${rel}/${ent.name}` : ent.name;
    const problem = problemOf(ent, path);
    if (problem) {
      if (!v.problem(problem)) return false;
    } else if (ent.isDirectory()) {
      if (!SKIP_DIRS.has(ent.name) && !(await walk(root, path, v))) return false;
    } else if (!SKIP_FILES.has(ent.name)) {
      await v.file(path, join(root, path));
    }
  }
  return true;
}

async function collect(root: string, out: TaskFile[]): Promise<void> {
  await walk(root, "", {
    file: async (path, full) => {
      const st = await lstat(full);
      out.push({ path, abs: full, size: st.size, executable: (st.mode & 0o111) !== 0 });
    },
    problem: (p) => {
      throw new EvolveError(p.code, `${p.path} in ${root} ${p.what}`, p.hint);
    },
    unreadable: (abs, e) => {
      throw new EvolveError("task_unreadable", `cannot read ${abs}: ${firstLine(e)}`, "check the folder's permissions");
    },
  });
}

/**
 * The entries of a task tree that publish and run would refuse (links, FIFOs, sockets, devices), at most `max`
 * of them, in walk order. Never throws: a folder it cannot list is skipped (publish reports that itself).
 */
export async function taskTreeProblems(dir: string, max = 20): Promise<TreeProblem[]> {
  const out: TreeProblem[] = [];
  await walk(dir, "", {
    file: () => undefined,
    problem: (p) => (out.push(p), out.length < max),
    unreadable: () => undefined,
  });
  return out;
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
    throw new EvolveError("task_changed", `${f.abs} changed while it was being read`, "retry once nothing is writing to the task");
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
