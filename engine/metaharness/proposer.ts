/**
 * The proposal round of Meta-Harness Adapter (issue 13 §1): one evolve trial of a task folder made for the round. Its
 * instruction is the filled round prompt; its image holds a snapshot of the filesystem D (the run's
 * `workspace/state/` and its search-set `step_NNNN/` folders, nothing of validation or test) under /work; the agent
 * is the real `codex` or `claude-code` CLI, through the gateway, in a no-network box, with the evolve binary mounted
 * so `evolve metaharness check-spec` runs there (JobConfig `agent.evolve_tools`). /work/scratch comes back as the
 * trial's artifact; the candidates in it are copied, never through a link, into the run's
 * `workspace/scratch/candidates/`, and the prompt, the CLI's stdout and the proposer's report into the step's
 * `output/`. The trial's reward (1 when /work/scratch/candidates has an entry) is a health signal only: nothing is
 * selected by it, since the candidates are evaluated by the run's next steps.
 * The run folder's paths are layout.ts's.
 */
import { chmodSync, closeSync, constants, copyFileSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync, type Stats } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Engine } from "../driver/types.ts";
import { DatasetInvalidError, importTasks } from "../dataset.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { checkAgentRequest, parseAgentOptions } from "../harness/index.ts";
import { agentSpec } from "../harness/manifest.ts";
import { driveJob } from "../job/drive.ts";
import { createJob, type JobConfig, type JobEvent } from "../job/job.ts";
import { trialDir, type Store, type TrialRecord } from "../store/index.ts";
import { readBoxBytes } from "../box/fs.ts";
import { trialPaths } from "../box/layout.ts";
import { tokenCounts } from "../trial/tokens.ts";
import { kindOf, lstatOrNone, MAX_TREE_BYTES, MAX_TREE_FILES, newBudget, readPlainFile, writeFileAtomic, type CopyBudget } from "../eval/tree.ts";
import { runPaths } from "./layout.ts";
import { templateHermit } from "./spec.ts";
import { DEFAULT_PROPOSE_PROMPT, fillPrompt, type PromptVars } from "./propose.ts";

/** The proposer's box paths: D under /work, the proposer's cwd. */
export const PROPOSER_BOX = {
  work: "/work",
  state: "/work/state",
  steps: "/work/steps",
  scratch: "/work/scratch",
  candidates: "/work/scratch/candidates",
  template: "/work/template",
  report: "/work/scratch/proposer_report.md",
} as const;

/** The base image of the proposer's box: the Debian image the agent trials build on (glibc, for both CLIs and evolve). */
export const PROPOSER_BASE_IMAGE = "debian:bookworm-slim";

/** Names never copied out of a step folder into D: a framework's held-out material, should a step hold any. */
export const HIDDEN_STEP_ENTRIES: readonly string[] = ["validation", "test"];

/** What the last collection dropped, per candidate name, beside workspace/scratch/candidates/ (a JSON array of {@link CollectProblem}). */
export const COLLECT_PROBLEMS = "collect_problems.json";

/** A step folder of the run: `step_` and at least four digits. */
const STEP_DIR = /^step_\d{4,}$/;

/** The proposer CLI's harness name for a backend. */
export function proposerAgent(backend: "codex" | "claude"): "codex" | "claude-code" {
  return backend === "codex" ? "codex" : "claude-code";
}

/** USD per million tokens, for a proposer model the gateway has no price for. */
export interface ProposerPrice {
  input: number;
  cached_input: number;
  output: number;
}

/**
 * The `--ak` options of a proposer session: the extra `args` (each `KEY=VALUE`, an option the harness declares) and
 * `web_search` set explicitly, off unless asked for — Codex's hosted search runs at the provider, past the box's
 * network policy. Refuses (`proposer_arg_invalid`) an argument that is no `KEY=VALUE` and one setting web_search
 * (the `webSearch` parameter decides it); what the harness refuses of the rest keeps the harness's own code.
 */
