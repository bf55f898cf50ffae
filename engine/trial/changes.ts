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
 * they could not be carried (`skipped`, with the reason): a file past the byte cap (alone: the rest is still kept),
 * files past the file cap, paths too long to copy to the host, special files, what the box would not give up. A
 * skipped path never costs the capture of the others. Kept files are written through descriptors that follow no
 * link, and read back the same way (`readKeptFile`).
 */
import { BOX_ROOT, TRIAL } from "../box/layout.ts";
import { BoxFileRefused, openBoxFile, readRange } from "../box/fs.ts";
import { createHash, type Hash } from "node:crypto";
import { constants, createWriteStream } from "node:fs";
import { mkdir, open, readFile, rm } from "node:fs/promises";
import { once } from "node:events";
import { join, posix } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { endBlocks, entryBlocks } from "../driver/tar.ts";
import type { Engine } from "../driver/types.ts";
import { TarReader, type TarHeader } from "../driver/untar.ts";
import { EvolveError } from "../errors.ts";
import { boxChanges, type BoxChange } from "./inspect.ts";
import { writeJson } from "./result.ts";
import { formatDuration } from "../duration.ts";

/** Bytes of file content kept per trial. */
export const KEPT_CAP_BYTES = 64 * 1024 * 1024;
/** Regular files kept per trial: each costs a manifest entry and an inode in the trial folder. */
export const KEPT_CAP_FILES = 20_000;
/** The longest box path kept: its copy's host path (trial folder + fs/ + path) must stay well under PATH_MAX. */
export const KEPT_MAX_PATH_BYTES = 2048;
/** How long one capture may take; what it has not fetched by then is recorded as skipped. */
export const KEPT_CAPTURE_MS = 5 * 60_000;
/**
 * A file past the byte cap inside a new folder's archive is read past (dropped) up to this size; a bigger one stops
 * that archive, and the folder is fetched again in parts around it. Reading past is cheap (~1 GB/s), a part is not
 * (~0.1 s per archive call on podman).
 */
export const KEPT_READ_PAST_BYTES = 256 * 1024 * 1024;

/** The kept tree's limits (`keepChangedFiles` takes any subset; the rest are the defaults above). */
export interface KeptCaps {
  bytes: number;
  files: number;
  pathBytes: number;
  timeMs: number;
  readPastBytes: number;
}

/** The manifest's file name in the trial folder, and the kept tree's folder. */
export const MANIFEST_FILE = TRIAL.keptManifest;
export const KEPT_DIR = TRIAL.kept;

const FETCH_CONCURRENCY = 6;
const PATH_MAX = 4096;

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

