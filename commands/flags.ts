/**
 * The one parser for every numeric flag, so each refuses a bad value the same way: `-k must be a positive integer,
 * got "abc"` (a usage error, exit 2), quoting what was typed instead of the `NaN` a bare Number() would leave.
 */
import type { ErrorCode } from "../engine/error-codes.ts";
import { EvolveError } from "../engine/errors.ts";

/** What a numeric flag accepts. */
export interface NumberRule {
  /** How the message names an acceptable value: `-k must be a <what>`. */
  what: string;
  integer: boolean;
  /** The least value accepted; `exclusive` refuses the bound itself (a positive number). */
  min: number;
  exclusive?: boolean;
  max?: number;
  /** An example value for the hint. */
  example: string;
  /** The code to refuse with (default `usage`). */
  code?: ErrorCode;
}

export const POSITIVE_INT: NumberRule = { what: "positive integer", integer: true, min: 1, example: "4" };
export const COUNT: NumberRule = { what: "non-negative integer", integer: true, min: 0, example: "2" };
export const POSITIVE: NumberRule = { what: "positive number", integer: false, min: 0, exclusive: true, example: "2" };
export const SECONDS: NumberRule = { what: "number of seconds ≥ 0", integer: false, min: 0, example: "30" };
export const PORT: NumberRule = { what: "port number from 0 to 65535", integer: true, min: 0, max: 65535, example: "4000" };

/** Parses `raw` as the value of `flag` under `rule`; throws the flag's one-line refusal otherwise. */
export function parseNumberFlag(flag: string, raw: string, rule: NumberRule): number {
  const text = raw.trim();
  // Number("") is 0 and Number("0x10") is 16: only plain decimal notation is a number here
  const n = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text) ? Number(text) : NaN;
  const ok =
    Number.isFinite(n) &&
    (!rule.integer || Number.isInteger(n)) &&
    (rule.exclusive ? n > rule.min : n >= rule.min) &&
    (rule.max === undefined || n <= rule.max);
  if (!ok) throw new EvolveError(rule.code ?? "usage", `${flag} must be a ${rule.what}, got ${JSON.stringify(raw)}`, `e.g. ${flag} ${rule.example}`);
  return n;
}

/** A commander argument parser for `flag` (the refusal propagates as an EvolveError, not commander's own text). */
export function numberFlag(flag: string, rule: NumberRule): (raw: string) => number {
  return (raw) => parseNumberFlag(flag, raw, rule);
}
