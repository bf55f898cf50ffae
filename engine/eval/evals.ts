/**
 * Task cards (`evolve/evals/*.json`), the runner that says how one card runs against an overlay `.agent/`
 * (`evolve/runner.json`), and the cards {@link Evaluator}: each card run on the host, its output checked, an
 * {@link Attempt} recorded with its log. A card is a smoke-sized task: utilities are only as good as the cards.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { appendFileSync, closeSync, constants, createWriteStream, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, writeSync, type WriteStream } from "node:fs";
import { dirname, join, relative } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { agentEnv } from "../../gateway/credentials.ts";
import { Redactor } from "../../gateway/redact.ts";
import { AGENT_PATHS } from "../conductor/layout.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { projectPaths } from "./project.ts";
import type { Attempt, CardCheck, Evaluator, EvaluatorRun, RunnerConfig, TaskCard } from "./types.ts";

/** The largest card file read (bytes): a card is a prompt and a check, not a data set. */
export const CARD_MAX_BYTES = 256 * 1024;
/** The largest runner.json read (bytes). */
export const RUNNER_MAX_BYTES = 64 * 1024;
/** TASK_OUTPUT is cut to this many bytes (it travels in an environment variable, which Linux caps at 128 KiB). */
export const OUTPUT_MAX_BYTES = 64 * 1024;
/** An attempt's log keeps this many bytes of the agent's stdout and stderr; the rest is dropped with a note. */
export const LOG_MAX_BYTES = 4 * 1024 * 1024;
/** Seconds one card may run when runner.json does not say (RunnerConfig.timeout_sec). */
export const DEFAULT_CARD_TIMEOUT_S = 300;
/** Seconds a `command` check may run when the card does not say. */
export const DEFAULT_CHECK_TIMEOUT_S = 30;

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const CARD_KEYS = new Set(["id", "domain", "prompt", "check"]);
const RUNNER_KEYS = new Set(["agent", "model", "command", "timeout_sec", "concurrency"]);

function cardError(file: string, field: string, why: string): EvolveError {
  return new EvolveError("card_invalid", `${file}: ${field} ${why}`, "fix the card (fields: id, domain, prompt, check {contains | regex [flags] | command [timeout_sec]})");
}

/** Reads a small regular file without following a link, refusing anything over `max` bytes. */
function readSmallFile(path: string, max: number, refuse: (why: string) => EvolveError): string {
  const st = lstatSync(path);
  if (st.isSymbolicLink()) throw refuse("is a symbolic link; cards and runner.json are read as plain files only");
  if (!st.isFile()) throw refuse("is not a regular file");
  // O_NOFOLLOW | O_NONBLOCK: a file swapped for a link or a FIFO after the lstat is refused instead of followed or waited on
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const fst = fstatSync(fd);
    if (!fst.isFile()) throw refuse("is not a regular file");
    if (fst.size > max) throw refuse(`is ${fst.size} bytes, over the ${max}-byte limit`);
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

function validateCheck(file: string, check: unknown): CardCheck {
  if (typeof check !== "object" || check === null || Array.isArray(check)) throw cardError(file, "check", "must be an object");
  const c = check as Record<string, unknown>;
  const kinds = ["contains", "regex", "command"].filter((k) => k in c);
  if (kinds.length !== 1) throw cardError(file, "check", "must have exactly one of contains, regex, command");
  const kind = kinds[0];
  const allowed = kind === "regex" ? ["regex", "flags"] : kind === "command" ? ["command", "timeout_sec"] : ["contains"];
  for (const k of Object.keys(c)) if (!allowed.includes(k)) throw cardError(file, `check.${k}`, `is not a field of a ${kind} check`);
  const v = c[kind];
  if (typeof v !== "string" || v === "") throw cardError(file, `check.${kind}`, "must be a non-empty string");
  if (kind === "regex") {
    if (c.flags !== undefined && (typeof c.flags !== "string" || !/^[gimsuy]*$/.test(c.flags))) throw cardError(file, "check.flags", "must be a string of regex flags (gimsuy)");
    try {
      new RegExp(v, (c.flags as string | undefined) ?? "");
    } catch (e) {
      throw cardError(file, "check.regex", `is not a valid regular expression (${firstLine(e)})`);
    }
    return c.flags === undefined ? { regex: v } : { regex: v, flags: c.flags as string };
  }
  if (kind === "command") {
    const t = c.timeout_sec;
    if (t !== undefined && (typeof t !== "number" || !(t > 0) || t > 3600)) throw cardError(file, "check.timeout_sec", "must be a number of seconds in (0, 3600]");
    return t === undefined ? { command: v } : { command: v, timeout_sec: t as number };
  }
  return { contains: v };
}

/** Validates one parsed card; `file` names it in errors. */
export function validateCard(file: string, raw: unknown): TaskCard {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw cardError(file, "the card", "must be a JSON object");
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!CARD_KEYS.has(k)) throw cardError(file, k, "is not a card field");
  if (typeof o.id !== "string" || !ID_RE.test(o.id)) throw cardError(file, "id", "must be 1-128 letters, digits, . _ - (starting with a letter or digit)");
  if (typeof o.domain !== "string" || o.domain.trim() === "") throw cardError(file, "domain", "must be a non-empty string");
  if (typeof o.prompt !== "string" || o.prompt.trim() === "") throw cardError(file, "prompt", "must be a non-empty string");
  if (o.check === undefined) throw cardError(file, "check", "is missing");
  return { id: o.id, domain: o.domain, prompt: o.prompt, check: validateCheck(file, o.check) };
}

