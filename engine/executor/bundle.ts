/**
 * A folder as one JSON document (relative path, mode, base64 content; links kept as links), so a task folder can
 * travel coordinator → worker and a trial tree worker → coordinator over the coordinator's API without a shared
 * filesystem. Paths are checked on the way in: an entry may not climb out of the folder it is unpacked into.
 */
import { lstat, mkdir, readdir, readFile, readlink, symlink, writeFile, chmod } from "node:fs/promises";
import { dirname, join, normalize, isAbsolute } from "node:path";
import { EvolveError } from "../errors.ts";

/** One entry of a bundled folder. */
export type BundleEntry =
  | { path: string; kind: "dir"; mode: number }
  | { path: string; kind: "file"; mode: number; data: string }
  | { path: string; kind: "link"; target: string };

/** Every entry under `dir`, parents before children. */
export async function packDir(dir: string): Promise<BundleEntry[]> {
  const out: BundleEntry[] = [];
  const walk = async (rel: string) => {
    for (const e of await readdir(join(dir, rel), { withFileTypes: true })) {
      const p = rel === "" ? e.name : `${rel}/${e.name}`;
      const abs = join(dir, p);
      const st = await lstat(abs);
      if (st.isSymbolicLink()) out.push({ path: p, kind: "link", target: await readlink(abs) });
      else if (st.isDirectory()) {
        out.push({ path: p, kind: "dir", mode: st.mode & 0o7777 });
        await walk(p);
      } else if (st.isFile()) out.push({ path: p, kind: "file", mode: st.mode & 0o7777, data: (await readFile(abs)).toString("base64") });
    }
  };
  await walk("");
  return out;
}

/** Writes `entries` under `dir` (made if missing); refuses an entry whose path leaves `dir`. */
export async function unpackDir(dir: string, entries: readonly BundleEntry[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const e of entries) {
    const rel = normalize(e.path);
    if (isAbsolute(rel) || rel === ".." || rel.startsWith("../")) throw new EvolveError("bundle_invalid", `a bundled path leaves its folder: ${e.path}`, "the sender is not an evolve worker or coordinator of this version");
    const abs = join(dir, rel);
    if (e.kind === "dir") {
      await mkdir(abs, { recursive: true });
      await chmod(abs, e.mode | 0o700);
    } else if (e.kind === "file") {
      await mkdir(dirname(abs), { recursive: true });
      await writeFile(abs, Buffer.from(e.data, "base64"), { mode: e.mode });
      await chmod(abs, e.mode);
    } else {
      await mkdir(dirname(abs), { recursive: true });
      await symlink(e.target, abs);
    }
  }
}
