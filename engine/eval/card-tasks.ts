/**
 * Task cards in boxes, the default runner for cards: each card is written as a task folder (its prompt the
 * instruction, the offline base image, no network but the gateway, its check the verifier) and the cards are
 * evaluated through the dataset evaluator's imported-tasks path with `-a conductor`, so every attempt is an ordinary
 * podman trial: the model's shell commands and a card's `check.command` run in the box, never on the host, and the
 * box holds no provider key (only the trial's gateway credential). The verifier runs the card's check with the very
 * function a host run uses ({@link checkCard}), through the read-only evolve binary mounted in the box, so `contains`
 * and `regex` keep their JavaScript meaning. After the job, each trial's episode is built from the conductor's trace
 * in the store and appended to the overlay's memory, as a host run appends it.
 */
import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { appendEpisode, episodeOf } from "../conductor/episodes.ts";
import { BOX_EVOLVE_BINARY } from "../conductor/layout.ts";
import type { ConductorOutcome } from "../conductor/types.ts";
import { importTasks } from "../dataset.ts";
import type { Engine } from "../driver/types.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { conductor } from "../harness/agents/conductor.ts";
import { STDERR_NAME } from "../harness/cli.ts";
import { trialDir, type Store } from "../store/index.ts";
import { readTrace } from "../trace/store.ts";
import type { TraceUpdate } from "../trace/events.ts";
import { readBoxFile } from "../box/fs.ts";
import { trialPaths } from "../box/layout.ts";
import { datasetEvaluator } from "./dataset-eval.ts";
import { cardsDigest, checkCard, DEFAULT_CARD_TIMEOUT_S, DEFAULT_CHECK_TIMEOUT_S, validateCard } from "./evals.ts";
import { projectPaths } from "./project.ts";
import type { Attempt, Evaluator, RunnerConfig, TaskCard } from "./types.ts";

/**
 * The image a card's box is built from: the offline base image the conductor's box fixtures use (glibc, so the
 * mounted evolve binary runs; present locally, so a card needs no registry).
 */
export const CARD_BASE_IMAGE = "debian:bookworm-slim";
/** Where the conductor writes its final answer in the box (its home, engine/harness/agents/conductor.ts). */
export const BOX_CARD_OUTPUT = `${conductor.home}/output.txt`;
/** The card as the verifier reads it (tests/ is copied into the box only at verify time). */
const BOX_CARD_FILE = "/tests/card.json";
/** The task name prefix of a card's task folder: `cards/<id>`. */
const CARD_TASK_PREFIX = "cards/";
/** Seconds the verifier gets beyond the check's own timeout (the binary's start, reading the output). */
const CHECK_SLACK_S = 30;
/** The most bytes of the conductor's output the in-box check reads; a larger answer cannot be checked. */
export const CARD_OUTPUT_READ_MAX = 16 * 1024 * 1024;
/** The most trace events of a trial read back for its episode (episodeOf keeps far fewer). */
const EPISODE_TRACE_MAX = 20_000;

const toml = (s: string) => JSON.stringify(s);

/** The task folder files of one card (relative path → content). */
export function cardTaskFiles(card: TaskCard, runner: RunnerConfig): Record<string, string> {
  const agentTimeout = runner.timeout_sec ?? DEFAULT_CARD_TIMEOUT_S;
  const checkTimeout = ("command" in card.check ? card.check.timeout_sec : undefined) ?? DEFAULT_CHECK_TIMEOUT_S;
  return {
    "task.toml": [
      'schema_version = "1.3"',
      // the path this module had when card tasks were first written: the text is part of every card task's digest,
      // so naming the module's present place would make every stored card task a new one
      `# task card ${card.id}, written by evolve (engine/evolve/card-tasks.ts): edit evolve/evals/${card.id}.json instead`,
      "",
      "[task]",
      `name = ${toml(CARD_TASK_PREFIX + card.id)}`,
      "",
      "[agent]",
      `timeout_sec = ${agentTimeout}`,
      "",
      "[verifier]",
      `timeout_sec = ${Math.ceil(checkTimeout + CHECK_SLACK_S)}`,
      "",
      "[environment]",
      'network_mode = "no-network"',
      "",
    ].join("\n"),
    "instruction.md": card.prompt,
    "environment/Dockerfile": `FROM ${CARD_BASE_IMAGE}\nWORKDIR /app\n# a layer that holds /app: a WORKDIR alone is made at box start, outside the box's user namespace\nRUN echo "# workspace" > README.md\n`,
    "tests/card.json": JSON.stringify(card, null, 2) + "\n",
    // the check is evolve's own function (the read-only binary), run where the model worked: a command check runs here, in the box
    "tests/test.sh": `#!/bin/sh\ncd /app 2>/dev/null || cd /\nEVOLVE_HOME=/tmp/evolve-card-check exec ${BOX_EVOLVE_BINARY} harness card-check --card ${BOX_CARD_FILE} --output ${BOX_CARD_OUTPUT} --reward /logs/verifier/reward.txt\n`,
  };
}

