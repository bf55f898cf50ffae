/**
 * Printing for every command: colour only on a TTY and never with NO_COLOR, one-line errors with a stable code,
 * JSON documents for `--json`. Commands print only through here so the conventions hold everywhere.
 */
import type { ErrorCode } from "../engine/error-codes.ts";
import { EvolveError } from "../engine/errors.ts";
import { isTTY } from "../engine/runtime.ts";

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

/** Writes a value as one JSON document (pretty on a TTY, compact when piped for `jq`). */
export function outJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, isTTY(process.stdout) ? 2 : undefined) + "\n");
}

/** Prints rows as an aligned table with a header; empty cells print as `-`. */
export function outTable(header: string[], rows: (string | number | null | undefined)[][]): void {
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined || c === "" ? "-" : String(c))));
  // a loop, not Math.max(...cells): spreading a job's thousands of rows as arguments overflows the call stack
  const widths = header.map((h) => h.length);
  for (const r of cells) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  const fmt = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join("  ");
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

/** Prints an error to stderr and returns the exit status the convention gives it. */
export function reportError(err: unknown): 1 | 2 {
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

/** An ISO time as `YYYY-MM-DD HH:MM:SSZ` for tables; `-` when absent. */
export function when(iso: string | null | undefined): string {
  return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "-";
}

/**
 * A trial's exception on one line, as tables and progress lines show it: its type and its message's first line
 * (the line that says why, e.g. a build's failing step and error line), cut at `max` characters.
 */
export function exceptionLine(e: { type: string; message: string } | null | undefined, max = 160): string | undefined {
  if (!e) return undefined;
  const line = `${e.type}: ${e.message.split("\n")[0]}`;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
