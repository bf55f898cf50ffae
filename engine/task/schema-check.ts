/**
 * Turns the strict schema's issues into findings: unknown keys (with did-you-mean), type errors, bad enum values
 * and missing required keys, each with its key path and line.
 */
import type { z } from "zod";
import { didYouMean, type Findings, showPath, showValue, typeName } from "./findings.ts";
import { StrictTaskSchema } from "./model.ts";
import type { KeyPath } from "./toml-lines.ts";

/** Legacy keys: known to the schema but left out of the list of keys a hint suggests. */
const DEPRECATED: Record<string, string> = {
  version: "schema_version",
  allow_internet: "network_mode",
  memory: "memory_mb",
  storage: "storage_mb",
};

// zod 4 exposes its definition tree on `_zod.def`; walking it gives the known keys at any path
// deno-lint-ignore no-explicit-any
type AnySchema = any;

function unwrap(s: AnySchema): AnySchema {
  while (s?._zod?.def && ["optional", "default", "prefault", "nullable"].includes(s._zod.def.type)) s = s._zod.def.innerType;
  return s;
}

/** The object schema reached by `path`, if the path leads to one. */
function schemaAt(root: AnySchema, path: KeyPath): AnySchema | undefined {
  let s = unwrap(root);
  for (const p of path) {
    const def = s?._zod?.def;
    if (!def) return undefined;
    if (def.type === "object" && typeof p === "string") s = unwrap(def.shape[p]);
    else if (def.type === "array" && typeof p === "number") s = unwrap(def.element);
    else if (def.type === "record") s = unwrap(def.valueType);
    else return undefined;
  }
  return s;
}

function knownKeys(path: KeyPath): string[] {
  const s = schemaAt(StrictTaskSchema, path);
  return s?._zod?.def?.type === "object" ? Object.keys(s._zod.def.shape) : [];
}

function valueAt(raw: unknown, path: KeyPath): unknown {
  let v: unknown = raw;
  for (const p of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<string | number, unknown>)[p];
  }
  return v;
}

/** Runs the strict schema over raw TOML and records schema findings. Returns whether the schema passed. */
export function checkSchema(raw: unknown, out: Findings): boolean {
  const r = StrictTaskSchema.safeParse(raw);
  if (r.success) return true;
  for (const issue of r.error.issues) reportIssue(issue, raw, out);
  return false;
}

// Names other tools use for a key, too far from ours for an edit-distance guess.
const ALIASES: Record<string, string> = {
  image: "docker_image",
  internet: "network_mode",
  network: "network_mode",
  timeout: "timeout_sec",
};

function reportIssue(issue: z.core.$ZodIssue, raw: unknown, out: Findings): void {
  const path = issue.path.filter((p): p is string | number => typeof p !== "symbol");
  const where = showPath(path);
  const value = valueAt(raw, path);
  switch (issue.code) {
    case "unrecognized_keys": {
      const known = knownKeys(path);
      for (const key of issue.keys) {
        const kp = [...path, key];
        const alias = ALIASES[key.toLowerCase()];
        const guess = alias !== undefined && known.includes(alias) ? alias : didYouMean(key, known);
        const table = path.length === 0 ? "the top level" : `[${showPath(path)}]`;
        out.toml(
          "unknown_key",
          kp,
          `unknown key \`${key}\` in ${table}: evolve and Harbor ignore it`,
          guess !== undefined
            ? `did you mean \`${guess}\`?`
            : `known keys here: ${known.filter((k) => !(k in DEPRECATED)).join(", ") || "none"}`,
        );
      }
      return;
    }
    case "invalid_type": {
      if (value === undefined) {
        out.toml("missing_required_key", path, `${where} is required but missing`, `add \`${path[path.length - 1]} = …\``);
        return;
      }
      const name = TYPE_NAMES[String(issue.expected)] ?? String(issue.expected);
      const expected = `${article(name)} ${name}`;
      out.toml("invalid_type", path, `${where} must be ${expected}, got ${typeName(value)} ${showValue(value)}`, `set ${where} to ${expected}`);
      return;
    }
    case "invalid_union": {
      const expected = [
        ...new Set(
          issue.errors
            .flat()
            .map((e) => (e.code === "invalid_type" ? (TYPE_NAMES[String(e.expected)] ?? String(e.expected)) : ""))
            .filter((e) => e !== ""),
        ),
      ];
      const what = expected.length > 0 ? expected.join(" or ") : "a supported value";
      if (value === undefined) {
        out.toml("missing_required_key", path, `${where} is required but missing`, `add \`${path[path.length - 1]} = …\``);
        return;
      }
      out.toml("invalid_type", path, `${where} must be ${what}, got ${typeName(value)} ${showValue(value)}`, `set ${where} to ${what}`);
      return;
    }
    case "invalid_value": {
      const opts = issue.values.map((v) => JSON.stringify(v)).join(", ");
      out.toml("invalid_value", path, `${where} = ${showValue(value)} is not one of ${opts}`, `use one of ${opts}`);
      return;
    }
    case "too_small":
    case "too_big":
    case "not_multiple_of":
    case "invalid_format": {
      out.toml("invalid_value", path, `${where} = ${showValue(value)} is out of range: ${issue.message}`, `fix ${where}`);
      return;
    }
    default: {
      out.toml("invalid_value", path, `${where} = ${showValue(value)}: ${issue.message}`, `fix ${where}`);
    }
  }
}

const TYPE_NAMES: Record<string, string> = { int: "integer", object: "table", record: "table" };

function article(word: string): string {
  return /^[aeiou]/i.test(word) ? "an" : "a";
}
