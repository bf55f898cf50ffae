/**
 * Collecting findings for one task: severity from the code table unless a rule overrides it, line numbers from
 * the TOML line index, and the defensive readers rules use on raw (possibly ill-typed) TOML values.
 */
import { FINDING_CODES, type Finding, type FindingCode, type Severity } from "./codes.ts";
import type { KeyPath, TomlLineIndex } from "./toml-lines.ts";

/**
 * How many findings of one code a task's report keeps; past it, one summary finding of the same code says how many
 * more there were. One bound for every code, decided code by code: each code's findings are one per offending entry
 * (a host, a server, a service, a key, a line), fixed the same way, so the first hundred show the pattern and where it
 * starts, and the rest only grow the report (33k `build_context_outside_task` for a 1 MB compose file). No code needs
 * its every finding kept: the ones that name each offender are also the ones a 1 MB input repeats. Codes stay
 * stable: the summary carries the code it counts, so `--json` readers matching on codes see it with the rest.
 */
export const FINDINGS_PER_CODE = 100;

/** Accumulates findings for one task directory, at most {@link FINDINGS_PER_CODE} of each code. */
export class Findings {
  private readonly kept: Finding[] = [];
  /** Per code: how many were reported, and the first one past the bound (whose place the summary takes). */
  private readonly counts = new Map<FindingCode, { n: number; severity: Severity; firstDropped?: Finding }>();
  constructor(private readonly lines: TomlLineIndex | undefined) {}

  /** The findings kept, then one summary per code that went past the bound. */
  get list(): Finding[] {
    const out = [...this.kept];
    for (const [code, c] of this.counts) {
      const more = c.n - FINDINGS_PER_CODE;
      if (more <= 0 || c.firstDropped === undefined) continue;
      const f = c.firstDropped;
      out.push({
        ...f,
        severity: c.severity,
        message: `and ${more} more ${code} finding${more === 1 ? "" : "s"}, from here on (a report lists the first ${FINDINGS_PER_CODE} of each code)`,
        hint: "fix the ones listed the same way, and validate again to see the rest",
      });
    }
    return out;
  }

  /** A finding about a task.toml key; the line is looked up from `path` (only for a finding that is kept). */
  toml(code: FindingCode, path: KeyPath, message: Text, hint: Text, severity?: Severity): void {
    this.add(code, "task.toml", message, hint, () => this.lines?.lineOf(path), severity);
  }

  /**
   * A finding about any file of the task. A message or hint may be given as a function, called only when the finding
   * is kept: past the bound a rule pays for counting, not for building text nobody reads.
   */
  add(code: FindingCode, file: string, message: Text, hint: Text, line?: number | (() => number | undefined), severity?: Severity): void {
    const c = this.counts.get(code) ?? { n: 0, severity: "note" as Severity, firstDropped: undefined as Finding | undefined };
    this.counts.set(code, c);
    c.n++;
    const sev = severity ?? FINDING_CODES[code].severity;
    if (c.n > FINDINGS_PER_CODE) {
      // the summary is as severe as the worst finding it stands for, so a dropped error still refuses the task
      if (RANK[sev] > RANK[c.severity]) c.severity = sev;
      if (c.firstDropped !== undefined) return;
    }
    const f: Finding = { code, severity: sev, file, message: text(message), hint: text(hint) };
    const at = typeof line === "function" ? line() : line;
    if (at !== undefined) f.line = at;
    if (c.n > FINDINGS_PER_CODE) c.firstDropped = f;
    else this.kept.push(f);
  }
}

/** A message or hint, or a function that makes it (called only for a finding that is kept). */
export type Text = string | (() => string);
const text = (t: Text): string => (typeof t === "function" ? t() : t);
const RANK: Record<Severity, number> = { note: 0, warning: 1, error: 2 };

/** How many entries of a user-supplied list a message names before "… and N more", and how long each may be. */
export const LIST_SHOWN = 10;
const ENTRY_CHARS = 80;

