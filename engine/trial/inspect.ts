/**
 * Reading a live trial box from outside (`evolve trial files|procs` while the trial runs, and the end-of-trial
 * capture in changes.ts). Everything goes through the engine's REST API where it can — the changes list, the archive
 * GET (a tar of one path), the process list — so it works in images without a shell; only a folder listing execs
 * `stat` in the box, falling back to `ls -la` text.
 */
import { posix } from "node:path";
import { LABEL_TRIAL, type Engine } from "../driver/types.ts";
import { EvolveError } from "../errors.ts";
import { TarReader, type TarHeader, type TarSink } from "../driver/untar.ts";
import { BOX_ROOT } from "../box/layout.ts";

/** One path the box's file system changed, as the engine reports it against the image. */
export interface BoxChange {
  path: string;
  kind: "added" | "modified" | "deleted";
}

/** One row of a folder listing. */
export interface DirEntry {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number | null;
  mode: string | null;
  mtime: string | null;
}

/** One process of the box. */
export interface BoxProcess {
  pid: string;
  ppid: string;
  user: string;
  /** Seconds since the process started; null when the engine gave no time it could be read from. */
  elapsed_sec: number | null;
  command: string;
}

const GO_UNITS: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 1e-3, "µs": 1e-6, us: 1e-6, ns: 1e-9 };

/**
 * An elapsed time as engines print it, in seconds: Go's duration (`16.569293403s`, `1h2m3.5s`, podman) or ps's
 * `etime` (`[[dd-]hh:]mm:ss`, docker); undefined for anything else.
 */
export function parseElapsed(text: string): number | undefined {
  const t = text.trim();
  const go = /^(?:(\d+(?:\.\d+)?)(h|ms|µs|us|ns|m|s))+$/.test(t) ? [...t.matchAll(/(\d+(?:\.\d+)?)(h|ms|µs|us|ns|m|s)/g)] : null;
  if (go) return go.reduce((sum, m) => sum + Number(m[1]) * GO_UNITS[m[2]], 0);
  const ps = /^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$/.exec(t);
  if (ps) return Number(ps[1] ?? 0) * 86400 + Number(ps[2] ?? 0) * 3600 + Number(ps[3]) * 60 + Number(ps[4]);
  return undefined;
}

/**
 * A path as the box names it: absolute, normalized, without `..`. Relative paths count from `/`. A `..` segment is
 * refused rather than resolved, so a path can never name something outside the tree it is read from.
 */
export function boxPath(p: string | undefined, dflt = "/"): string {
  const raw = p === undefined || p === "" ? dflt : p;
  if (raw.includes("\0") || raw.split("/").includes("..")) {
    throw new EvolveError("path_outside_tree", `path ${JSON.stringify(raw)} leaves the box's file tree`, "give an absolute path inside the box, without '..', e.g. /app/main.py");
  }
  const abs = posix.normalize(raw.startsWith("/") ? raw : `/${raw}`);
  return abs.length > 1 ? abs.replace(/\/+$/, "") : "/";
}

/** The running box of a trial (its agent box, else a separate verifier box), or undefined when none runs. */
export async function findLiveBox(engine: Engine, trialId: string): Promise<{ id: string; role: string } | undefined> {
  const boxes = (await engine.list({ [LABEL_TRIAL]: trialId })).filter((b) => b.running);
  const rank = (r: string | undefined) => (r === "agent" ? 0 : r === "verifier" ? 1 : 2);
  boxes.sort((a, b) => rank(a.labels["dev.evolve.role"]) - rank(b.labels["dev.evolve.role"]));
  const b = boxes[0];
  return b ? { id: b.id, role: b.labels["dev.evolve.role"] ?? "box" } : undefined;
}

