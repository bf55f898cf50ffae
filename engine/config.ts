/**
 * Where evolve keeps its state and the user's settings from `$EVOLVE_HOME/config.toml`.
 * Read once per process; a malformed file is an environment error, never silently ignored.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { parse } from "smol-toml";
import { z } from "zod";
import type { Ceilings } from "./task/codes.ts";
import { EvolveError, firstLine } from "./errors.ts";

/** Ceilings that fit a large single GPU box; raise them in config.toml for bigger fleets. */
export const DEFAULT_CEILINGS: Ceilings = { cpus: 64, memory_mb: 512 * 1024, storage_mb: 2 * 1024 * 1024, gpus: 8 };

const ConfigSchema = z.object({
  ceilings: z
    .object({
      cpus: z.number().positive().optional(),
      memory_mb: z.number().positive().optional(),
      storage_mb: z.number().positive().optional(),
      gpus: z.number().int().nonnegative().optional(),
    })
    .strict()
    .optional(),
}).passthrough();

/** The settings evolve runs with, defaults filled in. */
export interface Config {
  home: string;
  ceilings: Ceilings;
}

/** Resolves `$EVOLVE_HOME`, defaulting to `~/.evolve`. */
export function evolveHome(env: Record<string, string | undefined> = process.env): string {
  const h = env.EVOLVE_HOME;
  return h && h.length > 0 ? h : join(homedir(), ".evolve");
}

/** Loads `$EVOLVE_HOME/config.toml` (absent is fine) and fills in defaults. */
export function loadConfig(home: string = evolveHome()): Config {
  const file = join(home, "config.toml");
  if (!existsSync(file)) return { home, ceilings: { ...DEFAULT_CEILINGS } };
  let raw: unknown;
  try {
    raw = parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new EvolveError("config_invalid", `${file} is not valid TOML: ${firstLine(e)}`, "fix or remove the file");
  }
  const r = ConfigSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new EvolveError("config_invalid", `${file}: ${i.path.join(".") || "(root)"}: ${i.message}`, "see README: Configuration");
  }
  return { home, ceilings: { ...DEFAULT_CEILINGS, ...(r.data.ceilings ?? {}) } };
}