/**
 * A user-supplied list for a message: its entries joined with ", ", at most {@link LIST_SHOWN} of them (then
 * "… and N more") and each cut to 80 characters, so a message that names a list stays a line long however long the
 * list (a 1 MB allowlist named in each of thousands of findings made a report of gigabytes). A short list reads
 * exactly as a plain join; an empty one as `none`.
 */
export function showList(items: readonly string[], none: string): string {
  if (items.length === 0) return none;
  const shown = items.slice(0, LIST_SHOWN).map((s) => (s.length > ENTRY_CHARS ? `${s.slice(0, ENTRY_CHARS - 3)}...` : s));
  const more = items.length - shown.length;
  return more > 0 ? `${shown.join(", ")} … and ${more} more` : shown.join(", ");
}

/** `environment.mcp_servers[0].url`-style rendering of a key path for messages. */
export function showPath(path: KeyPath): string {
  let s = "";
  for (const p of path) s += typeof p === "number" ? `[${p}]` : s === "" ? p : `.${p}`;
  return s === "" ? "(root)" : s;
}

/** A short, quoted rendering of a value for messages. */
export function showValue(v: unknown): string {
  if (v === undefined) return "nothing";
  if (typeof v === "string") return JSON.stringify(v.length > 80 ? v.slice(0, 77) + "..." : v);
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  if (v instanceof Date) return "a date";
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  return "a table";
}

/** The TOML type name of a value, for type-error messages. */
export function typeName(v: unknown): string {
  if (typeof v === "string") return "string";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "float";
  if (typeof v === "bigint") return "integer";
  if (typeof v === "boolean") return "boolean";
  if (v instanceof Date) return "date";
  if (Array.isArray(v)) return "array";
  if (v === undefined) return "nothing";
  return "table";
}

/** A plain table, or undefined for anything else. */
export function tbl(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date)
    ? (v as Record<string, unknown>)
    : undefined;
}

/** A string, or undefined. */
export function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** A finite number, or undefined. */
export function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/** An array, or an empty one. */
export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Levenshtein distance, for did-you-mean on unknown keys. */
export function editDistance(a: string, b: string): number {
  const dp = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = dp[0];
    dp[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = dp[j];
      dp[j] = Math.min(dp[j] + 1, dp[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return dp[b.length];
}

// each list's lower-cased names, made once per list: one rule asks about many names against the same list (100
// MCP hosts against 40k compose services lower-cased 4M strings, 100 MB of garbage)
const lowered = new WeakMap<readonly string[], string[]>();

/** The closest known key to `key` when it is close enough to be a typo, else undefined. */
export function didYouMean(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  const k = key.toLowerCase();
  let lower = lowered.get(known);
  if (lower === undefined) lowered.set(known, (lower = known.map((c) => c.toLowerCase())));
  for (let i = 0; i < known.length; i++) {
    const cand = known[i];
    const c = lower[i];
    // the distance is at least the lengths' difference: a candidate that cannot beat the best so far is not
    // measured (the same answer; 100 hosts against 40k compose services were 4M full distances)
    if (Math.abs(c.length - k.length) >= bestD) continue;
    const d = editDistance(k, c);
    if (d < bestD) {
      bestD = d;
      best = cand;
    }
  }
  if (best === undefined) return undefined;
  // `os_type` → `os`, `timeout` → `timeout_sec`: a known key plus or minus a `_suffix`
  const k_ = `${k}_`;
  const affix = known.find((c, i) => c.length >= 2 && ((k.startsWith(lower[i]) && k[lower[i].length] === "_") || lower[i].startsWith(k_)));
  // allow about a third of the key's length in edits, at least one; also catch `gpu` vs `gpus`-style prefixes
  const limit = Math.max(1, Math.floor(Math.max(key.length, best.length) / 3));
  if (bestD <= limit) return best;
  if (affix !== undefined) return affix;
  if (key.length >= 4 && (best.startsWith(k) || k.startsWith(best))) return best;
  return undefined;
}
