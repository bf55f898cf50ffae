/**
 * How a task's own scripts (solution/solve.sh, tests/test.sh, a step's workdir/setup.sh, pre_artifacts.sh) are run
 * in a box that may be minimal: bash when the box has it (Harbor runs every script with bash, so that is what task
 * authors test against), else the script's own `#!` interpreter, else sh. A script whose `#!` names something other
 * than a shell (python3, perl, node) is not a shell script: it runs with that interpreter or not at all, since bash or
 * sh would only run it into a syntax error that reads like the verifier's fault (no reward file).
 *
 * Each box is probed once: the engine's stat of the box's file system finds the programs these scripts could need
 * without a process in the box (statProbe), and when it does not find them all, one exec asks the box which exist
 * (probeCommand); the `#!` lines are read host-side from the task's files (readShebang, bounded). This module runs
 * nothing itself: the caller passes the exec, so the choice is the same for a trial's boxes and a regrade's and is
 * unit-tested without an engine. A script nothing in the box can run fails before it is due, as the deterministic
 * ScriptInterpreterNotFoundError naming the script and the missing program.
 */
import { existsSync } from "node:fs";
import { open } from "node:fs/promises";
import { basename, join, relative } from "node:path";
import { TrialFailure } from "../outcome.ts";

/** One of the task's scripts: its path as the task's author knows it (`tests/test.sh`) and the file on the host. */
export interface TaskScript {
  name: string;
  host: string;
}

/** The task script at host path `host` of the task in `taskDir`. */
export function taskScript(taskDir: string, host: string): TaskScript {
  return { name: relative(taskDir, host), host };
}

/** The test.sh a verifier runs, of `testsDirs` laid over each other (a step's own over the task's): the last one's. */
export function testScript(taskDir: string, testsDirs: readonly string[]): TaskScript {
  const found = [...testsDirs].reverse().find((d) => existsSync(join(d, "test.sh"))) ?? testsDirs[0];
  return taskScript(taskDir, join(found, "test.sh"));
}

/** A multi-step task's step's workdir/setup.sh, run in the agent's box before the step's agent. */
export function setupScript(taskDir: string, stepDir: string): TaskScript {
  return taskScript(taskDir, join(stepDir, "workdir", "setup.sh"));
}

/** The task's pre_artifacts.sh, run in the agent's box after the agent. */
export function preArtifactsScript(taskDir: string): TaskScript {
  return taskScript(taskDir, join(taskDir, "pre_artifacts.sh"));
}

/** A script's `#!` line as the kernel reads it: the interpreter and at most one argument (the rest of the line). */
export interface Shebang {
  interpreter: string;
  arg?: string;
}

/** The most of a script read for its `#!` line: Linux's own limit (BINPRM_BUF_SIZE). */
export const SHEBANG_MAX_BYTES = 256;

