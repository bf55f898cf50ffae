/**
 * Episodic memory: one {@link Episode} per run in `.agent/memory/episodes.jsonl`, appended line by line, so the
 * evolver's `diagnose` reads what went wrong (the failure events themselves) without any other file. A torn last
 * line (a run killed mid-write) or a hand-edited bad one is skipped and counted, never fatal.
 */
import { randomUUID } from "node:crypto";
import { constants, lstatSync, mkdirSync } from "node:fs";
import { open } from "node:fs/promises";
import { dirname } from "node:path";
import { EvolveError } from "../errors.ts";
import type { TraceUpdate } from "../trace/events.ts";
import { AGENT_PATHS, agentPath } from "./layout.ts";
import type { ConductorOutcome, ConductorResult, Episode } from "./types.ts";

/** The most failure events a passing run's episode keeps (the first ones). */
export const MAX_EPISODE_FAILURES = 50;
/** The most trace events a failed run's episode keeps (its newest: how a run ended is what most pathologies show). */
export const MAX_EPISODE_EVENTS = 400;
/** The most text one kept failure event carries; the rest of a long tool output is cut. */
const MAX_FAILURE_TEXT = 2000;
/** The most of episodes.jsonl read (its end, the newest runs). */
export const MAX_EPISODES_BYTES = 32 * 1024 * 1024;

const OUTCOMES: readonly ConductorOutcome[] = ["finished", "max_turns", "model_error", "timeout", "aborted"];

/** An event with its text cut to {@link MAX_FAILURE_TEXT} (the prompt's system text left out: the `.agent/` has it). */
function trimmed(u: TraceUpdate): TraceUpdate {
  const cut = (t: string) => (t.length > MAX_FAILURE_TEXT ? `${t.slice(0, MAX_FAILURE_TEXT)}…` : t);
  if (u.type === "prompt") return { type: "prompt", data: { _prompt: { text: cut(u.data._prompt.text) } } };
  if (u.type === "agent_message_chunk" || u.type === "agent_thought_chunk" || u.type === "user_message_chunk") {
    return { type: u.type, data: { update: { ...u.data.update, content: { type: "text", text: cut(u.data.update.content.text) } } } } as TraceUpdate;
  }
  if (u.type !== "tool_call_update" || !u.data.update.content) return u;
  const content = u.data.update.content.map((c) => (c.content.text.length > MAX_FAILURE_TEXT ? { ...c, content: { ...c.content, text: `${c.content.text.slice(0, MAX_FAILURE_TEXT)}…` } } : c));
  return { type: u.type, data: { update: { ...u.data.update, content } } };
}

/**
 * The episode of a run: its outcome, the score a check gave (null when none did) and the trace events of its failure.
 * A failed run (not finished, or scored below 1) keeps its whole trace, newest {@link MAX_EPISODE_EVENTS} events,
 * usage left out and texts cut: a premature finish or a claim the check disproves shows only in the run's own
 * messages. A passing run keeps each failed or vetoed tool call (the call and its result), every error and trace loss.
 */
export function episodeOf(result: Pick<ConductorResult, "outcome" | "turns" | "trace">, opts: { task?: string; domain?: string; score: number | null; id?: string; at?: Date }): Episode {
  const failed = result.outcome !== "finished" || (opts.score !== null && opts.score < 1);
  if (failed) {
    const events = result.trace.filter((u) => u.type !== "usage").map(trimmed);
    return withTask({ id: opts.id ?? randomUUID(), at: (opts.at ?? new Date()).toISOString(), outcome: result.outcome, score: opts.score, turns: result.turns, failures: events.slice(-MAX_EPISODE_EVENTS), trace: "full" }, opts);
  }
  const calls = new Map<string, TraceUpdate>();
  const failures: TraceUpdate[] = [];
  for (const u of result.trace) {
    if (u.type === "tool_call") calls.set(u.data.update.toolCallId, u);
    else if (u.type === "tool_call_update" && u.data.update.status === "failed") {
      const c = calls.get(u.data.update.toolCallId);
      if (c) failures.push(c);
      failures.push(trimmed(u));
    } else if (u.type === "error" || u.type === "trace_loss") failures.push(u);
  }
  const ep: Episode = {
    id: opts.id ?? randomUUID(),
    at: (opts.at ?? new Date()).toISOString(),
    outcome: result.outcome,
    score: opts.score,
    turns: result.turns,
    failures: failures.slice(0, MAX_EPISODE_FAILURES),
    trace: "failures",
  };
  return withTask(ep, opts);
}

