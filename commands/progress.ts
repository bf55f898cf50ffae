/**
 * The live view of a running job (`run`, `check`, `job resume`). The state and the lines it prints are pure
 * functions of the job's events and a clock, so they are unit-tested without a terminal; {@link progressView} is
 * the thin part that writes them: on a TTY a redrawn block (a summary line with elapsed time and ETA, then every
 * running trial with its task and phase), settled failures printed above it as they come; without a TTY one line
 * per trial event (started, retried, settled with status, reward and time) and a summary line every 30 s, so a
 * log or CI never sits silent while trials run.
 */
import { type JobEvent, primaryReward } from "../engine/job/mod.ts";
import type { TrialRecord } from "../engine/store/mod.ts";
import { statusClass } from "../engine/trial/mod.ts";
import { exceptionLine, formatDuration, formatReward, jsonKeys, statusWord, style } from "./output.ts";

/** One trial that has started and not settled. */
export interface RunningTrial {
  task: string;
  phase: string;
  /** When its first phase began (ms since the epoch). */
  since: number;
}

/** What the view knows of a job so far. */
export interface ProgressState {
  total: number;
  startedAt: number;
  running: Map<string, RunningTrial>;
  settled: number;
  scored: number;
  /** SCORING_ERROR, INFRASTRUCTURE_ERROR, INDETERMINATE: the trial failed. */
  errors: number;
  /** Stopped by a budget (`job resume` runs it again). */
  budget: number;
  /** Stopped on purpose (Ctrl-C, `job cancel`, `trial stop`): not an error. */
  cancelled: number;
  rewardSum: number;
  rewarded: number;
  retries: number;
}

/** What one event changed, for the line that reports it; null when nothing worth a line happened. */
export type ProgressNote =
  | { kind: "started"; trialId: string; task: string; phase: string }
  | { kind: "phase"; trialId: string; task: string; phase: string }
  | { kind: "retry"; trialId: string; task: string; attempt: number; reason: string }
  | { kind: "settled"; trial: TrialRecord; task: string; ms: number | null }
  | null;

/** A fresh state for a job of `total` trials to run, started at `now`. */
export function newProgress(total: number, now: number): ProgressState {
  return { total, startedAt: now, running: new Map(), settled: 0, scored: 0, errors: 0, budget: 0, cancelled: 0, rewardSum: 0, rewarded: 0, retries: 0 };
}

/** Folds one event into the state (mutating it) and says what happened; `taskOf` names a trial's task. */
export function applyEvent(s: ProgressState, e: JobEvent, now: number, taskOf: (trialId: string) => string): ProgressNote {
  if (e.kind === "phase") {
    const r = s.running.get(e.trialId);
    if (!r) {
      const task = taskOf(e.trialId);
      s.running.set(e.trialId, { task, phase: e.phase, since: now });
      return { kind: "started", trialId: e.trialId, task, phase: e.phase };
    }
    if (r.phase === e.phase) return null;
    r.phase = e.phase;
    return { kind: "phase", trialId: e.trialId, task: r.task, phase: e.phase };
  }
  if (e.kind === "retry") {
    s.retries++;
    const r = s.running.get(e.trialId);
    // the next attempt reports its phases from the start again
    if (r) r.phase = "retry";
    return { kind: "retry", trialId: e.trialId, task: r?.task ?? taskOf(e.trialId), attempt: e.attempt, reason: e.reason };
  }
  if (e.kind !== "trial_settled") return null;
  const t = e.trial;
  const r = s.running.get(t.id);
  s.running.delete(t.id);
  // an interrupted trial is not done: `job resume` runs it again (counted nowhere)
  const kind = statusClass(t.status)?.kind ?? "failed";
  if (kind !== "interrupted") s.settled++;
  if (kind === "interrupted") {
    // counted nowhere
  } else if (kind === "scored") {
    s.scored++;
    const reward = primaryReward(t.rewards);
    if (reward !== null) {
      s.rewardSum += reward;
      s.rewarded++;
    }
  } else if (kind === "cancelled") s.cancelled++;
  else if (kind === "budget") s.budget++;
  else s.errors++;
  return { kind: "settled", trial: t, task: r?.task ?? t.task_name ?? taskOf(t.id), ms: r ? now - r.since : null };
}