/** The engine's list of paths the box added, changed or deleted relative to its image, sorted by path. */
export async function boxChanges(engine: Engine, id: string): Promise<BoxChange[]> {
  return (await engine.changes(id)).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Streams the tar of one path of the box to `sink` (entries named from the path's basename, as the engines do).
 * Returns false when the path does not exist. `signal` stops the transfer early (the entries read so far stand).
 */
export async function boxArchive(engine: Engine, id: string, path: string, sink: TarSink, signal?: AbortSignal): Promise<boolean> {
  const reader = new TarReader(sink);
  if (!(await engine.archiveGet(id, path, (c) => reader.write(c), signal))) return false;
  if (!signal?.aborted) reader.finish();
  return true;
}

/** The raw tar bytes of one path of the box, streamed to `onChunk`; false when the path does not exist. */
export async function boxArchiveRaw(engine: Engine, id: string, path: string, onChunk: (c: Buffer) => void): Promise<boolean> {
  return engine.archiveGet(id, path, onChunk);
}

/**
 * One file of the box, whole, up to `limit` bytes. Throws `file_not_found` (exit 1) when absent and `not_a_file`
 * when the path is a folder.
 */
export async function boxReadFile(engine: Engine, id: string, path: string, limit = 256 * 1024 * 1024): Promise<{ data: Buffer; header: TarHeader }> {
  let first: TarHeader | undefined;
  const parts: Buffer[] = [];
  let size = 0;
  const stop = new AbortController();
  const found = await boxArchive(
    engine,
    id,
    path,
    {
      entry: (h) => {
        if (first) return;
        first = h;
        if (h.type !== "file") stop.abort();
        else if (h.size > limit) stop.abort();
      },
      data: (c) => {
        if (stop.signal.aborted) return;
        size += c.length;
        parts.push(Buffer.from(c));
      },
    },
    stop.signal,
  );
  if (!found || !first) throw new EvolveError("file_not_found", `${path} does not exist in the live box`, "list the folder with `evolve trial files ls <id> <dir>`");
  if (first.type === "dir") throw new EvolveError("not_a_file", `${path} is a folder`, `list it with \`evolve trial files ls <id> ${path}\``);
  if (first.type === "symlink") throw new EvolveError("not_a_file", `${path} is a symlink to ${first.linkname}`, `read the target instead`);
  if (first.type !== "file") throw new EvolveError("not_a_file", `${path} is not a regular file`, "");
  if (first.size > limit) throw new EvolveError("file_too_large", `${path} is ${first.size} bytes, over the ${limit}-byte limit of cat`, "fetch it with `evolve trial files archive`");
  return { data: Buffer.concat(parts, size), header: first };
}

// `stat` is in coreutils and busybox alike; %F names the type in words in both
const LS_SCRIPT = [
  'cd -- "$1" || exit 3',
  "command -v stat >/dev/null 2>&1 || { ls -la; exit 4; }",
  'for f in .* *; do',
  '  case "$f" in .|..) continue;; esac',
  '  [ -e "$f" ] || [ -L "$f" ] || continue',
  "  stat -c '%F|%s|%a|%Y|%n' -- \"$f\"",
  "done",
].join("\n");

/** Lists one folder of the live box (`ls` of `trial files`). `raw` is set instead of `entries` when the box has no `stat`. */
export async function boxList(engine: Engine, id: string, dir: string): Promise<{ entries: DirEntry[]; raw?: string }> {
  const r = await engine.exec(id, ["/bin/sh", "-c", LS_SCRIPT, "sh", dir], { user: BOX_ROOT, timeoutMs: 30_000 });
  if (r.exitCode === 3) {
    throw new EvolveError("file_not_found", `${dir} is not a folder in the live box`, "read a file with `evolve trial files cat <id> <path>`");
  }
  if (r.exitCode === 4) return { entries: [], raw: r.stdout };
  if (r.exitCode !== 0 && !r.stdout) throw new EvolveError("box_read_failed", `listing ${dir} failed: ${(r.stderr || `exit ${r.exitCode}`).trim().split("\n")[0]}`, "");
  const entries: DirEntry[] = [];
  for (const line of r.stdout.split("\n")) {
    const m = /^([^|]*)\|(\d+)\|([0-7]+)\|(\d+)\|(.*)$/.exec(line);
    if (!m) continue;
    const t = m[1].toLowerCase();
    const type: DirEntry["type"] = t.includes("directory") ? "dir" : t.includes("symbolic") ? "symlink" : t.includes("regular") ? "file" : "other";
    entries.push({
      name: m[5],
      path: posix.join(dir, m[5]),
      type,
      size: type === "file" ? Number(m[2]) : null,
      mode: m[3].padStart(4, "0"),
      mtime: new Date(Number(m[4]) * 1000).toISOString(),
    });
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : 1));
  return { entries };
}

/** The box's processes (the driver spells the columns for its engine). */
export async function boxProcesses(engine: Engine, id: string): Promise<BoxProcess[]> {
  const data = await engine.top(id, "pid,ppid,user,etime,args");
  const titles = data.titles.map((t) => t.toUpperCase());
  const at = (row: string[], ...names: string[]) => {
    const i = titles.findIndex((t) => names.includes(t));
    return i === -1 ? "" : String(row[i] ?? "");
  };
  return data.processes.map((row) => ({
    pid: at(row, "PID"),
    ppid: at(row, "PPID"),
    user: at(row, "USER", "UID"),
    elapsed_sec: parseElapsed(at(row, "ELAPSED", "ETIME", "TIME")) ?? null,
    command: at(row, "COMMAND", "CMD", "ARGS"),
  }));
}

/** Extracts a tar (held in memory) into the box at `path`, which must exist. */
export async function boxPutTar(engine: Engine, id: string, path: string, tar: Buffer): Promise<void> {
  await engine.archivePut(id, path, tar);
}
