/**
 * Ending the agent: when the agent phase ends, for any reason, every process the agent started is killed before
 * `pre_artifacts.sh`, artifact collection or the verifier run, whatever it did to escape (`setsid`, `env -i`,
 * double forks, a fork loop), while the services the image's ENTRYPOINT started before the agent keep running.
 *
 * A process is told apart by (pid, start time). The box's processes are listed just before the agent starts; a
 * process not on that list is the agent's unless a listed process other than the box's main process is among its
 * ancestors: the agent's execs have their parent outside the box, its orphans (setsid, double forks) are
 * re-parented to the main process, while a worker that a service from before the agent forks later stays with its
 * service. (A service that makes itself a child subreaper would adopt the agent's orphans: none of the usual ones
 * do.) The agent's processes are stopped (SIGSTOP, so a fork loop cannot outrun the sweep), then killed, round
 * after round until none is left.
 *
 * The sweep runs on the host, through /proc, when evolve can see the box's processes there (root beside a rootful
 * engine): nothing the agent changed inside its box (a replaced /bin/sh, a mounted-over /proc) can fool it.
 * Elsewhere it falls back to listing and signalling through execs as root in the box, with shell built-ins only.
 */
import { readdir, readFile, readlink } from "node:fs/promises";
import type { Engine } from "../driver/types.ts";
import { BOX_ROOT } from "./layout.ts";

/** The box's processes at one moment: "pid:starttime" keys, and how they were seen. */
export interface ProcSnapshot {
  keys: Set<string>;
  via: "host" | "box";
  /** The box's main process on the host (host sweeps only). */
  hostPid?: number;
}

/** One process the sweep killed (or could not), for the trial log. */
export interface KilledProc {
  pid: number;
  name: string;
}

/** One process as /proc shows it. */
export interface Proc {
  pid: number;
  /** "pid:starttime": unique for the life of the machine, unlike a pid alone. */
  key: string;
  name: string;
  /** Parent pid in the same numbering (host or box); 0 when the parent is outside the box. */
  ppid: number;
  /** /proc state letter; Z (zombie) and X (dead) run nothing: a killed child awaiting its reaper. */
  state: string;
}

const MAX_ROUNDS = 50;

const gone = (p: Proc) => p.state === "Z" || p.state === "X";

/** Lists the box's processes now (call it right before the agent starts); `via: "box"` forces the in-box listing. */
export async function snapshotProcs(engine: Engine, box: string, opts: { via?: "box" } = {}): Promise<ProcSnapshot> {
  const hostPid = opts.via === "box" ? undefined : (await engine.inspect(box))?.pid;
  if (hostPid) {
    const procs = await hostProcs(hostPid);
    if (procs) return { keys: new Set(procs.map((p) => p.key)), via: "host", hostPid };
  }
  return { keys: new Set((await boxProcs(engine, box)).map((p) => p.key)), via: "box" };
}

/** Kills every process of the box the agent started (see the module comment); returns what it killed and what survived. */
export async function killNewProcs(engine: Engine, box: string, before: ProcSnapshot): Promise<{ killed: KilledProc[]; left: KilledProc[] }> {
  const init = before.hostPid;
  if (before.via === "host" && init) {
    return sweep(before.keys, init, async () => (await hostProcs(init)) ?? [], async (pids) => {
      for (const p of pids) signal(p, "SIGSTOP");
      for (const p of pids) signal(p, "SIGKILL");
    });
  }
  return sweep(before.keys, 1, () => boxProcs(engine, box), async (pids) => {
    await engine.exec(box, ["/bin/sh", "-c", 'kill -STOP "$@" 2>/dev/null; kill -KILL "$@" 2>/dev/null; true', "sh", ...pids.map(String)], { user: BOX_ROOT, timeoutMs: 30_000 });
  });
}