export function proposerOptions(backend: "codex" | "claude", args: readonly string[], webSearch: boolean): Record<string, string> {
  for (const a of args) {
    if (a.indexOf("=") <= 0 || a.startsWith("-")) {
      throw new EvolveError("proposer_arg_invalid", `proposer argument ${JSON.stringify(a)}: expected KEY=VALUE, an option of the ${proposerAgent(backend)} agent`, `see \`evolve agent show ${proposerAgent(backend)}\` for its options, e.g. reasoning_effort=medium`);
    }
    if (a.startsWith("web_search=")) {
      throw new EvolveError("proposer_arg_invalid", `proposer argument ${a}: web search is the evolver's web_search parameter, not an argument`, "set web_search = true in the evolver's params to allow it");
    }
  }
  const opts = parseAgentOptions(args);
  opts.web_search = webSearch ? (backend === "codex" ? "live" : "enabled") : "disabled";
  return opts;
}

/** What {@link writeProposalTask} makes a task of. */
export interface ProposalTaskInput {
  runDir: string;
  /** The folder to write the task into (made; must not exist or be empty). */
  dest: string;
  round: number;
  /** The filled round prompt (instruction.md). */
  instruction: string;
  /** The agent's timeout, seconds. */
  timeoutSec: number;
  /** The adapter template (host, holding `.hermit/`), copied to /work/template. */
  templateDir: string;
}

/** What went into a proposal task's D snapshot. */
export interface ProposalTaskInfo {
  /** The step folders copied (names). */
  steps: string[];
  /** Paths (relative to the run folder) left out because they were no plain file or folder. */
  skipped: string[];
}

/**
 * Writes the round's task folder at `o.dest`: `instruction.md` (the prompt), `task.toml` (no network, /work/scratch
 * as its artifact), `environment/Dockerfile` over {@link PROPOSER_BASE_IMAGE} COPYing the D snapshot into /work
 * (`state/`, `steps/step_NNNN/`, `template/`) with an empty `/work/scratch/candidates/`, and `tests/test.sh`. Only the
 * run's `workspace/state/` and its `step_NNNN/` folders are copied (a step's `validation/` or `test/` never); links
 * and special files are left out, not followed.
 */
export function writeProposalTask(o: ProposalTaskInput): ProposalTaskInfo {
  const paths = runPaths(o.runDir);
  const d = join(o.dest, "environment", "d");
  templateHermit(o.templateDir);
  mkdirSync(join(d, "state"), { recursive: true });
  mkdirSync(join(d, "steps"), { recursive: true });
  mkdirSync(join(d, "template"), { recursive: true });
  mkdirSync(join(o.dest, "tests"), { recursive: true });
  const skipped: string[] = [];
  copyPlain(paths.state, join(d, "state"), "workspace/state", skipped);
  const steps = listNames(o.runDir).filter((n) => STEP_DIR.test(n) && lstatOrNone(join(o.runDir, n))?.isDirectory());
  for (const s of steps) copyPlain(join(o.runDir, s), join(d, "steps", s), s, skipped, HIDDEN_STEP_ENTRIES);
  copyPlain(o.templateDir, join(d, "template"), "template", skipped);
  writeFileSync(join(o.dest, "instruction.md"), o.instruction);
  writeFileSync(
    join(o.dest, "task.toml"),
    [
      'schema_version = "1.3"',
      "# a Meta-Harness Adapter proposal round (engine/metaharness/proposer.ts): the proposer reads D under /work and",
      "# writes its candidates into /work/scratch/candidates; its reward is not used for selection",
      'artifacts = ["/work/scratch"]',
      "",
      "[task]",
      `name = "evolve-metaharness/propose-round-${String(o.round).padStart(4, "0")}"`,
      "",
      "[agent]",
      `timeout_sec = ${Math.max(1, Math.round(o.timeoutSec))}`,
      "",
      "[verifier]",
      "timeout_sec = 60",
      "",
      "[environment]",
      'network_mode = "no-network"',
      "",
    ].join("\n"),
  );
  writeFileSync(
    join(o.dest, "environment", "Dockerfile"),
    [
      `FROM ${PROPOSER_BASE_IMAGE}`,
      "# D: the run's state/ and its search-set steps, a copy (the proposer's writes never reach the run)",
      `COPY d/ ${PROPOSER_BOX.work}/`,
      `RUN mkdir -p ${PROPOSER_BOX.candidates}`,
      `WORKDIR ${PROPOSER_BOX.work}`,
      "",
    ].join("\n"),
  );
  writeFileSync(
    join(o.dest, "tests", "test.sh"),
    [
      "#!/bin/bash",
      "# a health signal only: the candidates are evaluated by the run's next steps, never selected by this reward",
      `if [ -n "$(ls -A ${PROPOSER_BOX.candidates} 2>/dev/null)" ]; then`,
      "  echo 1 > /logs/verifier/reward.txt",
      "else",
      `  echo "no candidate in ${PROPOSER_BOX.candidates}"`,
      "  echo 0 > /logs/verifier/reward.txt",
      "fi",
      "",
    ].join("\n"),
  );
  chmodSync(join(o.dest, "tests", "test.sh"), 0o755);
  return { steps, skipped };
}