/**
 * Writes every card as a task folder under `<base>/<digest>/<id>/` (base: the project's `evolve/card-tasks/`; the
 * digest of the cards and the runner's timeout: the same cards always give the same folders, and a stale folder is
 * replaced whole); returns the folder of folders.
 */
export function writeCardTasks(project: string, cards: readonly TaskCard[], runner: RunnerConfig, base = join(projectPaths(project).evolve, "card-tasks")): string {
  const all = cards.map((c) => [c, cardTaskFiles(c, runner)] as const);
  const digest = createHash("sha256").update(JSON.stringify(all.map(([c, f]) => [c.id, f]))).digest("hex").slice(0, 16);
  const root = join(base, digest);
  rmSync(root, { recursive: true, force: true });
  for (const [card, files] of all) {
    // a card id may hold dots; a task name may not hold "..": refused here with the card's name, not by the importer
    if (card.id.includes("..")) throw new EvolveError("card_invalid", `card ${card.id}: an id with ".." cannot be a task's name`, "rename the card (letters, digits, single . _ -)");
    for (const [rel, content] of Object.entries(files)) {
      const path = join(root, card.id, rel);
      mkdirSync(join(path, ".."), { recursive: true });
      writeFileSync(path, content, { mode: rel.endsWith(".sh") ? 0o755 : 0o644 });
    }
  }
  return root;
}

/** What {@link boxedCardsEvaluator} needs: the store and engine of the trials, the cards and their runner. */
export interface BoxedCardsOptions {
  store: Store;
  home: string;
  engine: () => Promise<Engine>;
  project: string;
  cards: TaskCard[];
  runner: RunnerConfig;
  /** Where the gateway's warnings go. */
  warn?: (message: string) => void;
  /** The folder the cards' task folders are written under (default: the project's `evolve/card-tasks/`). */
  tasksDir?: string;
  /** Trials run at once (the dataset evaluator's default when unset). */
  concurrency?: number;
}

/**
 * The cards {@link Evaluator} that runs each card as a podman trial of the conductor (the default; `--on-host` runs
 * them with cardsEvaluator instead). Its tasks are the card ids, its source "cards" and its digest the cards' (the
 * same task set as on the host); an attempt's `log` is its trial id. Refuses a `command` runner: a command runner is
 * a program of the user's on the host, which a box cannot run (`cards_on_host_required`).
 */
export async function boxedCardsEvaluator(o: BoxedCardsOptions): Promise<Evaluator> {
  if (o.runner.agent === "command") {
    throw new EvolveError(
      "cards_on_host_required",
      `${projectPaths(o.project).runner} names a command runner ("agent": "command"): its command is a program on this machine, which cannot run in a card's box`,
      'pass --on-host to run it on the host as you (it prints what that means), or use the conductor ({"agent":"conductor","model":"provider/model"}), which runs in a box',
    );
  }
  if (!o.runner.model) throw new EvolveError("runner_invalid", `${projectPaths(o.project).runner}: the conductor needs a model: set "model" (provider/model) or pass -m`);
  const dir = writeCardTasks(o.project, o.cards, o.runner, o.tasksDir);
  const imported = await importTasks(o.store, o.home, dir, { secrets: new Set() });
  const byCard = new Map(o.cards.map((c) => [c.id, c]));
  const inner = datasetEvaluator({ store: o.store, home: o.home, engine: o.engine, ref: dir, imported: { path: dir, tasks: imported.tasks }, agent: "conductor", model: o.runner.model, warn: o.warn, ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}) });
  const ids = o.cards.map((c) => c.id);
  return {
    source: "cards",
    isolation: "box",
    digest: cardsDigest(o.cards),
    tasks: () => ids,
    async run(r) {
      for (const id of r.tasks) if (!byCard.has(id)) throw new EvolveError("card_invalid", `no card has the id ${id}`, "the sample names cards of evolve/evals/");
      const res = await inner.run({ ...r, tasks: r.tasks.map((id) => CARD_TASK_PREFIX + id) });
      const attempts: Attempt[] = res.attempts.map((a) => ({ ...a, task: a.task.startsWith(CARD_TASK_PREFIX) ? a.task.slice(CARD_TASK_PREFIX.length) : a.task }));
      for (const a of attempts) await recordEpisode(o.home, byCard.get(a.task)!, a, r.agentRoot);
      return { ...res, attempts };
    },
  };
}

