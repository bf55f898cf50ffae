/**
 * Ending the agent: when the agent phase ends, for any reason, every process the agent started is killed before
 * `pre_artifacts.sh`, artifact collection or the verifier run, whatever it did to escape (`setsid`, `env -i`,
 * double forks, a fork loop, nested user/PID/mount/network namespaces, re-execs, ignoring SIGTERM), while the
 * services the image's ENTRYPOINT started before the agent keep running.
 *
 * The boundary is the box's cgroup (engine/driver/cgroup.ts): a process of the box cannot leave it, nesting
 * namespaces included, and the host sees every process in it under its host pid. A process is told apart by (pid,
 * start time). The cgroup's processes are listed just before the agent starts; after the phase the whole cgroup
 * is frozen (nothing forks or re-execs while the sweep looks), a process not on that list is the agent's unless a
 * listed process other than the box's main process is among its ancestors (the agent's execs have their parent
 * outside the box, its orphans are re-parented to the main process or die with their namespace's init, while a
 * worker that a service from before the agent forks later stays with its service), the agent's processes get
 * SIGKILL, which no handler catches, and the cgroup is thawed; round after round until a frozen listing holds none.
 * (A service that makes itself a child subreaper would adopt the agent's orphans: none of the usual ones do.)
 *
 * The cgroup sweep runs on the host, when evolve can freeze the box's cgroup (root beside a rootful podman or
 * docker on this machine): nothing the agent changed inside its box (a replaced /bin/sh, a mounted-over /proc)
 * can fool it. Elsewhere (a rootless or remote engine) it falls back to listing and signalling through execs as
 * root in the box, with shell built-ins only: that sees nested namespaces too (a parent PID namespace sees its
 * children's processes), but trusts the box's /bin/sh and cannot freeze the box, so a fork loop may outrun it for
 * a while and a box whose pids cap is spent gets no exec at all (the trial then ends in error, never scored).
 */
import { readFile } from "node:fs/promises";
import { boxCgroup, cgroupPids, setFrozen, type BoxCgroup } from "../driver/cgroup.ts";
import type { ContainerState, Engine } from "../driver/types.ts";
import { BOX_ROOT } from "../box/layout.ts";

/** The box's processes at one moment: "pid:starttime" keys, and how they were seen. */
export interface ProcSnapshot {
  keys: Set<string>;
  via: "cgroup" | "box";
  /** The box's main process on the host (cgroup sweeps only). */
  hostPid?: number;
  /** The box's cgroup (cgroup sweeps only). */
  cgroup?: BoxCgroup;
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

/**
 * Lists the box's processes now (call it right before the agent starts); `via: "box"` forces the in-box listing.
 * `state`: the box's state as read earlier in its life (boot), saving an inspect: its main process's host pid only
 * locates the cgroup, which must name the box and list that pid (boxCgroup), so a pid that ended since leads to
 * the in-box listing, as a box that does not run does.
 */
export async function snapshotProcs(engine: Engine, box: string, opts: { via?: "box"; state?: ContainerState } = {}): Promise<ProcSnapshot> {
  const st = opts.via === "box" ? undefined : (opts.state ?? (await engine.inspect(box)));
  const hostPid = st?.pid;
  const cgroup = st && hostPid ? await boxCgroup(st.id, hostPid) : undefined;
  if (hostPid && cgroup) {
    return { keys: new Set((await cgroupProcs(cgroup)).map((p) => p.key)), via: "cgroup", hostPid, cgroup };
  }
  return { keys: new Set((await boxProcs(engine, box)).map((p) => p.key)), via: "box" };
}

/** Kills every process of the box the agent started (see the module comment); returns what it killed and what survived. */
export async function killNewProcs(engine: Engine, box: string, before: ProcSnapshot): Promise<{ killed: KilledProc[]; left: KilledProc[] }> {
  if (before.via === "cgroup" && before.hostPid && before.cgroup) return cgroupSweep(before.keys, before.hostPid, before.cgroup);
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

/**
 * The sweep through the box's cgroup: freeze it, list it, SIGKILL the agent's processes, thaw it; until a frozen
 * listing holds none of the agent's. A SIGKILL sent while frozen takes effect before the process runs another
 * instruction of its own, so what a round lists is what it kills, children included.
 */
async function cgroupSweep(keep: Set<string>, init: number, cg: BoxCgroup): Promise<{ killed: KilledProc[]; left: KilledProc[] }> {
  const killed = new Map<number, KilledProc>();
  for (let round = 0; round < MAX_ROUNDS; round++) {
    let doomed: Proc[];
    try {
      await setFrozen(cg, true);
      doomed = agentProcs(await cgroupProcs(cg), keep, init);
      for (const p of doomed) signal(p.pid, "SIGKILL");
    } finally {
      await thaw(cg);
    }
    if (doomed.length === 0) return { killed: [...killed.values()], left: [] };
    for (const p of doomed) if (!killed.has(p.pid)) killed.set(p.pid, { pid: p.pid, name: p.name });
    await sleep(round < 5 ? 20 : 100);
  }
  const left = agentProcs(await cgroupProcs(cg), keep, init).map((p) => ({ pid: p.pid, name: `${p.name} [${p.state}]` }));
  return { killed: [...killed.values()], left };
}

/** Thaws the box's cgroup; a box left frozen would hang its verifier, so one that stays frozen is an error. */
async function thaw(cg: BoxCgroup): Promise<void> {
  for (let i = 0; i < 3; i++) if (await setFrozen(cg, false).catch(() => false)) return;
  throw new Error(`could not thaw the box's cgroup ${cg.dir} after the agent-process sweep`);
}

/** Every process in the box's cgroup, as the host's /proc shows it (host pids, host parents). */
async function cgroupProcs(cg: BoxCgroup): Promise<Proc[]> {
  const out: Proc[] = [];
  for (const pid of await cgroupPids(cg)) {
    try {
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