/**
 * Every card of `evolve/evals/*.json` (or of `dir`, e.g. a held-out folder), in id order. A bad card names its file
 * and field (`card_invalid`), two cards with one id are `card_duplicate`; a link or an oversized file is refused.
 * An absent or empty folder is `cards_none`.
 */
export function loadCards(project: string, dir = projectPaths(project).evals): TaskCard[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".json")).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") names = [];
    else throw new EvolveError("card_invalid", `cannot read the cards folder ${dir}: ${firstLine(e)}`, "make it a readable folder of <id>.json cards");
  }
  if (names.length === 0) throw new EvolveError("cards_none", `no task cards in ${dir}`, 'write at least three cards like {"id":"t1","domain":"math","prompt":"…","check":{"contains":"42"}}');
  const seen = new Map<string, string>();
  const cards: TaskCard[] = [];
  for (const name of names) {
    const file = join(dir, name);
    const text = readSmallFile(file, CARD_MAX_BYTES, (why) => cardError(file, "the file", why));
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw cardError(file, "the file", `is not JSON (${firstLine(e)})`);
    }
    const card = validateCard(file, raw);
    const other = seen.get(card.id);
    if (other) throw new EvolveError("card_duplicate", `card id ${card.id} is in both ${other} and ${file}`, "give every card its own id");
    seen.set(card.id, file);
    cards.push(card);
  }
  return cards.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * `sha256:<hex>` of a set of tasks as (name, content digest) pairs, in name order: the identity of a search set,
 * the same for the same tasks wherever they are, and another for any task added, removed or changed.
 */
export function taskSetDigest(tasks: readonly { name: string; digest: string }[]): string {
  const h = createHash("sha256");
  for (const t of [...tasks].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) h.update(`${t.name}\0${t.digest}\n`);
  return `sha256:${h.digest("hex")}`;
}

/** The {@link taskSetDigest} of task cards: each card's content (id, domain, prompt, check) as canonical JSON. */
export function cardsDigest(cards: readonly TaskCard[]): string {
  return taskSetDigest(cards.map((c) => ({ name: c.id, digest: createHash("sha256").update(JSON.stringify([c.id, c.domain, c.prompt, c.check])).digest("hex") })));
}

function runnerError(file: string, why: string): EvolveError {
  return new EvolveError("runner_invalid", `${file}: ${why}`, 'e.g. {"agent":"conductor","model":"anthropic/claude-sonnet-4-5"} or {"agent":"command","command":"my-agent --root {agent_root} {prompt}"}');
}

