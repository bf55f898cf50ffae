/**
 * The digest of a stored candidate: what the evolver checks before it hands a candidate back, since the proposer's
 * sandbox can write the state folder. It covers every file's relative path, executable bit and content, so a changed
 * byte, an added or removed file or a chmod +x all change it; a link or special file anywhere makes the tree no
 * candidate at all (a link would make the evaluated files something other than the stored ones).
 */
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { EvolveError } from "../errors.ts";
import { kindOf, lstatOrNone, newBudget, readPlainFile } from "./tree.ts";

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
  const files: string[] = [];
  const walk = (abs: string, rel: string) => {
    for (const name of readdirSync(abs)) {
      const p = join(abs, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatOrNone(p);
      if (!st) continue;
      if (st.isDirectory()) walk(p, r);
      else if (st.isFile()) files.push(r);
      else throw notATree(p, kindOf(st));
    }
  };
  walk(dir, "");
  // sorted by code unit so the digest does not depend on readdir's order or the locale
  files.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
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