/** Shells a `#!` may name for a script bash (or sh) runs just as well. */
const SHELLS = new Set(["sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "busybox"]);

/** The `#!` line at the start of `head` (a script's first bytes), or undefined when it has none. */
export function parseShebang(head: string): Shebang | undefined {
  if (!head.startsWith("#!")) return undefined;
  const line = head.slice(2).split("\n")[0].replace(/\r$/, "").trim();
  const m = /^(\S+)(?:\s+(.*))?$/.exec(line);
  if (!m) return undefined;
  const arg = m[2]?.trim();
  return arg ? { interpreter: m[1], arg } : { interpreter: m[1] };
}

/** The `#!` line of the script at `path` on the host (its first SHEBANG_MAX_BYTES only); undefined when none or unreadable. */
export async function readShebang(path: string): Promise<Shebang | undefined> {
  let fh;
  try {
    fh = await open(path, "r");
    const buf = Buffer.alloc(SHEBANG_MAX_BYTES);
    const { bytesRead } = await fh.read(buf, 0, SHEBANG_MAX_BYTES, 0);
    return parseShebang(buf.subarray(0, bytesRead).toString("utf8"));
  } catch {
    return undefined;
  } finally {
    await fh?.close();
  }
}

/**
 * What a `#!` line runs: the program the box must have (a path, or a name looked up on PATH for `#!/usr/bin/env x`)
 * and the argv that runs the script with it. `env` itself is skipped: the program is run directly, so a box without
 * /usr/bin/env still runs `#!/usr/bin/env bash`.
 */
export function shebangProgram(sb: Shebang): { program: string; argv: string[]; shell: boolean } {
  let argv = [sb.interpreter, ...(sb.arg !== undefined ? [sb.arg] : [])];
  if (basename(sb.interpreter) === "env" && sb.arg !== undefined) {
    // `env -S a b` splits its argument the way the kernel does not; plain `env a` has one word anyway
    const words = sb.arg.split(/\s+/).filter((w) => w !== "-S");
    const i = words.findIndex((w) => !w.startsWith("-") && !w.includes("="));
    if (i >= 0) argv = words.slice(i);
  }
  const program = argv[0];
  return { program, argv, shell: SHELLS.has(basename(program)) };
}

/** The programs a box is asked about for these `#!` lines: bash and sh always, and each line's own program. */
export function programsToProbe(shebangs: readonly (Shebang | undefined)[]): string[] {
  const out = new Set(["bash", "sh"]);
  for (const sb of shebangs) if (sb) out.add(shebangProgram(sb).program);
  return [...out];
}

// a name is looked up on PATH, a path must be an executable file; prints the ones the box has, one a line
const PROBE_SCRIPT = 'for p in "$@"; do case "$p" in */*) [ -f "$p" ] && [ -x "$p" ] ;; *) command -v "$p" >/dev/null 2>&1 ;; esac && printf "%s\\n" "$p"; done; exit 0';

/** The one exec (as box root) that asks a box which of `programs` it has; its stdout is read by parseProbe. */
export function probeCommand(programs: readonly string[]): string[] {
  return ["sh", "-c", PROBE_SCRIPT, "sh", ...programs];
}

/** What a box has of the programs asked about; `noShell` when the probe could not run at all (no sh). */
export interface BoxPrograms {
  present: ReadonlySet<string>;
  noShell: boolean;
}

/** The probe's answer: the programs among `asked` it printed; an exit other than 0 means sh itself is missing. */
export function parseProbe(r: { exitCode: number; stdout: string }, asked: readonly string[]): BoxPrograms {
  if (r.exitCode !== 0) return { present: new Set(), noShell: true };
  const printed = new Set(r.stdout.split("\n").map((l) => l.trim()));
  return { present: new Set(asked.filter((p) => printed.has(p))), noShell: false };
}

/** The PATH an exec gets in a box whose container sets none (podman's and Docker's default). */
export const DEFAULT_BOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** A path's stat as the engine reports it (driver PathStat): Go's os.FileMode bits, the link's resolved target. */
export interface ProgramStat {
  mode: number;
  linkTarget: string;
}

// Go's os.FileMode type bits (bit 19 and up): dir 31, symlink 27, device 26, pipe 25, socket 24, char device 21, irregular 19
const TYPE_SHIFT = 2 ** 19;
const LINK = 1 << (27 - 19);
const NOT_REGULAR = (1 << (31 - 19)) | LINK | (1 << (26 - 19)) | (1 << (25 - 19)) | (1 << (24 - 19)) | (1 << (21 - 19)) | 1;
const typeBits = (mode: number) => Math.floor(mode / TYPE_SHIFT);
/** Where shells live in nearly every image (/bin is a link to /usr/bin in merged-/usr ones). */
const USUAL_DIRS = new Set(["/usr/bin", "/bin"]);

/**
 * What a box has of `programs`, from the engine's stat of its file system: no process runs in the box, where the exec
 * probe costs a runtime process (~0.1 s on podman). A name is looked for in each absolute folder of `path` (the
 * box's PATH), a path as given; it is there when it is, after links, a regular file with an execute bit, which
 * `command -v` and `[ -f ] && [ -x ]` (as box root) would find too. Undefined unless every program is found: only
 * the exec probe is the last word on a missing one (a shell function, a relative PATH entry, a box without sh).
 */
export async function statProbe(programs: readonly string[], path: string, stat: (p: string) => Promise<ProgramStat | undefined>): Promise<BoxPrograms | undefined> {
  const runnable = async (p: string): Promise<boolean> => {
    let st = await stat(p);
    // the engine gives a link's own mode and its target resolved inside the box: the target's is what runs
    if (st && typeBits(st.mode) & LINK) st = st.linkTarget.startsWith("/") ? await stat(st.linkTarget) : undefined;
    return st !== undefined && (typeBits(st.mode) & NOT_REGULAR) === 0 && (st.mode & 0o111) !== 0;
  };
  // where a name is found does not matter, only whether: the usual folders first, one stat at a time (the engine
  // answers a box's stats one after another anyway), so a Debian box costs a stat or two per program
  const dirs = [...new Set(path.split(":").filter((d) => d.startsWith("/")).map((d) => d.replace(/\/+$/, "") || "/"))];
  dirs.sort((a, b) => Number(USUAL_DIRS.has(b)) - Number(USUAL_DIRS.has(a)));
  const onPath = async (name: string) => {
    for (const d of dirs) if (await runnable(`${d === "/" ? "" : d}/${name}`)) return true;
    return false;
  };
  const found = await Promise.all(programs.map((p) => (p.includes("/") ? runnable(p) : onPath(p))));
  if (found.includes(false)) return undefined;
  return { present: new Set(programs), noShell: false };
}

/** How one script runs in a box: the interpreter's argv (the script's box path goes after it), or why it cannot. */
export type ScriptPlan = { argv: string[] } | { missing: string; message: string };

/** Chooses the interpreter for script `name` with `#!` line `sb` in a box that has `box`'s programs. */
export function planScript(name: string, sb: Shebang | undefined, box: BoxPrograms): ScriptPlan {
  const line = sb ? `#!${sb.interpreter}${sb.arg !== undefined ? ` ${sb.arg}` : ""}` : undefined;
  if (box.noShell) {
    return { missing: "sh", message: `${name} cannot run: the box has no sh, which evolve runs its own commands and the task's scripts through` };
  }
  const has = (p: string) => box.present.has(p);
  const own = sb ? shebangProgram(sb) : undefined;
  if (own && !own.shell) {
    if (has(own.program)) return { argv: own.argv };
    return { missing: own.program, message: `${name} starts with ${line}, and the box has no ${own.program} to run it (install it in the image, or make the script a shell script)` };
  }
  if (has("bash")) return { argv: ["bash"] };
  if (own && has(own.program)) return { argv: own.argv };
  if (has("sh")) return { argv: ["sh"] };
  return { missing: "bash", message: `${name} is a shell script, and the box has no shell to run it (neither bash nor sh${own && !["bash", "sh"].includes(own.program) ? ` nor ${own.program}` : ""})` };
}

/** `s` quoted for sh. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** What one box can run of the task's scripts, from one probe: the shell command for each, or the failure to raise. */
export class BoxScripts {
  private readonly plans = new Map<string, ScriptPlan>();
  private readonly names = new Map<string, string>();

  constructor(
    scripts: readonly { script: TaskScript; shebang: Shebang | undefined }[],
    readonly programs: BoxPrograms,
  ) {
    for (const { script, shebang } of scripts) {
      this.plans.set(script.host, planScript(script.name, shebang, programs));
      this.names.set(script.host, script.name);
    }
  }

  /** For the trial log: the scripts that run with something other than bash (a minimal box), or undefined. */
  fallbackNote(): string | undefined {
    const other = [...this.plans].flatMap(([host, p]) => ("argv" in p && p.argv[0] !== "bash" ? [`${this.names.get(host)} with ${p.argv[0]}`] : []));
    if (other.length === 0) return undefined;
    return `${this.programs.present.has("bash") ? "" : "the box has no bash: "}${other.join(", ")}`;
  }

  /** Whether `script` was among those this box was probed for. */
  has(script: TaskScript): boolean {
    return this.plans.has(script.host);
  }

  /** Throws ScriptInterpreterNotFoundError for every probed script the box cannot run (all named in one message). */
  check(): void {
    const bad = [...this.plans.values()].filter((p): p is Extract<ScriptPlan, { missing: string }> => "missing" in p);
    if (bad.length > 0) throw new TrialFailure("ScriptInterpreterNotFoundError", [...new Set(bad.map((p) => p.message))].join("; "));
  }

  /** The sh command line that runs `script`, copied into the box at `boxPath`, with its interpreter. */
  command(script: TaskScript, boxPath: string): string {
    const plan = this.plans.get(script.host);
    if (!plan) throw new Error(`${script.name} was not among the scripts this box was probed for`);
    if ("missing" in plan) throw new TrialFailure("ScriptInterpreterNotFoundError", plan.message);
    return [...plan.argv, boxPath].map(shellQuote).join(" ");
  }
}

/**
 * Probes one box for `scripts` (their `#!` lines read from the host) with the one exec `exec` runs as box root, and
 * returns what it can run of them.
 */
export async function probeBox(
  scripts: readonly TaskScript[],
  exec: (argv: string[]) => Promise<{ exitCode: number; stdout: string }>,
  quick?: (programs: readonly string[]) => Promise<BoxPrograms | undefined>,
): Promise<BoxScripts> {
  const read = await Promise.all(scripts.map(async (script) => ({ script, shebang: await readShebang(script.host) })));
  const programs = programsToProbe(read.map((r) => r.shebang));
  // `quick` (statProbe) answers when it finds every program; the exec answers otherwise
  const known = await quick?.(programs).catch(() => undefined);
  if (known) return new BoxScripts(read, known);
  const r = await exec(probeCommand(programs));
  return new BoxScripts(read, parseProbe(r, programs));
}