/** Validates a parsed runner.json; `file` names it in errors. */
export function validateRunner(file: string, raw: unknown): RunnerConfig {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw runnerError(file, "must be a JSON object");
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!RUNNER_KEYS.has(k)) throw runnerError(file, `${k} is not a runner field`);
  const agent = o.agent ?? "conductor";
  if (agent !== "conductor" && agent !== "command") throw runnerError(file, `agent must be "conductor" or "command", got ${JSON.stringify(agent)}`);
  const out: RunnerConfig = { agent };
  if (o.model !== undefined) {
    if (typeof o.model !== "string" || !/^[^/\s]+\/\S+$/.test(o.model)) throw runnerError(file, "model must be provider/model");
    out.model = o.model;
  }
  if (agent === "command") {
    if (typeof o.command !== "string" || o.command.trim() === "") throw runnerError(file, 'agent "command" needs a non-empty command');
    out.command = o.command;
  } else if (o.command !== undefined) throw runnerError(file, 'command is only for agent "command"');
  if (o.timeout_sec !== undefined) {
    if (typeof o.timeout_sec !== "number" || !(o.timeout_sec > 0) || o.timeout_sec > 86_400) throw runnerError(file, "timeout_sec must be a number of seconds in (0, 86400]");
    out.timeout_sec = o.timeout_sec;
  }
  if (o.concurrency !== undefined) {
    // cards run one at a time so each attempt's gateway spend is exactly its own; more is refused rather than ignored
    if (o.concurrency !== 1) throw runnerError(file, "concurrency must be 1: cards run one at a time so each attempt's spend is attributed exactly");
    out.concurrency = 1;
  }
  return out;
}

/** `evolve/runner.json`, validated (`runner_invalid`); absent, the conductor (which then needs a model). */
export function loadRunner(project: string): RunnerConfig {
  const file = projectPaths(project).runner;
  let text: string;
  try {
    text = readSmallFile(file, RUNNER_MAX_BYTES, (why) => runnerError(file, why));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { agent: "conductor" };
    throw e;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw runnerError(file, `is not JSON (${firstLine(e)})`);
  }
  return validateRunner(file, raw);
}

/** Single-quotes `s` for sh: nothing inside is expanded. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The runner's command with `{agent_root}` and `{prompt}` replaced by their shell-quoted values, in one pass (so a
 * prompt that itself says `{agent_root}` is not replaced again). Placeholders are written bare, not inside quotes.
 */
export function fillTemplate(template: string, values: { agent_root: string; prompt: string }): string {
  return template.replace(/\{(agent_root|prompt)\}/g, (_, k: "agent_root" | "prompt") => shellQuote(values[k]));
}

/** What a check decided: `error` set when it could not decide (the attempt is then invalid). */
export interface CheckResult {
  passed: boolean;
  detail: string;
  error?: string;
}

/** What one `sh -c` run gave. */
interface ShellRun {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  aborted: boolean;
  launchError?: string;
  stdout: Buffer;
  stdoutTruncated: boolean;
}

/**
 * Runs `sh -c command` in its own process group, killed whole (TERM, then KILL) on timeout or abort, so a child
 * that ignores SIGTERM or outlives its shell is not left behind. stdout is kept up to `maxStdout` bytes; every
 * chunk of both streams also goes to `log` when given (up to LOG_MAX_BYTES).
 */
async function runShell(command: string, o: { cwd: string; env: Record<string, string | undefined>; timeoutMs: number; signal?: AbortSignal; maxStdout: number; log?: AttemptLog; onChunk?: (s: string) => void }): Promise<ShellRun> {
  return new Promise((done) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let truncated = false;
    let logged = 0;
    let timedOut = false;
    let aborted = false;
    let settled = false;
    const child = spawn("sh", ["-c", command], { cwd: o.cwd, env: o.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      const hard = setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {}
      }, 2000);
      hard.unref?.();
    };
    const toLog = (b: Buffer) => {
      o.onChunk?.(b.toString("utf8"));
      if (!o.log || logged >= LOG_MAX_BYTES) return;
      const part = b.subarray(0, LOG_MAX_BYTES - logged);
      logged += part.length;
      o.log.write(part);
      if (logged >= LOG_MAX_BYTES) o.log.write(`\n[evolve: log cut at ${LOG_MAX_BYTES} bytes]\n`);
    };
    child.stdout.on("data", (b: Buffer) => {
      toLog(b);
      if (kept < o.maxStdout) {
        const part = b.subarray(0, o.maxStdout - kept);
        chunks.push(part);
        kept += part.length;
        if (part.length < b.length) truncated = true;
      } else truncated = true;
    });
    child.stderr.on("data", toLog);
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, o.timeoutMs);
    const onAbort = () => {
      aborted = true;
      killGroup();
    };
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const finish = (r: Partial<ShellRun>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      // the shell may be gone while a grandchild still holds a pipe: the group goes with it
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {}
      }
      done({ exitCode: null, signal: null, timedOut, aborted, stdout: Buffer.concat(chunks), stdoutTruncated: truncated, ...r });
    };
    // once the shell is gone the attempt is over: whatever it left in its group (a daemon holding the pipe, a child
    // that ignores SIGTERM) is killed, so the pipes close and the run ends now rather than when they please
    child.on("exit", () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    });
    child.on("error", (e) => finish({ launchError: firstLine(e) }));
    child.on("close", (code, sig) => finish({ exitCode: code, signal: sig }));
  });
}