/**
 * Milliseconds until every trial has settled, at the rate trials have settled so far (concurrency included);
 * null before the first one settles, when nothing is left, or once only cancellations are arriving.
 */
export function estimateRemaining(s: ProgressState, now: number): number | null {
  const left = s.total - s.settled;
  const finished = s.settled - s.cancelled;
  if (left <= 0 || finished <= 0) return null;
  return ((now - s.startedAt) / finished) * left;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The one-line summary: counts, mean reward, errors and cancellations apart, elapsed time and ETA. */
export function renderSummary(s: ProgressState, now: number): string {
  const queued = Math.max(0, s.total - s.settled - s.running.size);
  const mean = s.rewarded > 0 ? formatReward(s.rewardSum / s.rewarded) : "-";
  const parts = [`${s.settled}/${s.total} done`, `${s.running.size} running`, `${queued} queued`, `mean reward ${mean}`, plural(s.errors, "error")];
  if (s.budget > 0) parts.push(`${s.budget} budget`);
  if (s.cancelled > 0) parts.push(`${s.cancelled} cancelled`);
  if (s.retries > 0) parts.push(plural(s.retries, "retry", "retries"));
  const eta = estimateRemaining(s, now);
  parts.push(`elapsed ${formatDuration(now - s.startedAt)}`);
  if (eta !== null) parts.push(`ETA ${formatDuration(eta)}`);
  return parts.join(", ");
}

/** One line per running trial, longest-running first: task, phase, time so far; at most `max`, then `… N more`. */
export function renderRunning(s: ProgressState, now: number, max = 8): string[] {
  const rows = [...s.running.values()].sort((a, b) => a.since - b.since);
  const width = Math.min(40, rows.reduce((w, r) => Math.max(w, r.task.length), 0));
  const lines = rows.slice(0, max).map((r) => `  ${clip(r.task, 40).padEnd(width)}  ${r.phase.padEnd(7)}  ${formatDuration(now - r.since)}`);
  if (rows.length > max) lines.push(`  … ${rows.length - max} more running`);
  return lines;
}

/** The TTY block: the summary, then the running trials. */
export function renderLive(s: ProgressState, now: number, maxRunning = 8): string[] {
  return [renderSummary(s, now), ...renderRunning(s, now, maxRunning)];
}

/** The line a note prints (without a TTY every note but phase changes; on one, only failures and retries). */
export function renderNote(n: NonNullable<ProgressNote>): string {
  switch (n.kind) {
    case "started":
      return `${style.dim("started")} ${n.task} ${style.dim(n.trialId)}`;
    case "phase":
      return `${style.dim(n.phase.padEnd(7))} ${n.task} ${style.dim(n.trialId)}`;
    case "retry":
      return `${style.yellow("retry")} ${n.task} ${style.dim(n.trialId)} attempt ${n.attempt}: ${firstLine(n.reason, 120)}`;
    case "settled": {
      const t = n.trial;
      const r = primaryReward(t.rewards);
      const status = statusWord(t.status);
      const why = t.exception ? style.dim(` ${settledWhy(t)}`) : "";
      const time = n.ms !== null ? ` ${style.dim(`(${formatDuration(n.ms)})`)}` : "";
      return `${status} ${n.task} ${style.dim(t.id)}${r !== null ? ` reward ${formatReward(r)}` : ""}${time}${why}`;
    }
  }
}

/**
 * A trial's exception for its settled line (output.ts exceptionLine). A BUDGET refusal prints whole (it names the
 * limit, what was spent and what the request would have cost: the figures a user acts on); any other is cut at 120.
 */
export function settledWhy(t: Pick<TrialRecord, "status" | "exception">): string {
  return exceptionLine(t.exception, t.status === "BUDGET" ? Infinity : 120) ?? "";
}

function firstLine(s: string, max: number): string {
  return clip(s.split("\n")[0], max);
}

function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/** How the view writes: a redrawn block on a TTY, plain lines otherwise, nothing but JSON lines with `--json`. */
export type ProgressMode = "tty" | "lines" | "json" | "silent";

/** What {@link progressView} needs; the clock, the writer and the periods are injectable for tests. */
export interface ProgressViewOptions {
  total: number;
  mode: ProgressMode;
  /** Trial id → task name, for trials whose events carry only an id. */
  tasks: ReadonlyMap<string, string>;
  write: (s: string) => void;
  now?: () => number;
  /** Without a TTY: a summary line this often while trials run (default 30 s). */
  summaryEveryMs?: number;
  /** On a TTY: redraw this often so elapsed time moves (default 1 s). */
  tickMs?: number;
  /** On a TTY: the terminal's width, to keep each block line on one row. */
  columns?: () => number | undefined;
  /** Where warnings go (stderr); on a TTY the block is cleared first and redrawn after. */
  warn?: (s: string) => void;
}

/** A running job's progress display; `end()` clears the TTY block and stops the timers. */
export function progressView(o: ProgressViewOptions): { onEvent(e: JobEvent): void; warn(line: string): void; end(): void } {
  const now = o.now ?? Date.now;
  const state = newProgress(o.total, now());
  const taskOf = (id: string) => o.tasks.get(id) ?? id;
  let drawn = 0;
  let shown = "";
  const clear = () => {
    if (drawn === 0) return;
    o.write(`${drawn > 1 ? `\x1b[${drawn - 1}F` : "\r"}\x1b[J`);
    drawn = 0;
  };
  const draw = () => {
    const cols = o.columns?.() ?? 0;
    const lines = renderLive(state, now()).map((l) => (cols > 1 ? clip(l, cols - 1) : l));
    const text = lines.join("\n");
    // most events (log lines, a phase already shown) change nothing on screen: no flicker, no bytes
    if (drawn > 0 && text === shown) return;
    clear();
    o.write(text);
    drawn = lines.length;
    shown = text;
  };
  const print = (line: string) => {
    if (o.mode === "tty") {
      clear();
      o.write(`${line}\n`);
      draw();
    } else o.write(`${line}\n`);
  };
  let timer: ReturnType<typeof setInterval> | undefined;
  if (o.mode === "tty") timer = setInterval(draw, o.tickMs ?? 1000);
  else if (o.mode === "lines") {
    timer = setInterval(() => {
      if (state.running.size > 0) o.write(`${style.dim(`[${renderSummary(state, now())}]`)}\n`);
    }, o.summaryEveryMs ?? 30_000);
  }
  timer?.unref?.();
  if (o.mode === "tty") draw();
  return {
    onEvent(e) {
      if (o.mode === "json") o.write(JSON.stringify(jsonKeys(e)) + "\n");
      const note = applyEvent(state, e, now(), taskOf);
      if (o.mode === "lines" && note && note.kind !== "phase") o.write(`${renderNote(note)}\n`);
      if (o.mode === "tty") {
        const worth = note && (note.kind === "retry" || (note.kind === "settled" && note.trial.status !== "SCORED"));
        if (worth) print(renderNote(note));
        else draw();
      }
    },
    warn(line) {
      const warn = o.warn ?? ((l: string) => process.stderr.write(l));
      if (o.mode !== "tty") return warn(`${line}\n`);
      clear();
      warn(`${line}\n`);
      draw();
    },
    end() {
      if (timer) clearInterval(timer);
      if (o.mode === "tty") clear();
    },
  };
}