/**
 * Appends the episode of a card's trial to `agentRoot`'s memory, as the host runner records it: built from the
 * conductor's trace in the store, its score the attempt's (null when the attempt is invalid). An attempt whose
 * agent never met its model, or that has no trial, leaves no episode (a host run records none either).
 */
async function recordEpisode(home: string, card: TaskCard, a: Attempt, agentRoot: string): Promise<void> {
  if (a.model_unavailable || !a.log) return;
  const trace: TraceUpdate[] = [];
  try {
    for (const e of readTrace(home, a.log)) {
      const { seq: _seq, ...u } = e;
      trace.push(u as TraceUpdate);
      if (trace.length > 2 * EPISODE_TRACE_MAX) trace.splice(0, trace.length - EPISODE_TRACE_MAX);
    }
  } catch {
    // a trial that stored no trace (it never ran its agent) has no episode to tell
    return;
  }
  if (trace.length === 0) return;
  const { outcome, turns } = await conductorEnd(home, a, trace);
  await appendEpisode(agentRoot, episodeOf({ outcome, turns, trace: trace.slice(-EPISODE_TRACE_MAX) }, { task: card.id, domain: card.domain, score: a.valid ? a.score : null }));
}

const OUTCOMES: readonly ConductorOutcome[] = ["finished", "max_turns", "model_error", "timeout", "aborted"];

/**
 * How the conductor in the box ended: its exit and timeout as the trial recorded them decide finished and timeout;
 * otherwise the line `conductor: <outcome> after N turns` it printed last on stderr names the outcome (model_error
 * when it cannot be read). Turns: that line's, or the model calls in the trace.
 */
async function conductorEnd(home: string, a: Attempt, trace: readonly TraceUpdate[]): Promise<{ outcome: ConductorOutcome; turns: number }> {
  let said: { outcome?: ConductorOutcome; turns?: number } = {};
  try {
    const agentDir = trialPaths(trialDir(home, a.log)).agent;
    const text = await readBoxFile(agentDir, join(agentDir, STDERR_NAME), { limit: 64 * 1024, tail: true });
    const m = text ? [...text.matchAll(/^conductor: (\w+) after (\d+) turns?/gm)].pop() : undefined;
    if (m && (OUTCOMES as readonly string[]).includes(m[1])) said = { outcome: m[1] as ConductorOutcome, turns: Number(m[2]) };
  } catch {
    // the box's stderr is the box's: unreadable, the trial's own record decides
  }
  const outcome: ConductorOutcome = a.timed_out ? "timeout" : a.exit_code === 0 ? "finished" : said.outcome && said.outcome !== "finished" ? said.outcome : "model_error";
  return { outcome, turns: said.turns ?? trace.filter((u) => u.type === "usage").length };
}

/**
 * The verifier of a card's box (`evolve harness card-check`, hidden): reads the card and the conductor's output,
 * checks it with {@link checkCard} (the host runner's function: `contains` and `regex` in JavaScript, `command` by
 * `sh -c` here, in the box) and writes the reward, 1 or 0. A check that cannot decide (a command's timeout), a
 * missing or oversized output, or a bad card write no reward and throw: the trial is then not scored, and its
 * attempt is invalid, as on the host.
 */
export async function runCardCheck(o: { card: string; output: string; reward: string }): Promise<{ passed: boolean; detail: string }> {
  let card: TaskCard;
  try {
    card = validateCard(o.card, JSON.parse(readFileSync(o.card, "utf8")));
  } catch (e) {
    if (e instanceof EvolveError) throw e;
    throw new EvolveError("card_invalid", `${o.card}: ${firstLine(e)}`);
  }
  const output = readBounded(o.output);
  const r = await checkCard(card, output);
  if (r.error) throw new EvolveError("card_check_undecided", `card ${card.id}: ${r.error}`, "the attempt is invalid: its check could not decide");
  writeFileSync(o.reward, r.passed ? "1\n" : "0\n");
  return { passed: r.passed, detail: r.detail };
}

/** The conductor's output file, read whole when at most CARD_OUTPUT_READ_MAX bytes (`card_check_undecided` if not). */
function readBounded(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw new EvolveError("card_check_undecided", `the conductor left no output at ${path} (${(e as NodeJS.ErrnoException).code ?? firstLine(e)})`, "the attempt is invalid: the conductor did not finish its run");
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new EvolveError("card_check_undecided", `${path} is not a regular file`);
    if (st.size > CARD_OUTPUT_READ_MAX) throw new EvolveError("card_check_undecided", `${path} is ${st.size} bytes, over the ${CARD_OUTPUT_READ_MAX}-byte limit of a checked output`);
    const buf = Buffer.alloc(st.size);
    let n = 0;
    while (n < buf.length) {
      const k = readSync(fd, buf, n, buf.length - n, n);
      if (k === 0) break;
      n += k;
    }
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