/**
 * What running task cards on the host means, printed by every command that does it (`--on-host`): said once here
 * so `harness eval|screen|round` and `metaharness run --cards` say the same.
 */
export const HOST_MODE_NOTICE =
  "--on-host: the cards run on this machine, not in a box: the model's shell commands (the conductor's shell tool, a command runner) and each card's check command run as you, with your files and your network. They get no provider key in their environment, and every key is redacted from the logs evolve writes, but a process of yours can read what you can (gateway.toml, ~/.ssh, /proc/<evolve pid>/environ). Without --on-host the cards run in podman boxes (the conductor, no network but the gateway, no provider key).";

/**
 * The variables of evolve's own environment a card's run and its check inherit: what a shell needs to find its
 * programs, its home and its locale, nothing else. An allowlist, not a denylist: evolve's environment may hold
 * provider keys under any name (`api_key_env` names any variable) and the gateway's own settings, and a model's
 * shell command on the host must find none of them. What the run needs of the gateway is added by the caller.
 */
export const CARD_ENV_KEEP: readonly string[] = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"];

/** {@link CARD_ENV_KEEP} (and `LC_*`) of `env`, with `extra` on top: the whole environment of a card's process. */
export function cardEnv(extra: Record<string, string>, env: Record<string, string | undefined> = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && (CARD_ENV_KEEP.includes(k) || k.startsWith("LC_"))) out[k] = v;
  return { ...out, ...extra };
}

/**
 * `text` with every value of `values` replaced by `[redacted]`: the gateway's own {@link Redactor} (one rule for what
 * is too short to be a secret, longest first, the URL- and JSON-escaped forms too).
 */
export function redactValues(text: string, values: readonly string[]): string {
  return new Redactor(values).text(text);
}

/** Where an attempt's log goes: a card runner writes text (or a command's raw output) into it. */
export interface AttemptLog {
  write(chunk: string | Buffer): unknown;
}

/**
 * An attempt's log that never puts a secret on disk, even for a moment: each write is redacted before it reaches
 * the file, and the last (longest secret − 1) characters are held back until the next write or the end, so a key
 * split across two chunks of a command's output is still caught. A run killed mid-way leaves no key in its log.
 */
class RedactedLog implements AttemptLog {
  private held = "";
  private readonly hold: number;
  private readonly decoder = new StringDecoder("utf8");
  private readonly redactor: Redactor;
  constructor(
    private readonly out: WriteStream,
    values: readonly string[],
  ) {
    this.redactor = new Redactor(values);
    this.hold = Math.max(0, this.redactor.longest - 1);
  }
  write(chunk: string | Buffer): boolean {
    const text = this.held + (typeof chunk === "string" ? chunk : this.decoder.write(chunk));
    const safe = this.redactor.text(text);
    const cut = Math.max(0, safe.length - this.hold);
    this.held = safe.slice(cut);
    return cut > 0 ? this.out.write(safe.slice(0, cut)) : true;
  }
  /** Writes what was held back (redacted) and closes the file. */
  end(): Promise<void> {
    const rest = this.redactor.text(this.held + this.decoder.end());
    this.held = "";
    return new Promise<void>((done) => this.out.end(rest, done));
  }
}

/**
 * Checks `output` against the card: `contains` (a substring), `regex` (a match), or `command` (`sh -c` on the host
 * with TASK_OUTPUT and TASK_ID in its environment, in `cwd`; exit 0 passes; a timeout kills its process group and
 * is an `error`: the check could not decide).
 */
