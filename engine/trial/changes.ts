/**
 * The kept tree: what a trial's run created or modified in its box, copied out at the end of the trial (persist
 * phase, before the box is removed) so `evolve trial files` can serve the run's file system after the box is gone
 * and `evolve trial regrade` can rebuild the box the verifier saw.
 *
 * Layout in the trial folder: `fs/<absolute path>` holds each kept regular file; `fs-changes.json` is the manifest
 * (every added, modified or deleted path with its type, size, sha256, mode and owner; symlinks with their target,
 * never as links on disk, so nothing read from the kept tree can lead outside it). Files the image already had and
 * the run never touched are not copied: the image holds them.
 *
 * Left out by design (`excluded`): the trial's own mounts (/logs), kernel file systems, scratch space (/tmp, /run),
 * what evolve itself copied in (/tests, /solution), engine-managed files (/etc/hosts …) and caches. Left out because
 * they could not be carried (`skipped`, with the reason): anything past the byte cap, special files.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join, posix } from "node:path";
import { endBlocks, entryBlocks } from "../driver/tar.ts";
import type { Engine } from "../driver/types.ts";
import { boxArchive, boxChanges, type BoxChange } from "./inspect.ts";
import { writeJson } from "./result.ts";
import type { TarHeader } from "../driver/untar.ts";

/** Bytes of file content kept per trial. */
export const KEPT_CAP_BYTES = 64 * 1024 * 1024;

/** The manifest's file name in the trial folder, and the kept tree's folder. */
export const MANIFEST_FILE = "fs-changes.json";
export const KEPT_DIR = "fs";

const FETCH_CONCURRENCY = 6;

/** One changed path. `type` and below are absent for deleted paths. */
export interface KeptEntry {
  path: string;
  kind: BoxChange["kind"];
  type?: TarHeader["type"];
  size?: number;
  sha256?: string;
  /** Permission bits in octal, e.g. "0644". */
  mode?: string;
  uid?: number;
  gid?: number;
  /** Symlink or hardlink target. */
  target?: string;
}

/** A changed path that is not in the kept tree, and why. */
export interface LeftOut {
  path: string;
  kind: BoxChange["kind"];
  reason: string;
}

/** `fs-changes.json`. */
export interface KeptManifest {
  version: 1;
  captured_at: string;
  cap_bytes: number;
  kept_bytes: number;
  files: KeptEntry[];
  excluded: LeftOut[];
  skipped: LeftOut[];
}

const EXCLUDED: [RegExp, string][] = [
  [/^\/logs(\/|$)/, "the trial's own log folders (kept as agent/, verifier/, artifacts/)"],
  [/^\/(proc|sys|dev)(\/|$)/, "kernel file system"],
  [/^\/(tmp|run|var\/tmp|var\/run)(\/|$)/, "scratch space"],
  [/^\/(tests|solution)(\/|$)/, "copied in by evolve from the task"],
  [/^\/etc\/(hosts|hostname|resolv\.conf)$/, "managed by the engine"],
  [/^\/var\/(cache|lib\/apt\/lists)(\/|$)/, "package-manager cache"],
  [/(^|\/)(\.cache|__pycache__|\.npm|\.pytest_cache)(\/|$)/, "cache"],
];

/** Why a path is left out by design, or undefined when it is kept. */
export function exclusion(path: string): string | undefined {
  for (const [re, why] of EXCLUDED) if (re.test(path)) return why;
  return undefined;
}

const under = (path: string, dir: string) => dir === "/" || path === dir || path.startsWith(`${dir}/`);
const octalMode = (m: number) => (m & 0o7777).toString(8).padStart(4, "0");

/**
 * Copies what the run changed out of box `id` into `<trialPath>/fs/` and writes the manifest. Never throws: a
 * capture that fails is logged and leaves no manifest (the trial itself is not failed for it).
 */
export async function keepChangedFiles(engine: Engine, id: string, trialPath: string, log: (line: string) => void, capBytes = KEPT_CAP_BYTES): Promise<KeptManifest | undefined> {
  try {
    const m = await captureChanges(engine, id, trialPath, capBytes);
    const note = m.skipped.length ? `, ${m.skipped.length} skipped` : "";
    log(`kept ${m.files.filter((f) => f.type === "file").length} changed file(s), ${m.kept_bytes} bytes, in ${KEPT_DIR}/${note}`);
    return m;
  } catch (e) {
    log(`could not keep the run's changed files: ${(e as Error).message.split("\n")[0]}`);
    return undefined;
  }
}

