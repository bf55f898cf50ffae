/**
 * The trace filters as a user spells them (`--type`, `--grep`; the local API's `type` and `grep`), checked once
 * here so that `trial trace`, `job grep` and the API refuse the same input the same way.
 */
import { EvolveError } from "../errors.ts";
import { TRACE_KINDS, type TraceKind } from "./events.ts";

/** `--type` values (repeatable, or comma lists) checked against the trace's kinds. */
export function parseKinds(values: readonly string[] | undefined, flag = "--type"): TraceKind[] | undefined {
  if (!values || values.length === 0) return undefined;
  const out: TraceKind[] = [];
  for (const v of values.flatMap((x) => x.split(",")).map((x) => x.trim()).filter(Boolean)) {
    if (!(TRACE_KINDS as readonly string[]).includes(v)) throw new EvolveError("trace_kind_unknown", `${flag} ${v}: no such event kind`, `kinds: ${TRACE_KINDS.join(", ")}`);
    out.push(v as TraceKind);
  }
  return out;
}

/** `--grep`'s regex: case-insensitive; one that does not compile is a usage error naming why. */
export function parseGrep(src: string | undefined, flag = "--grep"): RegExp | undefined {
  if (src === undefined) return undefined;
  try {
    return new RegExp(src, "i");
  } catch (e) {
    throw new EvolveError("usage", `${flag} ${JSON.stringify(src)} is not a regular expression: ${(e as Error).message}`, "the pattern is a JavaScript regex, matched case-insensitively; escape ( [ { with \\");
  }
}