export async function checkCard(card: TaskCard, output: string, o: { signal?: AbortSignal; cwd?: string } = {}): Promise<CheckResult> {
  const c = card.check;
  if ("contains" in c) {
    const passed = output.includes(c.contains);
    return { passed, detail: passed ? `output contains ${JSON.stringify(c.contains)}` : `output lacks ${JSON.stringify(c.contains)}` };
  }
  if ("regex" in c) {
    const passed = new RegExp(c.regex, c.flags ?? "").test(output);
    return { passed, detail: passed ? `output matches /${c.regex}/` : `output does not match /${c.regex}/` };
  }
  const timeoutSec = c.timeout_sec ?? DEFAULT_CHECK_TIMEOUT_S;
  const r = await runShell(c.command, {
    cwd: o.cwd ?? process.cwd(),
    // the check is the card author's command, but it reads the model's output: it gets no key of evolve's either
    env: cardEnv({ TASK_OUTPUT: output, TASK_ID: card.id }),
    timeoutMs: timeoutSec * 1000,
    signal: o.signal,
    maxStdout: 4096,
  });
  if (r.aborted) o.signal?.throwIfAborted();
  if (r.launchError) return { passed: false, detail: "check did not start", error: `check command did not start: ${r.launchError}` };
  if (r.timedOut) return { passed: false, detail: "check timed out", error: `check command ran past ${timeoutSec}s` };
  if (r.exitCode === null) return { passed: false, detail: "check killed", error: `check command was killed by ${r.signal}` };
  return { passed: r.exitCode === 0, detail: `check command exited ${r.exitCode}` };
}

/**
 * The gateway a cards evaluator's agents reach their model through (local-gateway.ts opens one):
 * its URL and key, and the USD it has metered so far, so an attempt's spend is the difference across it.
 */
export interface CardsGateway {
  url: string;
  key: string;
  /** Total metered spend so far (USD). */
  spent(): number;
  /** Resolves once every call answered so far is metered (calls are metered after their response ends). */
  settle?(): Promise<void>;
  /**
   * Every credential a card's log must never show: the gateway's own key and every provider key evolve could send
   * upstream or holds in its environment (a host-mode run can read gateway.toml; what it prints is redacted).
   */
  secrets?(): string[];
  /**
   * Starts an attempt (cards run one at a time): `modelUnavailable()` then says, from the gateway's own record of
   * the calls made since, why the attempt never reached its model (gateway/meter.ts modelUnavailable, the rule a
   * trial settles ModelUnavailableError by), or undefined when it did or made no call.
   */
  attempt(): {
    modelUnavailable(): string | undefined;
    /**
     * The first refusal of a call since by a budget (the user's credits, the team's month, the global cap: the local
     * gateway sets no cap of the attempt's own), which a trial settles BUDGET: no score either.
     */
    budgetRefusal(): string | undefined;
  };
}

/** Runs one card with the conductor (engine/conductor): set once the conductor is built in. */
export type ConductorCardRunner = (o: {
  card: TaskCard;
  agentRoot: string;
  workdir: string;
  model: string;
  gateway: CardsGateway;
  timeoutMs: number;
  signal?: AbortSignal;
  /** The attempt's log, redacted as it is written. */
  log: AttemptLog;
  /** The whole environment of the conductor's shell commands ({@link cardEnv}: no key of evolve's). */
  env: Record<string, string>;
  /** Redacts every credential of {@link CardsGateway.secrets} from text the runner keeps (its episode). */
  redact: (text: string) => string;
}) => Promise<{
  output: string;
  outcome: string;
  exitCode: number | null;
  timedOut: boolean;
  error?: string;
  /** Records the run's episode in the overlay's memory once the check has scored it (null: invalid, unscored). */
  record?: (score: number | null) => void | Promise<void>;
}>;

/** Options of {@link cardsEvaluator}. */
export interface CardsEvaluatorOptions {
  project: string;
  cards: TaskCard[];
  runner: RunnerConfig;
  /** Where the agents reach their model; without one a command agent runs with no gateway variables. */
  gateway?: CardsGateway;
  /** The conductor's card runner (required for `agent: "conductor"`). */
  conductor?: ConductorCardRunner;
  /** Called after each attempt (progress). */
  onAttempt?: (harnessId: string, a: Attempt) => void;
}