async function captureChanges(engine: Engine, id: string, trialPath: string, capBytes: number): Promise<KeptManifest> {
  const changes = await boxChanges(engine, id);
  const root = join(trialPath, KEPT_DIR);
  const manifest: KeptManifest = { version: 1, captured_at: new Date().toISOString(), cap_bytes: capBytes, kept_bytes: 0, files: [], excluded: [], skipped: [] };
  const kindOf = new Map(changes.map((c) => [c.path, c.kind]));
  const excludedRoots: string[] = [];
  const wanted: BoxChange[] = [];
  for (const c of changes) {
    const why = exclusion(c.path);
    if (why) {
      // list only the top of an excluded subtree: /tmp once, not each file under it
      if (!excludedRoots.some((r) => under(c.path, r))) {
        excludedRoots.push(c.path);
        manifest.excluded.push({ path: c.path, kind: c.kind, reason: why });
      }
      continue;
    }
    if (c.kind === "deleted") {
      manifest.files.push({ path: c.path, kind: "deleted" });
      continue;
    }
    wanted.push(c);
  }
  // An added folder is new as a whole: one archive call brings its subtree. A modified path is fetched on its own
  // (a modified folder only as its own entry: its changed children are listed separately).
  const hasChangedChild = (p: string) => changes.some((c) => c.path !== p && under(c.path, p));
  const fetches: { path: string; subtree: boolean }[] = [];
  const coveredBy: string[] = [];
  for (const c of wanted) {
    if (coveredBy.some((r) => under(c.path, r))) continue;
    if (c.kind === "modified" && c.path === "/etc" && !hasChangedChild(c.path)) {
      // the engine's own mount points (/etc/hosts, /etc/resolv.conf) mark /etc modified with nothing in it changed
      continue;
    }
    if (c.kind === "modified" && hasChangedChild(c.path)) {
      // a folder whose listing changed: the image has it, its changed children are fetched on their own
      manifest.files.push({ path: c.path, kind: "modified", type: "dir" });
      continue;
    }
    const subtree = c.kind === "added" && hasChangedChild(c.path);
    if (subtree) coveredBy.push(c.path);
    fetches.push({ path: c.path, subtree });
  }
  let budgetHit = false;
  // each archive call costs a round of the engine's mount machinery (~0.2 s on podman): a few run at once
  let next = 0;
  const worker = async () => {
    while (next < fetches.length && !budgetHit) await fetchOne(fetches[next++]);
  };
  const fetchOne = async (f: { path: string; subtree: boolean }) => {
    if (!f.subtree) {
      // A folder changed only in itself (its listing or mode, e.g. /app after a file was removed): the engine's
      // stat says so without an archive, which costs a round of the mount machinery (~0.2 s on podman).
      const st = await engine.pathStat(id, f.path);
      if (st?.isDir) {
        manifest.files.push({ path: f.path, kind: kindOf.get(f.path) ?? "modified", type: "dir", mode: octalMode(st.mode & 0o777) });
        return;
      }
    }
    const parent = posix.dirname(f.path);
    let cur: { entry: KeptEntry; parts: Buffer[]; keep: boolean } | undefined;
    const stop = new AbortController();
    const pending: Promise<void>[] = [];
    await boxArchive(
      engine,
      id,
      f.path,
      {
        entry: (h) => {
          const path = posix.join(parent, h.name);
          cur = undefined;
          // a modified folder with no listed children (chmod): its own entry is enough, not its whole content
          if (!f.subtree && path !== f.path) return stop.abort();
          const why = exclusion(path);
          if (why) return;
          if (budgetHit) return stop.abort();
          const kind = kindOf.get(path) ?? "added";
          const entry: KeptEntry = { path, kind, type: h.type, mode: octalMode(h.mode), uid: h.uid, gid: h.gid };
          if (h.type === "symlink" || h.type === "hardlink") entry.target = h.linkname;
          if (h.type === "other") {
            manifest.skipped.push({ path, kind, reason: "special file (device, fifo or socket)" });
            return;
          }
          if (h.type === "file") {
            entry.size = h.size;
            if (manifest.kept_bytes + h.size > capBytes) {
              manifest.skipped.push({ path, kind, reason: `over the ${capBytes}-byte cap of the kept tree` });
              budgetHit = true;
              return stop.abort();
            }
            manifest.kept_bytes += h.size;
            cur = { entry, parts: [], keep: true };
          }
          manifest.files.push(entry);
        },
        data: (c) => {
          if (cur?.keep) cur.parts.push(Buffer.from(c));
        },
        end: (h) => {
          if (!cur || h.type !== "file") return;
          const { entry, parts } = cur;
          cur = undefined;
          const data = Buffer.concat(parts);
          entry.sha256 = createHash("sha256").update(data).digest("hex");
          const dest = join(root, entry.path);
          pending.push(mkdir(posix.dirname(dest), { recursive: true }).then(() => writeFile(dest, data)));
        },
      },
      stop.signal,
    );
    await Promise.all(pending);
  };
  const [owners] = await Promise.all([
    ownersOf(engine, id, wanted.map((c) => c.path)),
    ...Array.from({ length: Math.min(FETCH_CONCURRENCY, fetches.length) }, worker),
  ]);
  for (const e of manifest.files) {
    const o = owners.get(e.path);
    if (o) [e.uid, e.gid] = o;
  }
  if (budgetHit) {
    const recorded = new Set([...manifest.files, ...manifest.skipped].map((e) => e.path));
    for (const c of wanted) {
      if (!recorded.has(c.path) && !manifest.skipped.some((s) => under(c.path, s.path))) {
        manifest.skipped.push({ path: c.path, kind: c.kind, reason: `over the ${capBytes}-byte cap of the kept tree` });
      }
    }
  }
  manifest.files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  await writeJson(join(trialPath, MANIFEST_FILE), manifest);
  return manifest;
}