function withTask(ep: Episode, opts: { task?: string; domain?: string }): Episode {
  if (opts.task !== undefined) ep.task = opts.task;
  if (opts.domain !== undefined) ep.domain = opts.domain;
  return ep;
}

/**
 * Appends one episode to `<agentRoot>/memory/episodes.jsonl` (creating memory/), as one write of one line. A link
 * in place of memory/ or the file is refused: the `.agent/` may come from a candidate nobody has read.
 */
export async function appendEpisode(agentRoot: string, ep: Episode): Promise<void> {
  const file = agentPath(agentRoot, AGENT_PATHS.episodes);
  const dir = dirname(file);
  try {
    mkdirSync(dir, { recursive: true });
    if (lstatSync(dir).isSymbolicLink()) throw new Error(`${dir} is a symbolic link`);
    const fh = await open(file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644);
    try {
      if (!(await fh.stat()).isFile()) throw new Error(`${file} is not a regular file`);
      await fh.write(JSON.stringify(ep) + "\n");
    } finally {
      await fh.close();
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === "ELOOP" ? `${file} is a symbolic link` : String((e as Error).message).split("\n")[0];
    throw new EvolveError("episode_write_failed", `cannot append to ${AGENT_PATHS.episodes}: ${why}`, "the agent directory must be writable, with no links in memory/");
  }
}

function isEpisode(v: any): v is Episode {
  return (
    v !== null &&
    typeof v === "object" &&
    typeof v.id === "string" &&
    typeof v.at === "string" &&
    OUTCOMES.includes(v.outcome) &&
    (v.score === null || (typeof v.score === "number" && v.score >= 0 && v.score <= 1)) &&
    typeof v.turns === "number" &&
    Array.isArray(v.failures) &&
    (v.task === undefined || typeof v.task === "string") &&
    (v.domain === undefined || typeof v.domain === "string")
  );
}

/**
 * The episodes of `agentRoot`, oldest first, and how many lines were skipped (torn or not an episode). Reads at
 * most the last {@link MAX_EPISODES_BYTES}; a file that is absent has no episodes.
 */
export async function readEpisodes(agentRoot: string): Promise<{ episodes: Episode[]; skipped: number }> {
  const file = agentPath(agentRoot, AGENT_PATHS.episodes);
  let fh;
  try {
    fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { episodes: [], skipped: 0 };
    throw new EvolveError("episode_read_failed", `cannot read ${AGENT_PATHS.episodes}: ${String((e as Error).message).split("\n")[0]}`, "it must be a regular file, not a link");
  }
  let text: string;
  let cutHead = false;
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new EvolveError("episode_read_failed", `${AGENT_PATHS.episodes} is not a regular file`, "move it aside");
    const start = Math.max(0, st.size - MAX_EPISODES_BYTES);
    cutHead = start > 0;
    const buf = Buffer.alloc(st.size - start);
    let at = 0;
    while (at < buf.length) {
      const { bytesRead } = await fh.read(buf, at, buf.length - at, start + at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    text = buf.subarray(0, at).toString("utf8");
  } finally {
    await fh.close();
  }
  const lines = text.split("\n");
  // the tail read starts mid-line: that piece is no record
  if (cutHead) lines.shift();
  const episodes: Episode[] = [];
  let skipped = 0;
  for (const line of lines) {
    if (!line.trim()) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      skipped++;
      continue;
    }
    if (isEpisode(v)) episodes.push(v);
    else skipped++;
  }
  return { episodes, skipped };
}
