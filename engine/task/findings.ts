/**
 * Collecting findings for one task: severity from the code table unless a rule overrides it, line numbers from
 * the TOML line index, and the defensive readers rules use on raw (possibly ill-typed) TOML values.
 */
import { FINDING_CODES, type Finding, type FindingCode, type Severity } from "./codes.ts";
import type { KeyPath, TomlLineIndex } from "./toml-lines.ts";

/** Accumulates findings for one task directory. */
export class Findings {
  readonly list: Finding[] = [];
  constructor(private readonly lines: TomlLineIndex | undefined) {}

  /** A finding about a task.toml key; the line is looked up from `path`. */
  toml(code: FindingCode, path: KeyPath, message: string, hint: string, severity?: Severity): void {
    this.add(code, "task.toml", message, hint, this.lines?.lineOf(path), severity);
  }

  /** A finding about any file of the task. */
  add(code: FindingCode, file: string, message: string, hint: string, line?: number, severity?: Severity): void {
    const f: Finding = { code, severity: severity ?? FINDING_CODES[code].severity, file, message, hint };
    if (line !== undefined) f.line = line;
    this.list.push(f);
  }
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

/** The closest known key to `key` when it is close enough to be a typo, else undefined. */
export function didYouMean(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  const k = key.toLowerCase();
  for (const cand of known) {
    const d = editDistance(k, cand.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = cand;
    }
  }
  if (best === undefined) return undefined;
  // `os_type` → `os`, `timeout` → `timeout_sec`: a known key plus or minus a `_suffix`
  const affix = known.find((c) => c.length >= 2 && (k.startsWith(c.toLowerCase() + "_") || c.toLowerCase().startsWith(k + "_")));
  // allow about a third of the key's length in edits, at least one; also catch `gpu` vs `gpus`-style prefixes
  const limit = Math.max(1, Math.floor(Math.max(key.length, best.length) / 3));
  if (bestD <= limit) return best;
  if (affix !== undefined) return affix;
  if (key.length >= 4 && (best.startsWith(k) || k.startsWith(best))) return best;
  return undefined;
}
