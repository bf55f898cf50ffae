/**
 * `run -c run.toml` / `check -c run.toml`: a file of the command's own flags, so a run people repeat is written
 * down once. Its keys are the long flags without `--` (`n-concurrent` or `n_concurrent`), its values what the flag
 * takes (a list for a repeatable flag, a number for a numeric one, true/false for a switch). A flag given on the
 * command line wins over the file; the file wins over the defaults. A key that is no flag of the command, or a value
 * of the wrong type, is refused with the key named, before anything runs. This is argument parsing, so it lives
 * with the CLI: the engine only ever sees the merged options.
 */
import { MAX_CONFIG_BYTES, readRegularFile, RegularFileError } from "../engine/regular-file.ts";
import { dirname, isAbsolute, resolve } from "node:path";
import type { Command, Option } from "commander";
import { parse } from "smol-toml";
import { EvolveError, firstLine } from "../engine/errors.ts";

/** Flags that are not settings of a run and so have no key in the file. */
const NOT_KEYS = new Set(["config", "json", "help", "task"]);

type Kind = "list" | "number" | "boolean" | "string";

function kindOf(o: Option): Kind {
  if (Array.isArray(o.defaultValue)) return "list";
  if (o.isBoolean()) return "boolean";
  // choices() gives an option a parser too: it still takes a string
  if (o.argChoices) return "string";
  // a value flag with a parser and no list default is one of the numeric flags (-n, -k, -l, --max-retries, …)
  return o.parseArg ? "number" : "string";
}

/** The keys a run config file for `cmd` may hold, in the order its help lists them. */
export function runConfigKeys(cmd: Command): string[] {
  return cmd.options.map((o) => o.long?.replace(/^--/, "")).filter((k): k is string => k !== undefined && !NOT_KEYS.has(k));
}

/**
 * Reads `file` and returns `opts` with every key of it that no command-line flag overrides. `path` in the file is
 * relative to the file's own folder, so a run.toml kept beside its tasks works from anywhere.
 */
export function applyRunConfig<T extends Record<string, unknown>>(opts: T, cmd: Command, file: string): T {
  let text: string;
  try {
    text = readRegularFile(file, MAX_CONFIG_BYTES);
  } catch (e) {
    throw new EvolveError("run_config_invalid", `cannot read run config ${file}: ${e instanceof RegularFileError ? e.reason : firstLine(e)}`, "give -c the path of a TOML file");
  }
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (e) {
    throw new EvolveError("run_config_invalid", `${file} is not valid TOML: ${firstLine(e)}`, "see https://toml.io; keys are the flags without --, e.g. n-concurrent = 4");
  }
  return applyRunDoc(opts, cmd, doc, file);
}

/**
 * Returns `opts` with every key of `doc` (a run config's keys and values, from a file or an API request body named
 * `file` in errors) that no command-line flag overrides, each checked as the flag's own parser checks it.
 */
export function applyRunDoc<T extends Record<string, unknown>>(opts: T, cmd: Command, doc: Record<string, unknown>, file: string): T {
  const merged: Record<string, unknown> = { ...opts };
  const byKey = new Map(cmd.options.filter((o) => o.long && !NOT_KEYS.has(o.long.slice(2))).map((o) => [o.long!.slice(2), o]));
  for (const [rawKey, value] of Object.entries(doc)) {
    const key = rawKey.replaceAll("_", "-");
    const o = byKey.get(key);
    if (!o) {
      throw new EvolveError(
        "run_config_key_unknown",
        `${file}: unknown key ${JSON.stringify(rawKey)}: \`evolve ${cmd.name()}\` has no --${key}`,
        `keys are the flags without --: ${runConfigKeys(cmd).join(", ")}`,
      );
    }
    const attr = o.attributeName();
    if (cmd.getOptionValueSource(attr) === "cli") continue;
    merged[attr] = checkValue(file, rawKey, o, value);
  }
  // folders in the file are relative to the file's own folder
  for (const [attr, key] of [["path", "path"], ["agentRoot", "agent-root"]] as const) {
    const v = merged[attr];
    const given = doc[key] ?? doc[key.replaceAll("-", "_")];
    if (typeof v === "string" && typeof given === "string" && cmd.getOptionValueSource(attr) !== "cli" && !isAbsolute(v)) merged[attr] = resolve(dirname(file), v);
  }
  return merged as T;
}

function checkValue(file: string, key: string, o: Option, v: unknown): unknown {
  const bad = (want: string) =>
    new EvolveError("run_config_invalid", `${file}: ${key} must be ${want}, got ${JSON.stringify(v)}`, `e.g. ${key} = ${example(kindOf(o))}`);
  switch (kindOf(o)) {
    case "list": {
      const list = typeof v === "string" ? [v] : v;
      if (!Array.isArray(list) || !list.every((x) => typeof x === "string")) throw bad("a string or a list of strings");
      return list;
    }
    case "boolean":
      if (typeof v !== "boolean") throw bad("true or false");
      return v;
    case "number": {
      if (typeof v !== "number" && typeof v !== "bigint") throw bad("a number");
      // the flag's own parser (flags.ts) checks the range, as it does on the command line
      try {
        return o.parseArg ? o.parseArg(String(v), undefined) : Number(v);
      } catch (e) {
        if (e instanceof EvolveError) throw new EvolveError("run_config_invalid", `${file}: ${key}: ${e.message}`, `e.g. ${key} = ${example("number")}`);
        throw e;
      }
    }
    case "string": {
      // --max-spend-usd is checked as text by the command; a TOML number is the natural way to write it
      const s = typeof v === "number" ? String(v) : v;
      if (typeof s !== "string") throw bad("a string");
      if (o.argChoices && !o.argChoices.includes(s)) throw bad(`one of ${o.argChoices.join(", ")}`);
      return s;
    }
  }
}

function example(k: Kind): string {
  return k === "list" ? '["A", "B"]' : k === "boolean" ? "true" : k === "number" ? "4" : '"…"';
}
