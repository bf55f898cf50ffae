/**
 * Printing for every command: colour only on a TTY and never with NO_COLOR, one-line errors with a stable code,
 * JSON documents for `--json`. Commands print only through here so the conventions hold everywhere.
 */
import type { ErrorCode } from "../engine/error-codes.ts";
import { EvolveError } from "../engine/errors.ts";
import { isTTY } from "../engine/runtime.ts";
import { jsonKeys } from "../engine/json-keys.ts";
import { stillGoing } from "../engine/trial/lifecycle.ts";

// the JSON vocabulary lives in the engine, so the local API (engine/serve) prints the same documents
export { jsonKeys, snakeKey } from "../engine/json-keys.ts";

const useColor = (stream: NodeJS.WriteStream) =>
  isTTY(stream) && !("NO_COLOR" in process.env && process.env.NO_COLOR !== "") && process.env.TERM !== "dumb";

function paint(code: number, stream: NodeJS.WriteStream) {
  return (s: string) => (useColor(stream) ? `\x1b[${code}m${s}\x1b[0m` : s);
}

/** ANSI styles for stdout; each is the identity when colour is off. */
export const style = {
  red: paint(31, process.stdout),
  green: paint(32, process.stdout),
  yellow: paint(33, process.stdout),
  blue: paint(34, process.stdout),
  dim: paint(2, process.stdout),
  bold: paint(1, process.stdout),
};

/** Writes one line to stdout. */
export function out(line = ""): void {
  process.stdout.write(line + "\n");
}

/** Writes a value as one JSON document (pretty on a TTY, compact when piped for `jq`), keys through jsonKeys. */
export function outJson(value: unknown): void {
  process.stdout.write(JSON.stringify(jsonKeys(value), null, isTTY(process.stdout) ? 2 : undefined) + "\n");
}

/** Writes a value as one compact JSON line (a `--json` stream: run events, `logs --follow`), keys through jsonKeys. */
export function outJsonLine(value: unknown): void {
  process.stdout.write(JSON.stringify(jsonKeys(value)) + "\n");
}

/**
 * Writes one parsed-trace update as a JSON line exactly as the trace vocabulary spells it (`{type, data}`, camelCase
 * inside, as ACP has it): `conductor run`'s stdout, which the conductor's trace parser reads back. Not through
 * jsonKeys, which would re-case the vocabulary.
 */
export function outTraceLine(update: unknown): void {
  process.stdout.write(JSON.stringify(update) + "\n");
}

const ANSI = /\x1b\[[0-9;]*m/g;

/** How many columns a string takes on a terminal: its ANSI colour codes take none. */
export function visibleWidth(s: string): number {
  return s.replace(ANSI, "").length;
}

/** Pads `s` with spaces to `width` visible columns (colour codes not counted). */
export function padVisible(s: string, width: number): string {
  return s + " ".repeat(Math.max(0, width - visibleWidth(s)));
}

/**
 * Prints rows as an aligned table with a header; empty cells print as `-`. Columns are measured on the visible
 * width, so a coloured cell lines up with plain ones.
 */
export function outTable(header: string[], rows: (string | number | null | undefined)[][]): void {
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined || c === "" ? "-" : String(c))));
  // a loop, not Math.max(...cells): spreading a job's thousands of rows as arguments overflows the call stack
  const widths = header.map((h) => h.length);
  for (const r of cells) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, visibleWidth(c))));
  const fmt = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : padVisible(c, widths[i]))).join("  ");
  out(style.bold(fmt(header)));
  for (const r of cells) out(fmt(r));
}

/** Formats an error as the CLI convention's `error[CODE]: message` line plus an optional hint line. */
export function formatError(code: ErrorCode, message: string, hint?: string): string {
  const red = paint(31, process.stderr);
  const dim = paint(2, process.stderr);
  const first = `${red(`error[${code}]`)}: ${message.split("\n")[0]}`;
  return hint ? `${first}\n${dim(`  hint: ${hint}`)}` : first;
}

/**
 * Ends a command with status `exit` once it has printed all it has to say (an interrupted job printed how to go
 * on): nothing more is written.
 */
export class QuietExit extends Error {
  constructor(readonly exit: number) {
    super(`exit ${exit}`);
    this.name = "QuietExit";
  }
}

/** Prints an error to stderr and returns the exit status the convention gives it (a QuietExit's own, silently). */
export function reportError(err: unknown): number {
  if (err instanceof QuietExit) return err.exit;
  if (err instanceof EvolveError) {
    process.stderr.write(formatError(err.code, err.message, err.hint) + "\n");
    return err.exit;
  }
  const e = err as Error;
  process.stderr.write(
    formatError("internal", e?.message ?? String(err), "this is a bug in evolve; rerun with EVOLVE_DEBUG=1 for a stack trace") + "\n",
  );
  if (process.env.EVOLVE_DEBUG) process.stderr.write(String(e?.stack) + "\n");
  return 2;
}

// ---- the human vocabulary: times, durations, rewards, statuses (JSON keeps ISO 8601 UTC and full numbers) -------

/** A time as tables and text print it, `YYYY-MM-DD HH:MM:SSZ` (UTC, whole seconds); `-` when absent or unreadable. */
export function when(iso: string | null | undefined): string {
  if (!iso) return "-";
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** A duration's one human form (engine/duration.ts): `250ms`, `16.6s`, `2m05s`, `1h02m`. */
export { formatDuration } from "../engine/duration.ts";

/** A reward or metric as tables print it: three decimals (`1.000`, `0.667`); `-` when there is none. */
export function formatReward(x: number | null | undefined): string {
  return x === null || x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(3);
}

/**
 * A trial or job status as tables print it: the stored word itself (never re-worded), coloured by what it means
 * (engine/trial/lifecycle.ts): SCORED and COMPLETED green, still going yellow, every other end red.
 */
export function statusWord(status: string): string {
  if (status === "SCORED" || status === "COMPLETED") return style.green(status);
  if (stillGoing(status)) return style.yellow(status);
  return style.red(status);
}

// what a trial calls its task lives beside the job summary, so the dashboard names tasks the same way

/**
 * A trial's exception on one line, as tables and progress lines show it: its type and its message's first line
 * (the line that says why, e.g. a build's failing step and error line), cut at `max` characters.
 */
export function exceptionLine(e: { type: string; message: string } | null | undefined, max = 160): string | undefined {
  if (!e) return undefined;
  const line = `${e.type}: ${e.message.split("\n")[0]}`;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
