/**
 * The candidate store both search strategies keep their candidates in (issue 21 §3): a candidate is a tree of plain
 * files stored under an id. The evolver (engine/evolve) stores a change as `files/` laid over its parent's harness;
 * Meta-Harness (engine/metaharness) stores whole adapters its proposer wrote. What they share is decided here, once:
 *
 * - **ids**: an id is one path segment ({@link idPattern}), so no id can climb out of the folder that holds the
 *   candidates; each strategy picks its alphabet's case and length (its spec's).
 * - **overlays**: a candidate's tree is built fresh from layers laid one over the other ({@link layTrees}), every
 *   layer charged to one copy budget, never following a link.
 * - **digests**: a stored tree's digest ({@link digestTree}) over every file's path, executable bit and content, so a
 *   changed byte, an added or removed file or a chmod +x all change it; a link or special file anywhere makes the tree
 *   no candidate at all (a link would make the evaluated files something other than the stored ones). Meta-Harness
 *   checks it before it hands a candidate back, since the proposer's sandbox can write the state folder.
 */
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { EvolveError } from "../errors.ts";
import { copyTreeOver, kindOf, listTree, lstatOrNone, newBudget, readPlainFile, type CopyBudget } from "./tree.ts";

/** How a strategy spells its ids: lower case only or both cases, and the longest id. */
export interface IdRule {
  lowercase: boolean;
  max: number;
}

/**
 * The pattern of an id under `rule`: a letter or digit, then letters, digits, `.`, `_` or `-`, `rule.max` at most.
 * It starts with a letter or digit, so `.` and `..` are never ids, and holds no `/`, so an id is one path segment.
 */
export function idPattern(rule: IdRule): RegExp {
  const alnum = rule.lowercase ? "a-z0-9" : "A-Za-z0-9";
  return new RegExp(`^[${alnum}][${alnum}._-]{0,${rule.max - 1}}$`);
}

/** One layer of an overlay: the tree at `from` laid over the overlay (at its root, or at the folder `at` in it). */
export interface Layer {
  from: string;
  /** Top-level entries of `from` left out. */
  skip?: readonly string[];
  /** Paths (relative to the overlay's root, checked by the caller) removed before this layer is laid. */
  remove?: readonly string[];
  /** Where in the overlay the layer goes (relative to its root); the root when absent. */
  at?: string;
}

/**
 * Lays `layers` over `dest` in order, file by file (folders merge, a file replaces what is at its path), one
 * `budget` for them all, never following a link: a link or special file → agent_dir_unsafe, too much →
 * agent_dir_too_large. A missing `from` lays nothing. `dest` is made when missing; what is already there stays
 * unless a layer replaces or removes it, so a caller wanting a fresh tree removes it first.
 */
export function layTrees(dest: string, layers: readonly Layer[], budget: CopyBudget = newBudget()): void {
  for (const layer of layers) {
    for (const rel of layer.remove ?? []) rmSync(join(dest, rel), { recursive: true, force: true });
    copyTreeOver(layer.from, layer.at === undefined ? dest : join(dest, layer.at), budget, layer.skip);
  }
}

/** The tree can no longer be digested as a candidate (a link or special file in it, or it is gone). */
function notATree(path: string, what: string): EvolveError {
  return new EvolveError("metaharness_candidate_tampered", `${path} is ${what}`, "a stored candidate holds only plain files; it is never handed back");
}

/**
 * `sha256:<hex>` over the sorted (relative path, exec bit, content) of every file under `dir`, never following a link.
 * Folders count only through the files in them. A link or special file anywhere, the folder itself included, or a
 * missing folder → metaharness_candidate_tampered naming it.
 */
export function digestTree(dir: string): string {
  // `link/` would have lstat follow the link
  dir = dir.replace(/(.)\/+$/, "$1");
  const top = lstatOrNone(dir);
  if (!top) throw notATree(dir, "missing");
  if (!top.isDirectory()) throw notATree(dir, top.isFile() ? "a file, not a folder" : kindOf(top));
  // sorted by code unit over whole paths (not folder by folder: `a-c` sorts before `a/b`), so the digest does not
  // depend on readdir's order or the locale
  const files = [...listTree(dir, [], notATree).files.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const h = createHash("sha256");
  const budget = newBudget();
  for (const rel of files) {
    let got: { data: Buffer; mode: number };
    try {
      got = readPlainFile(join(dir, rel), budget);
    } catch (e) {
      // swapped for a link or FIFO between the walk and the read
      if (e instanceof EvolveError && e.code === "agent_dir_unsafe") throw notATree(join(dir, rel), "not a plain file");
      throw e;
    }
    const name = Buffer.from(rel, "utf8");
    const head = Buffer.alloc(13);
    head.writeUInt32BE(name.length, 0);
    head.writeUInt8(got.mode & 0o111 ? 1 : 0, 4);
    head.writeBigUInt64BE(BigInt(got.data.length), 5);
    h.update(head).update(name).update(got.data);
  }
  return `sha256:${h.digest("hex")}`;
}

/** The digest of `dir`, or why there is none (the tamper reason: a link, a special file, a missing folder). */
export function digestOrReason(dir: string): { digest: string } | { reason: string } {
  try {
    return { digest: digestTree(dir) };
  } catch (e) {
    if (e instanceof EvolveError) return { reason: e.message };
    throw e;
  }
}