/** `fs-changes.json`. Fields marked optional are absent in manifests written before they existed. */
export interface KeptManifest {
  version: 1;
  captured_at: string;
  cap_bytes: number;
  cap_files?: number;
  max_path_bytes?: number;
  /**
   * Where the list of changed paths came from: the engine's changes API, or, when the engine could not list them
   * (`changes_note` says why), the box's own `find` of what changed since it started: added and modified are then not
   * told apart (all are "modified") and deletions are not listed.
   */
  changes_from?: "engine" | "box";
  changes_note?: string;
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
const firstLine = (e: unknown, max = 300) => {
  const line = String((e as Error)?.message ?? e).split("\n")[0];
  // both ends: an engine's message often names a long path first and says what went wrong last
  return line.length > max ? `${line.slice(0, max - 80)}…${line.slice(-80)}` : line;
};
/** A path short enough for a log line. */
const shown = (p: string) => (p.length > 160 ? `${p.slice(0, 80)}…(${Buffer.byteLength(p)} bytes)…${p.slice(-60)}` : p);

/**
 * Copies what the run changed out of box `id` into `<trialPath>/fs/` and writes the manifest. What cannot be kept
 * (past a cap, too long a path, a special file, unreadable) is skipped by name with its reason while the rest is kept;
 * the log line names the first few. `caps` is the byte cap alone (the older call) or any of `KeptCaps`. Never
 * throws: a capture that fails as a whole (the box gone) is logged and leaves no manifest (the trial is not failed
 * for it).
 */
export async function keepChangedFiles(engine: Engine, id: string, trialPath: string, log: (line: string) => void, caps: number | Partial<KeptCaps> = {}): Promise<KeptManifest | undefined> {
  const c: KeptCaps = { bytes: KEPT_CAP_BYTES, files: KEPT_CAP_FILES, pathBytes: KEPT_MAX_PATH_BYTES, timeMs: KEPT_CAPTURE_MS, readPastBytes: KEPT_READ_PAST_BYTES, ...(typeof caps === "number" ? { bytes: caps } : caps) };
  try {
    const m = await captureChanges(engine, id, trialPath, c);
    const note = m.skipped.length ? `, ${m.skipped.length} skipped (listed in ${MANIFEST_FILE})` : "";
    log(`kept ${m.files.filter((f) => f.type === "file").length} changed file(s), ${m.kept_bytes} bytes, in ${KEPT_DIR}/${note}`);
    if (m.changes_note) log(`kept tree: ${m.changes_note}`);
    for (const line of skippedSummary(m.skipped)) log(`not kept: ${line}`);
    return m;
  } catch (e) {
    log(`could not keep the run's changed files: ${firstLine(e)}`);
    return undefined;
  }
}

/**
 * What was skipped, one line per reason (a file's own size aside): a lone path with its reason, else the count with
 * the first few paths, so 80,000 paths past the file cap read as one line.
 */
export function skippedSummary(skipped: LeftOut[]): string[] {
  const byReason = new Map<string, { n: number; some: LeftOut[] }>();
  for (const s of skipped) {
    const key = s.reason.replace(/^\d+ bytes, /, "");
    const g = byReason.get(key) ?? { n: 0, some: [] };
    g.n++;
    if (g.some.length < 3) g.some.push(s);
    byReason.set(key, g);
  }
  return [...byReason].map(([reason, { n, some }]) =>
    n === 1 ? `${shown(some[0].path)}: ${some[0].reason}` : `${n} paths, ${reason} (${some.map((s) => shown(s.path)).join(", ")}${n > some.length ? ", …" : ""})`,
  );
}

// What changed since the box started, found from inside it: ctime cannot be set back by the box (touch sets only
// mtime), so it is the change time that is compared; busybox find lacks -cnewer and falls back to -newer.
const FIND_CHANGED = [
  "ref=/etc/hostname",
  '[ -e "$ref" ] || exit 3',
  'if find "$ref" -maxdepth 0 -cnewer "$ref" >/dev/null 2>&1; then t=-cnewer; else t=-newer; fi',
  'find / -xdev \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o $t "$ref" -print0 2>/dev/null',
  "exit 0",
].join("\n");

/** The changed paths: the engine's list, else (when the engine cannot list them) the box's own. */
async function listChanges(engine: Engine, id: string): Promise<{ changes: BoxChange[]; from: "engine" | "box"; note?: string }> {
  try {
    return { changes: await boxChanges(engine, id), from: "engine" };
  } catch (e) {
    const why = firstLine(e, 200);
    const r = await engine.exec(id, ["sh", "-c", FIND_CHANGED], { user: BOX_ROOT, timeoutMs: 120_000 }).catch(() => undefined);
    if (!r || r.exitCode !== 0) throw new Error(`the engine could not list the changes (${why}) and the box could not either`);
    const paths = [...new Set(r.stdout.split("\0"))].filter((p) => p.startsWith("/") && p !== "/").sort();
    const cut = r.truncated ? "; the list was cut at the exec output limit" : "";
    return {
      changes: paths.map((path) => ({ path, kind: "modified" as const })),
      from: "box",
      note: `the engine could not list the changes (${why}): changed paths were found in the box by change time, added and modified are not told apart and deletions are not listed${cut}`,
    };
  }
}

type Fetch = { path: string; subtree: boolean };

async function captureChanges(engine: Engine, id: string, trialPath: string, caps: KeptCaps): Promise<KeptManifest> {
  const listed = await listChanges(engine, id);
  const changes = listed.changes;
  const root = join(trialPath, KEPT_DIR);
  const manifest: KeptManifest = {
    version: 1,
    captured_at: new Date().toISOString(),
    cap_bytes: caps.bytes,
    cap_files: caps.files,
    max_path_bytes: caps.pathBytes,
    changes_from: listed.from,
    ...(listed.note ? { changes_note: listed.note } : {}),
    kept_bytes: 0,
    files: [],
    excluded: [],
    skipped: [],
  };
  const kindOf = new Map(changes.map((c) => [c.path, c.kind]));
  // every folder with a listed change below it, so "has a changed child" is a lookup rather than a scan of the list
  const parents = new Set<string>();
  for (const c of changes) {
    for (let d = posix.dirname(c.path); !parents.has(d); d = posix.dirname(d)) {
      parents.add(d);
      if (d === "/") break;
    }
  }
  const ancestorIn = (p: string, set: Set<string>) => {
    for (let d = p; ; d = posix.dirname(d)) {
      if (set.has(d)) return true;
      if (d === "/") return false;
    }
  };
  const entries = new Map<string, KeptEntry>();
  const skipped = new Map<string, LeftOut>();
  const excluded = manifest.excluded;
  const skip = (path: string, kind: BoxChange["kind"], reason: string) => {
    if (!skipped.has(path)) skipped.set(path, { path, kind, reason });
  };
  const tooLong = (p: string) => Buffer.byteLength(p) > caps.pathBytes;
  const longReason = `path longer than ${caps.pathBytes} bytes`;
  const excludedRoots = new Set<string>();
  const tooLongRoots = new Set<string>();
  const wanted: BoxChange[] = [];
  for (const c of changes) {
    const why = exclusion(c.path);
    if (why) {
      // list only the top of an excluded subtree: /tmp once, not each file under it
      if (!ancestorIn(c.path, excludedRoots)) {
        excludedRoots.add(c.path);
        excluded.push({ path: c.path, kind: c.kind, reason: why });
      }
      continue;
    }
    if (tooLong(c.path)) {
      // only the top of a subtree whose paths are all too long: everything below it is longer still
      if (!ancestorIn(posix.dirname(c.path), tooLongRoots)) skip(c.path, c.kind, longReason);
      tooLongRoots.add(c.path);
    } else if (c.kind === "deleted") entries.set(c.path, { path: c.path, kind: "deleted" });
    else wanted.push(c);
  }
  const childrenOf = new Map<string, BoxChange[]>();
  for (const c of wanted) {
    const d = posix.dirname(c.path);
    const list = childrenOf.get(d);
    if (list) list.push(c);
    else childrenOf.set(d, [c]);
  }
  // An added folder is new as a whole: one archive call brings its subtree. A modified path is fetched on its own
  // (a modified folder only as its own entry: its changed children are listed separately).
  const queue: Fetch[] = [];
  const coveredBy = new Set<string>();
  for (const c of wanted) {
    if (ancestorIn(c.path, coveredBy)) continue;
    if (c.kind === "modified" && c.path === "/etc" && !parents.has(c.path)) {
      // the engine's own mount points (/etc/hosts, /etc/resolv.conf) mark /etc modified with nothing in it changed
      continue;
    }
    if (c.kind === "modified" && parents.has(c.path)) {
      // a folder whose listing changed: the image has it, its changed children are fetched on their own
      entries.set(c.path, { path: c.path, kind: "modified", type: "dir" });
      continue;
    }
    const subtree = c.kind === "added" && parents.has(c.path);
    if (subtree) coveredBy.add(c.path);
    queue.push({ path: c.path, subtree });
  }

  let filesKept = 0;
  let stopReason: string | undefined;
  const all = new AbortController();
  const stopAll = (why: string) => {
    stopReason ??= why;
    all.abort();
  };
  const timer = setTimeout(() => stopAll(`not reached within the capture's ${formatDuration(caps.timeMs)}`), caps.timeMs);
  const made = new Set<string>();

  /** The parts of folder `dir` fetched one by one, around `avoid` (a file too big to read past) when given. */
  const splitAround = (dir: string, avoid?: string): Fetch[] => {
    const out: Fetch[] = [];
    if (!entries.has(dir) && !skipped.has(dir)) out.push({ path: dir, subtree: false });
    for (const c of childrenOf.get(dir) ?? []) {
      if (c.path === avoid) continue;
      if (avoid && under(avoid, c.path)) {
        out.push(...splitAround(c.path, avoid));
        continue;
      }
      if ((entries.has(c.path) || skipped.has(c.path)) && !parents.has(c.path)) continue;
      out.push({ path: c.path, subtree: parents.has(c.path) });
    }
    return out;
  };

  const fetchOne = async (f: Fetch): Promise<Fetch[]> => {
    if (all.signal.aborted) return [];
    const fkind = kindOf.get(f.path) ?? "modified";
    if (!f.subtree) {
      // A folder changed only in itself (its listing or mode, e.g. /app after a file was removed): the engine's
      // stat says so without an archive, which costs a round of the mount machinery (~0.2 s on podman).
      const st = await engine.pathStat(id, f.path).catch(() => undefined);
      if (st?.isDir) {
        entries.set(f.path, { path: f.path, kind: fkind, type: "dir", mode: octalMode(st.mode & 0o777) });
        return [];
      }
    }
    const parent = posix.dirname(f.path);
    const stop = new AbortController();
    const signal = AbortSignal.any([stop.signal, all.signal]);
    let cur: { entry: KeptEntry; hash: Hash; parts: Buffer[] } | undefined;
    let bigAt: string | undefined;
    let writes = Promise.resolve();
    let writing = 0;
    const drop = (entry: KeptEntry, reason: string) => {
      entries.delete(entry.path);
      manifest.kept_bytes -= entry.size ?? 0;
      filesKept--;
      skip(entry.path, entry.kind, reason);
    };
    const reader = new TarReader({
      entry: (h) => {
        cur = undefined;
        if (signal.aborted) return;
        const path = posix.join(parent, h.name);
        // entries are named from the fetched path's basename; anything else is not the engine's archive of it
        if (!under(path, f.path) || h.name.split("/").includes("..")) return;
        // a modified folder with no listed children (chmod): its own entry is enough, not its whole content
        if (!f.subtree && path !== f.path) return stop.abort();
        // a folder fetched again after its first archive stopped: what that one recorded stands
        if (entries.has(path) || skipped.has(path) || exclusion(path)) return;
        const kind = kindOf.get(path) ?? fkind;
        if (tooLong(path)) {
          if (!ancestorIn(posix.dirname(path), tooLongRoots)) skip(path, kind, longReason);
          tooLongRoots.add(path);
          return;
        }
        if (h.type === "other") return skip(path, kind, "special file (device, fifo or socket)");
        const entry: KeptEntry = { path, kind, type: h.type, mode: octalMode(h.mode), uid: h.uid, gid: h.gid };
        if (h.type === "symlink" || h.type === "hardlink") entry.target = h.linkname;
        if (h.type === "file") {
          entry.size = h.size;
          if (filesKept >= caps.files) return (skip(path, kind, `over the ${caps.files}-file cap of the kept tree`), stopAll(`over the ${caps.files}-file cap of the kept tree`));
          if (manifest.kept_bytes + h.size > caps.bytes) {
            skip(path, kind, `${h.size} bytes, over the ${caps.bytes}-byte cap of the kept tree`);
            if (!f.subtree || h.size > caps.readPastBytes) {
              bigAt = path;
              stop.abort();
            }
            return;
          }
          manifest.kept_bytes += h.size;
          filesKept++;
          cur = { entry, hash: createHash("sha256"), parts: [] };
        }
        entries.set(path, entry);
      },
      data: (chunk) => {
        if (!cur) return;
        cur.hash.update(chunk);
        cur.parts.push(Buffer.from(chunk));
      },
      end: (h) => {
        if (!cur || h.type !== "file") return;
        const { entry, hash, parts } = cur;
        cur = undefined;
        entry.sha256 = hash.digest("hex");
        const data = Buffer.concat(parts);
        writing++;
        writes = writes
          .then(() => writeKept(root, entry.path, data, made))
          .catch((e) => drop(entry, `could not be written to the trial folder: ${(e as NodeJS.ErrnoException).code ?? firstLine(e, 120)}`))
          .then(() => void writing--);
      },
    });
    let failed: unknown;
    let found = true;
    try {
      // the stream waits while kept files are being written, so a folder of many files holds a chunk's worth at most
      found = await engine.archiveGet(id, f.path, (chunk) => (reader.write(chunk), writing > 0 ? writes : undefined), signal);
      if (!signal.aborted) reader.finish();
    } catch (e) {
      failed = e;
    }
    await writes;
    if (cur) drop(cur.entry, stopReason ?? "the box's archive ended inside it");
    if (failed !== undefined && !all.signal.aborted) {
      // a folder the engine could not archive whole: its parts one by one, so one bad path costs only itself
      if (f.subtree) return splitAround(f.path);
      skip(f.path, fkind, `could not be read from the box: ${firstLine(failed, 200)}`);
    } else if (!found) skip(f.path, fkind, "gone from the box before it could be read");
    else if (bigAt && f.subtree) return splitAround(f.path, bigAt);
    return [];
  };

  // each archive call costs a round of the engine's mount machinery (~0.2 s on podman): a few run at once
  // a fetch can add fetches (a folder split around a file it could not read past), so an idle worker waits for
  // the busy ones before it ends
  let next = 0;
  let busy = 0;
  let waiting: (() => void)[] = [];
  const wakeAll = () => {
    for (const w of waiting) w();
    waiting = [];
  };
  const worker = async () => {
    for (;;) {
      if (all.signal.aborted) return wakeAll();
      if (next < queue.length) {
        busy++;
        try {
          queue.push(...(await fetchOne(queue[next++])));
        } finally {
          busy--;
          wakeAll();
        }
      } else if (busy === 0) return wakeAll();
      else await new Promise<void>((r) => waiting.push(r));
    }
  };
  try {
    await Promise.all(Array.from({ length: queue.length ? FETCH_CONCURRENCY : 0 }, worker));
  } finally {
    clearTimeout(timer);
  }
  if (stopReason) {
    for (const c of wanted) if (!entries.has(c.path) && !skipped.has(c.path)) skip(c.path, c.kind, stopReason);
  }
  const owners = await ownersOf(engine, id, [...entries.values()].filter((e) => e.kind !== "deleted").map((e) => e.path));
  for (const e of entries.values()) {
    const o = owners.get(e.path);
    if (o) [e.uid, e.gid] = o;
  }
  const byPath = (a: { path: string }, b: { path: string }) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
  manifest.files = [...entries.values()].sort(byPath);
  manifest.skipped = [...skipped.values()].sort(byPath);
  await writeJson(join(trialPath, MANIFEST_FILE), manifest);
  return manifest;
}

const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Writes one kept file through a descriptor that follows no link and is a regular file. */
async function writeKept(root: string, path: string, data: Buffer, made: Set<string>): Promise<void> {
  const dest = join(root, path);
  if (Buffer.byteLength(dest) >= PATH_MAX) throw Object.assign(new Error("host path too long"), { code: "ENAMETOOLONG" });
  const dir = posix.dirname(dest);
  if (!made.has(dir)) {
    await mkdir(dir, { recursive: true });
    made.add(dir);
  }
  const fh = await open(dest, WRITE_FLAGS, 0o644);
  try {
    if (!(await fh.stat()).isFile()) throw Object.assign(new Error("not a regular file"), { code: "ENOTREG" });
    await fh.writeFile(data);
  } finally {
    await fh.close();
  }
}

/**
 * Owners of `paths` in the box. The archive cannot say: podman's archive GET rewrites every owner to the caller. The
 * engine reads them from the box's own layer where it can (no process in the box, no link followed: driver
 * layer.ts); the rest come from `stat` execs of at most ~64 KiB of arguments each (a long path list would pass the
 * exec's argument limit). Paths neither can read (or a box without sh/stat) keep the archive's owner.
 */
async function ownersOf(engine: Engine, id: string, all: string[]): Promise<Map<string, [number, number]>> {
  const out = new Map<string, [number, number]>();
  const fromLayer = await engine.changedOwners(id, all).catch(() => undefined);
  for (const [p, o] of fromLayer ?? []) out.set(p, o);
  const paths = fromLayer ? all.filter((p) => !fromLayer.has(p)) : all;
  for (let i = 0; i < paths.length; ) {
    const batch: string[] = [];
    let bytes = 0;
    while (i < paths.length && (batch.length === 0 || (bytes < 64 * 1024 && batch.length < 1000))) {
      batch.push(paths[i]);
      bytes += Buffer.byteLength(paths[i++]) + 1;
    }
    const r = await engine
      .exec(id, ["sh", "-c", 'stat -c "%u:%g|%n" -- "$@" 2>/dev/null; exit 0', "sh", ...batch], { user: BOX_ROOT, timeoutMs: 30_000 })
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

/**
 * One kept file's bytes: opened without following a link, refused unless it is a regular file, and read only up to
 * `limit` bytes (the manifest's cap), so a tampered trial folder cannot make a reader block on a FIFO or fill memory.
 */
export async function readKeptFile(trialPath: string, path: string, limit = KEPT_CAP_BYTES): Promise<Buffer> {
  const root = join(trialPath, KEPT_DIR);
  const hint = "the trial folder was changed after the trial; see `evolve trial files changes <id>`";
  let fh;
  try {
    fh = await openBoxFile(root, keptFile(trialPath, path));
  } catch (e) {
    if (!(e instanceof BoxFileRefused)) throw new EvolveError("kept_file_unreadable", `the kept copy of ${path} cannot be opened in ${root} (${firstLine(e)})`, hint);
    const why = e.what.includes("link") ? "is a link" : "is not a regular file";
    throw new EvolveError("kept_file_unreadable", `the kept copy of ${path} ${why} in ${root}`, hint);
  }
  if (!fh) throw new EvolveError("kept_file_unreadable", `the kept copy of ${path} is missing in ${root}`, hint);
  try {
    const size = (await fh.stat()).size;
    if (size > limit) throw new EvolveError("kept_file_unreadable", `the kept copy of ${path} is ${size} bytes, over the ${limit}-byte cap it was kept under`, hint);
    return await readRange(fh, 0, size);
  } finally {
    await fh.close();
  }
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
    else if (e.type === "file") yield* entryBlocks({ name, type: "file", mode, data: await readKeptFile(dir, e.path, m.cap_bytes) });
  }
  yield endBlocks();
}

/**
 * Writes `blocks` (a tar) gzipped to `file`. Each block waits for gzip and the disk to take it, so memory stays
 * at a few chunks whatever the archive's size.
 */
export async function writeTarGz(file: string, produce: (write: (chunk: Buffer) => Promise<void> | undefined) => Promise<void>): Promise<void> {
  const gz = createGzip();
  const done = pipeline(gz, createWriteStream(file));
  const write = (chunk: Buffer) => (gz.write(chunk) ? undefined : once(gz, "drain").then(() => undefined));
  try {
    await produce(write);
    gz.end();
    await done;
  } catch (e) {
    gz.destroy();
    await done.catch(() => undefined);
    await rm(file, { force: true });
    throw e;
  }
}

/** Tar bytes a live archive may read from a box before it is stopped. */
export const LIVE_ARCHIVE_MAX_BYTES = 8 * 1024 ** 3;

/**
 * `path` of the live box `id` as a .tar.gz at `file`, streamed: the engine's archive is held back while gzip and the
 * disk catch up (a 3 GB sparse file costs ~90 MB of memory, not 3 GB). Past `maxBytes` of tar it stops with
 * `archive_too_large` (exit 1) and leaves no file. False, with no file left, when the path does not exist.
 */
export async function archiveLive(engine: Engine, id: string, path: string, file: string, maxBytes = LIVE_ARCHIVE_MAX_BYTES): Promise<boolean> {
  let found = true;
  let bytes = 0;
  await writeTarGz(file, async (write) => {
    found = await engine.archiveGet(id, path, (chunk) => {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        return Promise.reject(new EvolveError("archive_too_large", `${path} in the live box is over the ${maxBytes}-byte limit of an archive`, "archive a smaller subtree with --path, or raise --max-bytes"));
      }
      return write(chunk);
    });
  });
  if (!found) await rm(file, { force: true });
  return found;
}

/** The kept tree under `p` as a .tar.gz at `file`. */
export async function archiveKept(dir: string, m: KeptManifest, p: string, file: string): Promise<void> {
  await writeTarGz(file, async (write) => {
    for await (const block of keptTar(dir, m, p)) await write(block);
  });
}