/** The agent's processes among `procs`: not in `keep`, alive, and with no kept ancestor but the main process `init`. */
export function agentProcs(procs: Proc[], keep: Set<string>, init: number): Proc[] {
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  const verdict = new Map<number, boolean>();
  const isKept = (p: Proc, depth: number): boolean => {
    const known = verdict.get(p.pid);
    if (known !== undefined) return known;
    let v: boolean;
    if (p.pid === init || keep.has(p.key)) v = true;
    else {
      const parent = byPid.get(p.ppid);
      // a parent outside the box (an exec) or the main process (an orphan): the agent's
      v = parent !== undefined && parent.pid !== init && depth < 1000 && isKept(parent, depth + 1);
    }
    verdict.set(p.pid, v);
    return v;
  };
  return procs.filter((p) => !gone(p) && !isKept(p, 0));
}

async function sweep(keep: Set<string>, init: number, list: () => Promise<Proc[]>, kill: (pids: number[]) => Promise<void>): Promise<{ killed: KilledProc[]; left: KilledProc[] }> {
  const killed = new Map<number, KilledProc>();
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const doomed = agentProcs(await list(), keep, init);
    if (doomed.length === 0) return { killed: [...killed.values()], left: [] };
    await kill(doomed.map((p) => p.pid));
    for (const p of doomed) if (!killed.has(p.pid)) killed.set(p.pid, { pid: p.pid, name: p.name });
    await sleep(round < 5 ? 20 : 100);
  }
  const left = agentProcs(await list(), keep, init).map((p) => ({ pid: p.pid, name: `${p.name} [${p.state}]` }));
  return { killed: [...killed.values()], left };
}

// ---- seeing the box's processes -----------------------------------------------------------------------------

/** The pid namespace of the box's main process, when it is visible here and is not our own. */
async function hostNamespace(hostPid: number): Promise<string | undefined> {
  try {
    const ns = await readlink(`/proc/${hostPid}/ns/pid`);
    const own = await readlink("/proc/self/ns/pid");
    return ns !== own ? ns : undefined;
  } catch {
    return undefined;
  }
}

/** Every host process in the pid namespace of `hostPid`; undefined when that namespace is not visible from here. */
async function hostProcs(hostPid: number): Promise<Proc[] | undefined> {
  const ns = await hostNamespace(hostPid);
  if (!ns) return undefined;
  const out: Proc[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    try {
      if ((await readlink(`/proc/${pid}/ns/pid`)) !== ns) continue;
      const p = parseStat(pid, await readFile(`/proc/${pid}/stat`, "utf8"));
      if (p) out.push(p);
    } catch {
      // it ended while we looked
    }
  }
  return out;
}

/** One /proc/<pid>/stat line as a {@link Proc} (the name may hold spaces and parentheses: the last ")" ends it). */
export function parseStat(pid: number, stat: string): Proc | undefined {
  const open = stat.indexOf("(");
  const close = stat.lastIndexOf(")");
  if (open < 0 || close < open) return undefined;
  // after the name: state (field 3), ppid (4), … starttime (22)
  const rest = stat.slice(close + 2).split(" ");
  const start = rest[22 - 3];
  if (start === undefined) return undefined;
  return { pid, key: `${pid}:${start}`, name: stat.slice(open + 1, close), state: rest[0] ?? "", ppid: Number(rest[1] ?? 0) };
}

// Prints "pid starttime state ppid name" for every process but itself; built-ins only, so no helper joins the list.
const BOX_LIST = `for d in /proc/[0-9]*; do p=\${d#/proc/}; [ "$p" = "$$" ] && continue; read -r l < "$d/stat" 2>/dev/null || continue; n=\${l#*\\(}; n=\${n%\\)*}; r=\${l##*\\) }; set -- $r; st=$1; pp=$2; eval s=\\\${20}; echo "$p $s $st $pp $n"; done`;

async function boxProcs(engine: Engine, box: string): Promise<Proc[]> {
  const r = await engine.exec(box, ["/bin/sh", "-c", BOX_LIST, "sh"], { user: BOX_ROOT, timeoutMs: 30_000 });
  const out: Proc[] = [];
  for (const line of r.stdout.split("\n")) {
    const m = /^(\d+) (\d+) (\S+) (\d+) ?(.*)$/.exec(line.trim());
    if (m) out.push({ pid: Number(m[1]), key: `${m[1]}:${m[2]}`, state: m[3], ppid: Number(m[4]), name: m[5] });
  }
  return out;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