/**
 * The Evaluator of task cards: every card runs on the host against the overlay it is given, one at a time (so each
 * attempt's gateway spend is its own). A `command` runner is `sh -c` of the template; its stdout is TASK_OUTPUT and
 * its stdout and stderr are the attempt's log (`attempts/<harness>/<card>.log` beside the screen). A timeout, a kill
 * by a signal, a launch failure or a check that cannot decide make the attempt invalid (score null).
 */
export function cardsEvaluator(o: CardsEvaluatorOptions): Evaluator {
  const byId = new Map(o.cards.map((c) => [c.id, c]));
  if (o.runner.agent === "conductor") {
    if (!o.runner.model) throw runnerError(projectPaths(o.project).runner, 'the conductor needs a model: set "model" (provider/model) or pass -m');
    if (!o.conductor) throw runnerError(projectPaths(o.project).runner, "this build has no conductor to run cards with; use a command runner");
  }
  const timeoutMs = (o.runner.timeout_sec ?? DEFAULT_CARD_TIMEOUT_S) * 1000;
  return {
    source: "cards",
    isolation: "host",
    digest: cardsDigest(o.cards),
    tasks: () => o.cards.map((c) => c.id),
    async run(r): Promise<EvaluatorRun> {
      mkdirSync(r.outDir, { recursive: true });
      const attempts: Attempt[] = [];
      for (const id of r.tasks) {
        r.signal?.throwIfAborted();
        const card = byId.get(id);
        if (!card) throw new EvolveError("card_invalid", `no card has the id ${id}`, "the sample names cards of evolve/evals/");
        const a = await runCard(o, card, r, timeoutMs);
        attempts.push(a);
        o.onAttempt?.(r.harnessId, a);
      }
      return { attempts };
    },
  };
}

async function runCard(o: CardsEvaluatorOptions, card: TaskCard, r: Parameters<Evaluator["run"]>[0], timeoutMs: number): Promise<Attempt> {
  const logPath = join(r.outDir, `${card.id}.log`);
  const workdir = join(r.outDir, "work", card.id);
  mkdirSync(workdir, { recursive: true });
  // the log path is relative to the screen's folder: outDir is <screen>/attempts/<harness>
  const logRel = relative(dirname(dirname(r.outDir)), logPath);
  const log = new RedactedLog(createWriteStream(logPath, { flags: "w" }), o.gateway?.secrets?.() ?? []);
  const started = Date.now();
  const spentBefore = o.gateway?.spent() ?? 0;
  const calls = o.gateway?.attempt();
  // what the run printed may hold a key it found on the host (gateway.toml is the user's file): none is kept
  const redact = (t: string) => redactValues(t, o.gateway?.secrets?.() ?? []);
  let transcript = "";
  const base = { task: card.id, log: logRel, cost_usd: 0 };
  let outcome: { output: string; exitCode: number | null; timedOut: boolean; invalid?: string; record?: (score: number | null) => void | Promise<void> };
  try {
    if (o.runner.agent === "command") {
      const cmd = fillTemplate(o.runner.command!, { agent_root: r.agentRoot, prompt: card.prompt });
      const gwEnv = o.gateway ? gatewayEnv(o.gateway) : {};
      const s = await runShell(cmd, {
        cwd: workdir,
        env: cardEnv({ ...gwEnv, EVOLVE_AGENT_ROOT: r.agentRoot, TASK_ID: card.id, TASK_PROMPT: card.prompt }),
        timeoutMs,
        signal: r.signal,
        maxStdout: OUTPUT_MAX_BYTES,
        log,
        onChunk: (t) => {
          if (transcript.length < LOG_MAX_BYTES) transcript += t;
        },
      });
      if (s.aborted) r.signal?.throwIfAborted();
      const invalid = s.launchError
        ? `the agent did not start: ${s.launchError}`
        : s.timedOut
          ? `timed out after ${timeoutMs / 1000}s`
          : s.exitCode === null
            ? `killed by ${s.signal}`
            : undefined;
      outcome = { output: redact(s.stdout.toString("utf8")), exitCode: s.exitCode, timedOut: s.timedOut, invalid };
    } else {
      const env = cardEnv({ EVOLVE_AGENT_ROOT: r.agentRoot, TASK_ID: card.id });
      const c = await o.conductor!({ card, agentRoot: r.agentRoot, workdir, model: o.runner.model!, gateway: o.gateway!, timeoutMs, signal: r.signal, log, env, redact });
      r.signal?.throwIfAborted();
      transcript = "";
      outcome = { output: redact(c.output), exitCode: c.exitCode, timedOut: c.timedOut, invalid: c.timedOut ? `timed out after ${timeoutMs / 1000}s` : c.error && redact(c.error), record: c.record };
    }
  } finally {
    await log.end();
  }
  await o.gateway?.settle?.();
  // the gateway's record of the attempt's calls decides, for a command as for the conductor, whether its agent
  // ever met its model: if not, the attempt says nothing of the harness (no score, no episode, the run stops)
  const unreached = calls?.modelUnavailable();
  if (unreached) appendFileSync(logPath, `\n[evolve: the model was never reached: ${unreached}]\n`);
  if (o.runner.agent === "conductor") transcript = readFileSync(logPath, "utf8");
  const cost = Math.max(0, (o.gateway?.spent() ?? 0) - spentBefore);
  const marker_seen = r.marker !== null && transcript.includes(r.marker);
  const wall_sec = (Date.now() - started) / 1000;
  if (unreached) {
    return { ...base, score: null, valid: false, invalid_reason: `the model was never reached: ${unreached}`, model_unavailable: true, exit_code: outcome.exitCode, timed_out: outcome.timedOut, wall_sec, cost_usd: cost, marker_seen };
  }
  const refused = calls?.budgetRefusal();
  if (refused) {
    return { ...base, score: null, valid: false, invalid_reason: `a budget refused a model call: ${refused}`, exit_code: outcome.exitCode, timed_out: outcome.timedOut, wall_sec, cost_usd: cost, marker_seen };
  }
  if (outcome.invalid) {
    await outcome.record?.(null);
    return { ...base, score: null, valid: false, invalid_reason: outcome.invalid, exit_code: outcome.exitCode, timed_out: outcome.timedOut, wall_sec, cost_usd: cost, marker_seen };
  }
  const check = await checkCard(card, outcome.output, { signal: r.signal, cwd: workdir });
  await outcome.record?.(check.error ? null : check.passed ? 1 : 0);
  if (check.error) {
    return { ...base, score: null, valid: false, invalid_reason: check.error, exit_code: outcome.exitCode, timed_out: false, wall_sec, cost_usd: cost, marker_seen };
  }
  return { ...base, score: check.passed ? 1 : 0, valid: true, exit_code: outcome.exitCode, timed_out: false, wall_sec, cost_usd: cost, marker_seen };
}

