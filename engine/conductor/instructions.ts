/**
 * What of a `.agent/` reaches an agent as text, and whether a `.agent/` may be handed to a trial at all. The rule of
 * which files, in which order, lives in {@link agentInstructionFiles} and nowhere else: the conductor's planning seat
 * and the installed CLIs (engine/harness/cli.ts, which prepend it to the instruction) both ask it, so a candidate
 * that changes the planning text or adds knowledge reaches every harness the same way.
 */
import { chmodSync, closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import { readOpenFile } from "../regular-file.ts";
import { EvolveError } from "../errors.ts";
import { AGENT_PATHS, MAX_AGENT_BYTES, MAX_AGENT_FILES } from "./layout.ts";

/** The most files and bytes a `.agent/` handed to a trial may hold (it is copied into every trial): layout.ts's. */
export const MAX_AGENT_ROOT_FILES = MAX_AGENT_FILES;
export const MAX_AGENT_ROOT_BYTES = MAX_AGENT_BYTES;

/**
 * The folder of a `.agent/` a trial is not given: episodic memory is the host's record of its runs (a trial's own
 * record is the trial), and can grow to tens of MiB, copied for nothing into every trial.
 */
export const TRIAL_SKIPS_DIR = AGENT_PATHS.episodes.split("/")[0]!;

/** One file of the instructions: its path relative to the `.agent/`, and its text. */
export interface InstructionFile {
  path: string;
  text: string;
}

/**
 * The adapter's instructions file (Meta-Harness Adapter search, engine/metaharness): a `.agent/` that is an adapter
 * carries its whole instructions here, and it comes first so every harness reads it before anything else.
 */
export const ADAPTER_INSTRUCTIONS = "ADAPTER.md";

/**
 * The `.agent/` files that are the agent's instructions, in the order it is given them: `ADAPTER.md` (when present:
 * an adapter's instructions, engine/metaharness), then `harness/PLANNING.md` (when present), then every
 * `knowledge/*.md` in name order (code-unit order, so the same on every host). A file
 * that is absent, not a regular file (a link) or unreadable is left out, as if absent: the conductor on the host
 * reads a live folder; a trial's copy was checked whole before (see {@link agentRootProblem}).
 */
export function agentInstructionFiles(root: string): InstructionFile[] {
  const out: InstructionFile[] = [];
  const read = (p: string): string | undefined => {
    try {
      return isFile(p) ? readFileSync(p, "utf8") : undefined;
    } catch {
      return undefined;
    }
  };
  const adapter = read(join(root, ADAPTER_INSTRUCTIONS));
  if (adapter !== undefined) out.push({ path: ADAPTER_INSTRUCTIONS, text: adapter });
  const planning = read(join(root, AGENT_PATHS.planning));
  if (planning !== undefined) out.push({ path: AGENT_PATHS.planning, text: planning });
  const kdir = join(root, AGENT_PATHS.knowledge);
  let names: string[] = [];
  try {
    if (lstatSync(kdir).isDirectory()) names = readdirSync(kdir);
  } catch {
    names = [];
  }
  for (const name of names.filter((n) => n.endsWith(".md")).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    const text = read(join(kdir, name));
    if (text !== undefined) out.push({ path: `${AGENT_PATHS.knowledge}/${name}`, text });
  }
  return out;
}

/** The instruction files joined into one text, each under a heading naming its path ("" when there are none). */
export function agentInstructions(root: string): string {
  return agentInstructionFiles(root)
    .map((f) => `## ${f.path}\n\n${f.text.replace(/\s+$/, "")}\n`)
    .join("\n");
}

/** The line that opens the `.agent/`'s part of a prepended instruction. */
export const AGENT_INSTRUCTIONS_BEGIN = "<agent-instructions source=\".agent/\">";
/** The line that closes it; the task's own instruction follows. */
export const AGENT_INSTRUCTIONS_END = "</agent-instructions>";

/**
 * The instruction an installed CLI is given when its trial has a `.agent/`: the `.agent/`'s instructions first,
 * between marker lines that say where they came from, then the task's instruction unchanged. `instruction` alone
 * when the `.agent/` holds no instruction files.
 */
export function withAgentInstructions(root: string, instruction: string): string {
  const text = agentInstructions(root);
  if (text === "") return instruction;
  return `${AGENT_INSTRUCTIONS_BEGIN}\n${text}${AGENT_INSTRUCTIONS_END}\n\n${instruction}`;
}

function isFile(p: string): boolean {
  try {
    return lstatSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * Why `root` cannot be handed to a trial, or undefined when it can: it must be an absolute path to a real directory
 * (not a link), and everything under it plain directories and regular readable files (no links, FIFOs or devices:
 * a link could reach out of it once mounted), at most {@link MAX_AGENT_ROOT_FILES} files and
 * {@link MAX_AGENT_ROOT_BYTES} bytes. `memory/` is neither checked nor copied ({@link TRIAL_SKIPS_DIR}). The one check
 * `evolve run --agent-root` and a trial's prepare both make.
 */
export function agentRootProblem(root: string): string | undefined {
  if (!isAbsolute(root)) return `${root} is not an absolute path`;
  let st;
  try {
    st = lstatSync(root);
  } catch (e) {
    return `${root} does not exist (${(e as NodeJS.ErrnoException).code ?? "unreadable"})`;
  }
  if (st.isSymbolicLink()) return `${root} is a link; give the directory itself`;
  if (!st.isDirectory()) return `${root} is not a directory`;
  let files = 0;
  let bytes = 0;
  const walk = (dir: string): string | undefined => {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch (e) {
      return `${rel(root, dir)}: cannot list (${(e as NodeJS.ErrnoException).code ?? "unreadable"})`;
    }
    for (const name of names) {
      if (dir === root && name === TRIAL_SKIPS_DIR) continue;
      const p = join(dir, name);
      const s = lstatSync(p, { throwIfNoEntry: false });
      if (!s) return `${rel(root, p)} vanished while it was checked`;
      if (s.isSymbolicLink()) return `${rel(root, p)} is a link (a .agent/ may hold only files and folders)`;
      if (s.isDirectory()) {
        const bad = walk(p);
        if (bad) return bad;
        continue;
      }
      if (!s.isFile()) return `${rel(root, p)} is not a regular file`;
      if (++files > MAX_AGENT_ROOT_FILES) return `it holds more than ${MAX_AGENT_ROOT_FILES} files`;
      bytes += s.size;
      if (bytes > MAX_AGENT_ROOT_BYTES) return `it holds more than ${MAX_AGENT_ROOT_BYTES / 1024 / 1024} MiB`;
      const why = unreadable(p);
      if (why) return `${rel(root, p)} cannot be read (${why})`;
    }
    return undefined;
  };
  return walk(root);
}

function rel(root: string, p: string): string {
  return relative(root, p) || ".";
}

/** Why a file cannot be opened for reading, or undefined. */
function unreadable(p: string): string | undefined {
  try {
    closeSync(openSync(p, constants.O_RDONLY | constants.O_NOFOLLOW));
    return undefined;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? "unreadable";
  }
}

/**
 * Copies a checked `.agent/` but its `memory/` to `dest` (made here, must not exist) as plain files any user can read: 0755 folders,
 * 0644 files (0755 where the owner could execute, so a hook stays runnable). A trial mounts the copy, never the
 * user's folder: the box sees what the trial started with even if the folder changes meanwhile, a box running in a
 * user namespace can read it whatever the folder's own modes, and the trial keeps a record of what ran. Every file
 * is opened without following links and must still be a regular file, so a link swapped in after the check is not
 * copied through.
 */
export function snapshotAgentRoot(root: string, dest: string): void {
  const copy = (from: string, to: string) => {
    mkdirSync(to, { mode: 0o755 });
    // the umask may have taken bits the box needs
    chmodSync(to, 0o755);
    for (const name of readdirSync(from).sort()) {
      if (from === root && name === TRIAL_SKIPS_DIR) continue;
      const src = join(from, name);
      const dst = join(to, name);
      const s = lstatSync(src);
      if (s.isDirectory()) {
        copy(src, dst);
        continue;
      }
      if (!s.isFile()) throw new Error(`${rel(root, src)} is not a regular file`);
      const fd = openSync(src, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        const fst = fstatSync(fd);
        if (!fst.isFile()) throw new Error(`${rel(root, src)} is not a regular file`);
        const mode = fst.mode & 0o100 ? 0o755 : 0o644;
        writeFileSync(dst, readOpenFile(fd, fst.size), { mode, flag: "wx" });
        chmodSync(dst, mode);
      } finally {
        closeSync(fd);
      }
    }
  };
  copy(root, dest);
}

/**
 * `--agent-root` checked before a job is recorded: `dir` made absolute (against the working directory) and refused
 * with `agent_root_invalid` for what {@link agentRootProblem} refuses. Returns the absolute path the job records.
 */
export function checkAgentRoot(dir: string): string {
  const abs = resolve(dir);
  const bad = agentRootProblem(abs);
  if (bad) throw new EvolveError("agent_root_invalid", `--agent-root ${dir}: ${bad}`, "give a .agent/ folder of plain files and folders (`evolve harness init DIR` writes one)");
  return abs;
}