/**
 * Owners of `paths` in the box, from one `stat` exec per thousand paths. The archive cannot say: podman's archive
 * GET rewrites every owner to the caller. Paths stat cannot read (or a box without sh/stat) keep the archive's
 * owner.
 */
async function ownersOf(engine: Engine, id: string, paths: string[]): Promise<Map<string, [number, number]>> {
  const out = new Map<string, [number, number]>();
  for (let i = 0; i < paths.length; i += 1000) {
    const r = await engine
      .exec(id, ["sh", "-c", 'stat -c "%u:%g|%n" -- "$@" 2>/dev/null; exit 0', "sh", ...paths.slice(i, i + 1000)], { user: "root", timeoutMs: 30_000 })
      .catch(() => undefined);
    for (const line of r?.stdout.split("\n") ?? []) {
      const m = /^(\d+):(\d+)\|(.*)$/.exec(line);
      if (m) out.set(m[3], [Number(m[1]), Number(m[2])]);
    }
  }
  return out;
}

/** The kept tree's manifest of a trial, or undefined when the trial kept none (it never booted, or it was cancelled). */
export async function readManifest(trialPath: string): Promise<KeptManifest | undefined> {
  try {
    return JSON.parse(await readFile(join(trialPath, MANIFEST_FILE), "utf8")) as KeptManifest;
  } catch {
    return undefined;
  }
}

/** Where a kept file lies on the host. `path` must already be a normalized box path (inspect.ts boxPath). */
export function keptFile(trialPath: string, path: string): string {
  return join(trialPath, KEPT_DIR, path);
}

/** Immediate children of `dir` in the kept tree: kept entries, and folders implied by deeper ones. */
export function keptChildren(m: KeptManifest, dir: string): KeptEntry[] {
  const byName = new Map<string, KeptEntry>();
  for (const e of m.files) {
    if (e.path === dir || !(dir === "/" ? e.path.startsWith("/") : e.path.startsWith(`${dir}/`))) continue;
    const rest = e.path.slice(dir === "/" ? 1 : dir.length + 1);
    const name = rest.split("/")[0];
    if (rest === name) byName.set(name, e);
    else if (!byName.has(name)) byName.set(name, { path: posix.join(dir, name), kind: "modified", type: "dir" });
  }
  return [...byName.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
}

/** The kept tree under `p` as tar blocks, named from p's basename as the engines name an archive GET. */
export async function* keptTar(dir: string, m: KeptManifest, p: string): AsyncGenerator<Buffer> {
  const base = p === "/" ? "" : posix.basename(p);
  const nameOf = (path: string) => (p === "/" ? path.slice(1) : base + path.slice(p.length));
  const within = (path: string) => p === "/" || path === p || path.startsWith(`${p}/`);
  const emittedDirs = new Set<string>();
  const dirEntry = function* (name: string, mode: number) {
    if (!name || emittedDirs.has(name)) return;
    emittedDirs.add(name);
    yield* entryBlocks({ name, type: "dir", mode });
  };
  for (const e of m.files) {
    if (!within(e.path) || e.kind === "deleted") continue;
    const name = nameOf(e.path);
    // parents first, so an extractor meets each folder before its files
    const parts = name.split("/");
    for (let i = 1; i < parts.length; i++) yield* dirEntry(parts.slice(0, i).join("/"), 0o755);
    const mode = parseInt(e.mode ?? "0755", 8);
    if (e.type === "dir") yield* dirEntry(name, mode);
    else if (e.type === "symlink") yield* entryBlocks({ name, type: "symlink", mode: 0o777, linkname: e.target ?? "" });
    else if (e.type === "file") yield* entryBlocks({ name, type: "file", mode, data: await readFile(keptFile(dir, e.path)) });
  }
  yield endBlocks();
}