/** The variables an agent CLI finds its model by: the gateway under each family's names, plus EVOLVE_GATEWAY_*. */
function gatewayEnv(g: CardsGateway): Record<string, string> {
  return { ...agentEnv(g.key, g.url), EVOLVE_GATEWAY_URL: g.url.replace(/\/+$/, ""), EVOLVE_GATEWAY_KEY: g.key };
}

/** The most bytes of an overlay's episodes carried back to the live memory. */
const EPISODES_MAX_BYTES = 32 * 1024 * 1024;

/**
 * Appends the episodes a run left in an overlay's memory (the conductor writes one per card) to the live harness's
 * `memory/episodes.jsonl`, in one append, never through a link; returns how many. An overlay starts with no
 * memory (buildOverlay leaves the live one out), so what it holds is exactly that run's.
 */
export function appendOverlayEpisodes(overlayRoot: string, liveRoot: string): number {
  const from = join(overlayRoot, AGENT_PATHS.episodes);
  let text: string;
  try {
    text = readSmallFile(from, EPISODES_MAX_BYTES, (why) => new EvolveError("episodes_unreadable", `${from} ${why}`));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw e;
  }
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  if (lines.length === 0) return 0;
  const dir = join(liveRoot, dirname(AGENT_PATHS.episodes));
  const st = lstatOrUndefined(dir);
  if (st && !st.isDirectory()) throw new EvolveError("episodes_unreadable", `${dir} is not a folder (a link or a file)`, "make memory/ a plain folder of the live .agent/");
  mkdirSync(dir, { recursive: true });
  const fd = openSync(join(liveRoot, AGENT_PATHS.episodes), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
  try {
    writeSync(fd, lines.join("\n") + "\n");
  } finally {
    closeSync(fd);
  }
  return lines.length;
}

function lstatOrUndefined(p: string) {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
}