function listNames(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/**
 * Copies the plain files and folders of `src` into `dst` (no size limit: D is the run's own record), leaving out
 * links and special files (recorded in `skipped` as `rel/…`) and, at the top, the names in `hide`.
 */
function copyPlain(src: string, dst: string, rel: string, skipped: string[], hide: readonly string[] = []): void {
  const top = lstatOrNone(src);
  if (!top) return;
  if (!top.isDirectory()) {
    skipped.push(rel);
    return;
  }
  mkdirSync(dst, { recursive: true });
  for (const name of listNames(src)) {
    if (hide.includes(name)) continue;
    const from = join(src, name);
    const to = join(dst, name);
    const st: Stats = lstatSync(from);
    if (st.isDirectory()) copyPlain(from, to, `${rel}/${name}`, skipped);
    else if (st.isFile()) {
      copyFileSync(from, to);
      chmodSync(to, st.mode & 0o755);
    } else skipped.push(`${rel}/${name}`);
  }
}

/** One candidate the collection could not hand to the state machine as it was, and why. */
export interface CollectProblem {
  name: string;
  problem: string;
}

/** The longest path (relative to its candidate, in bytes) a collected candidate may hold: deeper → not collected. */
export const MAX_CANDIDATE_PATH = 1024;

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * `name` inside the folder open as `fd`, as a path the kernel resolves from that descriptor (the openat of a
 * runtime that has none): whatever the folder's full path is, and whatever links its parents became, the lookup
 * starts at the folder the descriptor holds, and the path stays short however deep the folder is.
 */
function at(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

/** Opens the folder `name` inside `fd` (O_NOFOLLOW: a link there is refused, never followed); undefined when absent. */
function openDirAt(fd: number, name: string, shownAs: string): number | undefined {
  try {
    return openSync(at(fd, name), DIR_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP" || code === "ENOTDIR") {
      const st = lstatSync(at(fd, name));
      throw new EvolveError("agent_dir_unsafe", `${shownAs} is ${st.isSymbolicLink() ? "a symbolic link" : kindOf(st, "not a folder")}; nothing under it was collected`, "the proposer's output is rejected; nothing to do");
    }
    throw e;
  }
}

/**
 * Opens the folder `rel` (`/`-separated, "" for the root itself) under the evolve-owned folder `root`, one component
 * at a time, each relative to the descriptor of the one before and none a link: a box that made a parent of what is
 * collected a link (`ln -s <host folder> /logs/artifacts/work`) is refused instead of having evolve read the host
 * folder. Undefined when a component is absent; the caller closes the descriptor.
 */
export function openBoxDir(root: string, rel: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(root, DIR_FLAGS);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  let walked = "";
  try {
    for (const part of rel.split("/").filter((x) => x !== "" && x !== ".")) {
      if (part === "..") throw new EvolveError("internal", `openBoxDir: ${rel} leaves its root`, "a bug: report it");
      walked = walked ? `${walked}/${part}` : part;
      const next = openDirAt(fd, part, walked);
      closeSync(fd);
      fd = -1;
      if (next === undefined) return undefined;
      fd = next;
    }
    return fd;
  } catch (e) {
    if (fd >= 0) closeSync(fd);
    throw e;
  }
}

function listFd(fd: number): string[] {
  return readdirSync(at(fd, ".")).sort();
}

/**
 * Copies each entry of the collected `candidates/` folder — `rel` under the trial's evolve-owned `root`, walked by
 * {@link openBoxDir}, so a link anywhere on the way collects nothing — into `dest`, which is emptied first: the
 * round's candidates replace the last round's. Every read is relative to an open folder's descriptor, never a full
 * path, so no link in a parent can redirect it and no depth can make it too long. A link inside a candidate is made
 * again as the same link, never followed, so the state machine (ingestRound's check_spec) rejects the candidate with
 * its own problem; a plain file entry is copied as it is for the same reason. What cannot be kept as it was — a
 * FIFO, socket or device, a path deeper than {@link MAX_CANDIDATE_PATH}, or more than a candidate may hold — drops
 * the candidate: it is returned as a problem (and written to workspace/scratch/collect_problems.json by runProposer),
 * and the rest are collected. A link on the way to `candidates/` is one problem named `candidates`. Returns the names
 * copied.
 */
export function collectCandidates(root: string, rel: string, dest: string): { names: string[]; problems: CollectProblem[] } {
  rmSync(dest, { recursive: true, force: true });
  mkdirSync(dest, { recursive: true });
  const names: string[] = [];
  const problems: CollectProblem[] = [];
  let top: number | undefined;
  try {
    top = openBoxDir(root, rel);
  } catch (e) {
    if (!(e instanceof EvolveError)) throw e;
    problems.push({ name: "candidates", problem: e.message });
    return { names, problems };
  }
  if (top === undefined) return { names, problems };
  try {
    for (const name of listFd(top)) {
      try {
        copyKeepingLinks(top, name, join(dest, name), "", newBudget());
        names.push(name);
      } catch (e) {
        rmSync(join(dest, name), { recursive: true, force: true });
        if (!(e instanceof EvolveError) && (e as NodeJS.ErrnoException).code !== "ENAMETOOLONG") throw e;
        // said of the candidate (the caller prefixes its name), never of the trial folder it was read from
        const problem = !(e instanceof EvolveError)
          ? `holds a path too long to copy, so it was not collected`
          : e.code === "agent_dir_too_large"
            ? `holds more than ${MAX_TREE_FILES} files or ${MAX_TREE_BYTES / 1024 / 1024} MiB, so it was not collected`
            : e.message;
        problems.push({ name, problem });
      }
    }
  } finally {
    closeSync(top);
  }
  return { names, problems };
}

/**
 * Copies the entry `name` of the folder open as `dir` to `dst` as it is: folders, plain files (mode kept), links as
 * links; anything else, or a path (`rel`) over {@link MAX_CANDIDATE_PATH} → EvolveError.
 */
function copyKeepingLinks(dir: number, name: string, dst: string, parent: string, budget: CopyBudget): void {
  const rel = parent ? `${parent}/${name}` : name;
  // `rel` names the entry inside its candidate; the candidate's own name is the caller's
  const inner = rel.slice(rel.indexOf("/") + 1);
  if (Buffer.byteLength(rel) > MAX_CANDIDATE_PATH) {
    throw new EvolveError("agent_dir_unsafe", `holds a path deeper than ${MAX_CANDIDATE_PATH} bytes (${inner.slice(0, 60)}…); a candidate holds a shallow tree of plain files and folders, so it was not collected`, "the proposer's candidate is rejected; nothing to do");
  }
  const st = lstatSync(at(dir, name));
  const where = rel.includes("/") ? ` at ${inner}` : "";
  if (st.isSymbolicLink()) symlinkSync(readlinkSync(at(dir, name)), dst);
  else if (st.isDirectory()) {
    const fd = openDirAt(dir, name, rel);
    if (fd === undefined) return;
    try {
      mkdirSync(dst);
      for (const n of listFd(fd)) copyKeepingLinks(fd, n, join(dst, n), rel, budget);
    } finally {
      closeSync(fd);
    }
  } else if (st.isFile()) {
    const { data, mode } = readPlainFile(at(dir, name), budget);
    writeFileAtomic(dst, data, mode);
  } else {
    const what = st.isFIFO() ? "a FIFO" : st.isSocket() ? "a socket" : "a device";
    throw new EvolveError("agent_dir_unsafe", `${where ? `holds ${what}${where}` : `is ${what}`}; a candidate holds only plain files and folders, so it was not collected`, "the proposer's candidate is rejected; nothing to do");
  }
}

/**
 * The plain file `name` in the folder `rel` under `root` (walked by {@link openBoxDir}), within a copy budget;
 * undefined when it or a folder on its way is absent, a link or not a plain file.
 */
export function readBoxPlain(root: string, rel: string, name: string): { data: Buffer; mode: number } | undefined {
  let fd: number | undefined;
  try {
    fd = openBoxDir(root, rel);
  } catch (e) {
    if (e instanceof EvolveError) return undefined;
    throw e;
  }
  if (fd === undefined) return undefined;
  try {
    if (!lstatOrNone(at(fd, name))?.isFile()) return undefined;
    return readPlainFile(at(fd, name), newBudget());
  } catch (e) {
    if (e instanceof EvolveError) return undefined;
    throw e;
  } finally {
    closeSync(fd);
  }
}

/**
 * The USD cost of a proposer trial: the gateway's final price when every call had one, else, with `price`, its
 * tokens × the price per million (input and cache writes at the input price, cache reads at cached_input), else what
 * the gateway priced (a lower bound). `source` says which.
 */
export function proposerCost(t: Pick<TrialRecord, "spend" | "tokens">, price?: ProposerPrice): { usd: number; source: "gateway" | "price" | "lower_bound" } {
  const final = t.spend?.final_usd;
  if (final !== null && final !== undefined) return { usd: final, source: "gateway" };
  if (price) {
    const k = tokenCounts(t.tokens) ?? { prompt: 0, cached_read: 0, cache_write: 0, output: 0, reasoning: 0 };
    // the prompt but its cache reads (uncached input and cache writes) at the input price
    const usd = ((k.prompt - k.cached_read) * price.input + k.cached_read * price.cached_input + k.output * price.output) / 1e6;
    return { usd, source: "price" };
  }
  return { usd: t.spend?.live_usd ?? 0, source: "lower_bound" };
}

/** What {@link runProposer} runs with. */
export interface ProposerOptions {
  store: Store;
  home: string;
  /** Opens the container engine (the job closes it). */
  engine: () => Promise<Engine>;
  /** The run folder (`workspace/state/`, `step_NNNN/`). */
  runDir: string;
  round: number;
  /** The step this round belongs to: its `output/` receives the round's records. */
  step: number;
  k: number;
  backend: "codex" | "claude";
  /** `provider/model` for the CLI (`-m`). */
  model: string;
  /** Extra `KEY=VALUE` options of the CLI's harness (`--ak`). */
  args?: readonly string[];
  webSearch?: boolean;
  /** The round prompt's text (PROPOSE.md); absent: {@link DEFAULT_PROPOSE_PROMPT}. */
  prompt?: string;
  price?: ProposerPrice;
  /** The adapter template (host folder holding `.hermit/`), shown to the proposer at /work/template for its guide and check-spec. */
  templateDir: string;
  /** The session's timeout, seconds (default 3600). */
  timeoutSec?: number;
  signal?: AbortSignal;
  onEvent?: (e: JobEvent) => void;
  warn?: (message: string) => void;
}

/** What a proposal round left. */
export interface ProposerResult {
  trialId: string;
  jobId: string;
  /** The trial's status (SCORED when the session ran and the health check ran). */
  status: TrialRecord["status"];
  /** The CLI's exit code (null: it was cut off, or never ran). */
  exitCode: number | null;
  /** The run's `workspace/scratch/candidates/`, holding the copied candidates. */
  candidatesDir: string;
  candidates: string[];
  problems: CollectProblem[];
  /** The CLI's stdout as copied into the step's output (`proposer-session.jsonl`); absent when it wrote none. */
  sessionLog?: string;
  /** `proposer_report.md` in the step's output, when the proposer wrote one. */
  report?: string;
  cost_usd: number;
  cost_source: "gateway" | "price" | "lower_bound";
  tokens: Record<string, number>;
}

/** The most bytes of the CLI's stdout kept as the session log. */
const SESSION_LIMIT = 256 * 1024 * 1024;

/**
 * Runs one proposal round: fills the prompt, writes and imports the round's task, records a one-trial job of the
 * proposer CLI (`evolve_tools` on, web search as asked) and drives it to its end, then copies the candidates and the
 * round's records into the run folder. Refuses before anything is recorded: an unknown prompt placeholder
 * (`propose_placeholder_unknown`), a bad argument (`proposer_arg_invalid`, or the harness's own code), a k below 1
 * (`usage`). A session that failed still returns (its status and exit code say so) with whatever it wrote.
 */
export async function runProposer(o: ProposerOptions): Promise<ProposerResult> {
  if (!Number.isInteger(o.k) || o.k < 1) throw new EvolveError("usage", `k must be a positive integer, got ${o.k}`, "e.g. k = 2");
  const agent = proposerAgent(o.backend);
  const kwargs = proposerOptions(o.backend, o.args ?? [], o.webSearch ?? false);
  checkAgentRequest(agent, o.model, kwargs);
  const vars: PromptVars = { round: o.round, k: o.k, state_dir: PROPOSER_BOX.state, scratch_dir: PROPOSER_BOX.scratch, steps_dir: PROPOSER_BOX.steps, template_dir: PROPOSER_BOX.template };
  const instruction = fillPrompt(o.prompt ?? DEFAULT_PROPOSE_PROMPT, vars);
  const paths = runPaths(o.runDir);
  const out = paths.stepOutput(o.step);
  mkdirSync(out.dir, { recursive: true });
  // a round run again (a resumed run) must not show an earlier attempt's session or report as its own
  for (const f of [out.proposerSession, out.proposerReport]) rmSync(f, { force: true });
  writeFileAtomic(out.proposerPrompt, Buffer.from(instruction), 0o644);

  const taskDir = mkdtempSync(join(tmpdir(), "evolve-propose-"));
  let task: { name: string; digest: string };
  try {
    writeProposalTask({ runDir: o.runDir, dest: taskDir, round: o.round, instruction, timeoutSec: o.timeoutSec ?? 3600, templateDir: o.templateDir });
    try {
      task = (await importTasks(o.store, o.home, taskDir, { secrets: new Set() })).tasks[0];
    } catch (e) {
      if (e instanceof DatasetInvalidError) throw new EvolveError("internal", `the proposal round's task is invalid: ${firstLine(e.message)}`, "a bug: report it with the run folder");
      throw e;
    }
  } finally {
    rmSync(taskDir, { recursive: true, force: true });
  }
  const config: JobConfig = {
    kind: "run",
    name: `metaharness propose round ${o.round}`,
    agent: { name: agent, model: o.model, kwargs, evolve_tools: true },
    attempts: 1,
    concurrency: 1,
    timeout_multiplier: 1,
    secret_names: [],
    force_build: false,
    max_retries: 1,
    source: { kind: "path", path: o.runDir },
    tasks: [{ name: task.name, digest: task.digest }],
  };
  const job = createJob(o.store, config);
  const engine = await o.engine();
  const trials = await driveJob({ store: o.store, engine, home: o.home, jobId: job.id, secrets: {}, signal: o.signal, onEvent: o.onEvent, warn: o.warn });
  const trial = trials[0];
  const dir = trialDir(o.home, trial.id);
  const tp = trialPaths(dir);
  // walked from the trial's own artifacts folder without following a link anywhere: the box wrote everything below it
  const scratch = PROPOSER_BOX.scratch.slice(1);
  const { names, problems } = collectCandidates(tp.artifacts, `${scratch}/candidates`, paths.scratchCandidates);
  writeFileAtomic(join(paths.scratch, COLLECT_PROBLEMS), Buffer.from(JSON.stringify(problems, null, 2) + "\n"), 0o644);

  let sessionLog: string | undefined;
  const stdoutName = agentSpec(agent, o.home)?.stdoutName;
  if (stdoutName) {
    const bytes = await readBoxBytes(tp.agent, join(tp.agent, stdoutName), { limit: SESSION_LIMIT }).catch(() => undefined);
    if (bytes) {
      sessionLog = out.proposerSession;
      writeFileAtomic(sessionLog, bytes, 0o644);
    }
  }
  let report: string | undefined;
  const reportFile = readBoxPlain(tp.artifacts, scratch, "proposer_report.md");
  if (reportFile) {
    report = out.proposerReport;
    writeFileAtomic(report, reportFile.data, 0o644);
  }
  const cost = proposerCost(trial, o.price);
  return {
    trialId: trial.id,
    jobId: job.id,
    status: trial.status,
    exitCode: trial.agent_exit?.exit_code ?? null,
    candidatesDir: paths.scratchCandidates,
    candidates: names,
    problems,
    ...(sessionLog !== undefined ? { sessionLog } : {}),
    ...(report !== undefined ? { report } : {}),
    cost_usd: cost.usd,
    cost_source: cost.source,
    tokens: trial.tokens ?? {},
  };
}
