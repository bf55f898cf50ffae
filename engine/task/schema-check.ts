/**
 * Turns the strict schema's issues into findings: unknown keys (with did-you-mean), type errors, bad enum values
 * and missing required keys, each with its key path and line.
 */
import type { z } from "zod";
import { didYouMean, type Findings, showPath, showValue, tbl, typeName } from "./findings.ts";
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

/** How a user names the table at `path`: `the top level`, `[verifier.environment]`, `[[steps]]`, `[steps.agent]`. */
function tableName(path: KeyPath): string {
  if (path.length === 0) return "the top level";
  const dotted = path.filter((p): p is string => typeof p === "string").join(".");
  return typeof path[path.length - 1] === "number" ? `[[${dotted}]]` : `[${dotted}]`;
}

/** Depth of a table, for listing a key's homes outermost first. */
const depth = (table: string) => (table === "the top level" ? 0 : table.split(".").length);

let homesCache: Map<string, string[]> | undefined;

/**
 * Every key of the schema with the tables that know it (free-form tables such as `[metadata]` and env tables
 * hold any key, so they are no key's home), walked once from the schema so it cannot drift from the model.
 */
function keyHomes(): Map<string, string[]> {
  if (homesCache) return homesCache;
  const homes = new Map<string, string[]>();
  const walk = (s: AnySchema, path: KeyPath) => {
    const def = s?._zod?.def;
    if (def?.type !== "object") return;
    const table = tableName(path);
    for (const [k, child] of Object.entries(def.shape)) {
      homes.set(k, [...(homes.get(k) ?? []), table]);
      const c = unwrap(child);
      if (c?._zod?.def?.type === "object") walk(c, [...path, k]);
      else if (c?._zod?.def?.type === "array") walk(unwrap(c._zod.def.element), [...path, k, 0]);
    }
  };
  walk(unwrap(StrictTaskSchema), []);
  for (const [k, tables] of homes) homes.set(k, [...new Set(tables)].sort((a, b) => depth(a) - depth(b)));
  homesCache = homes;
  return homes;
}

/** Where else `key` is known, besides `table` (at most three named, outermost first). */
function otherHomes(key: string, table: string): string[] {
  return (keyHomes().get(key) ?? []).filter((t) => t !== table);
}

function showHomes(homes: string[]): string {
  const named = homes.slice(0, 3);
  const more = homes.length > named.length ? ` (or ${homes.length - named.length} more)` : "";
  return `${named.length > 1 ? `${named.slice(0, -1).join(", ")} or ${named[named.length - 1]}` : named[0]}${more}`;
}

/**
 * `[metadata]` keys that are words of the description as much as keys of the model (a task's `name`, its `source`,
 * its `os`): metadata may hold them for its own purposes, so only the model's distinctive keys are called misplaced.
 */
const METADATA_WORDS = new Set([
  "name", "version", "description", "keywords", "authors", "email", "source", "os", "user", "env", "type", "topology",
  "command", "args", "url", "transport", "service", "retries",
]);

function reportWrongTable(out: Findings, kp: KeyPath, key: string, table: string, homes: string[]): void {
  const where = showHomes(homes);
  const top = homes[0] === "the top level";
  out.toml(
    "key_in_wrong_table",
    kp,
    `\`${key}\` is in ${table}, where it does nothing: it belongs ${top ? "at" : "in"} ${where}`,
    top && homes.length === 1
      ? `move \`${key} = …\` above the first [table] header of task.toml`
      : `move \`${key} = …\` under ${where}`,
  );
}

/**
 * A model key written in `[metadata]` (the classic: `multi_step_reward_strategy` under `[metadata]`, where a key
 * placed after the header lands): metadata takes any key, so the schema is silent about it.
 */
function checkMetadata(raw: unknown, out: Findings): void {
  const meta = tbl(tbl(raw)?.metadata);
  if (!meta) return;
  for (const key of Object.keys(meta)) {
    if (METADATA_WORDS.has(key)) continue;
    const homes = otherHomes(key, "[metadata]");
    if (homes.length > 0) reportWrongTable(out, ["metadata", key], key, "[metadata]", homes);
  }
}

/** Runs the strict schema over raw TOML and records schema findings. Returns whether the schema passed. */
export function checkSchema(raw: unknown, out: Findings): boolean {
  checkMetadata(raw, out);
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
        // a key the model knows, only not here: say where it goes rather than offer a look-alike
        const homes = otherHomes(key, tableName(path));
        if (homes.length > 0) {
          reportWrongTable(out, kp, key, tableName(path), homes);
          continue;
        }
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
