/**
 * `harness/config.json` read over {@link DEFAULT_CONDUCTOR_CONFIG}. Strict: an unknown key or a value of the wrong
 * type is an error naming the key, since a typo that silently keeps a default would make an evolved config change
 * nothing while it seemed to.
 */
import { readFileSync } from "node:fs";
import { EvolveError } from "../errors.ts";
import { AGENT_PATHS, agentPath, DEFAULT_CONDUCTOR_CONFIG, type ConductorConfig } from "./layout.ts";

const POSITIVE_INT = new Set(["max_turns", "context_budget_tokens", "max_observation_chars", "max_output_tokens"]);

/** The conductor's settings of the agent directory `root`: its config.json over the defaults (defaults alone when absent). */
export function readConductorConfig(root: string): ConductorConfig {
  const file = agentPath(root, AGENT_PATHS.config);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { ...DEFAULT_CONDUCTOR_CONFIG, disabled_tools: [] };
    throw invalid(`cannot read ${file}: ${(e as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw invalid(`${file} is not JSON: ${(e as Error).message}`);
  }
  return parseConductorConfig(raw, file);
}

/** Validates a parsed config.json (`where` names it in errors). */
export function parseConductorConfig(raw: unknown, where: string = AGENT_PATHS.config): ConductorConfig {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw invalid(`${where} must hold a JSON object`);
  const cfg: ConductorConfig = { ...DEFAULT_CONDUCTOR_CONFIG, disabled_tools: [] };
  for (const [k, v] of Object.entries(raw)) {
    if (!Object.hasOwn(DEFAULT_CONDUCTOR_CONFIG, k)) throw invalid(`${where}: unknown key "${k}" (known: ${Object.keys(DEFAULT_CONDUCTOR_CONFIG).join(", ")})`);
    if (k === "disabled_tools") {
      if (!Array.isArray(v) || v.some((t) => typeof t !== "string")) throw invalid(`${where}: disabled_tools must be an array of tool names`);
      cfg.disabled_tools = [...v];
    } else if (k === "shell_timeout_sec") {
      if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) throw invalid(`${where}: shell_timeout_sec must be a positive number of seconds`);
      cfg.shell_timeout_sec = v;
    } else if (POSITIVE_INT.has(k)) {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw invalid(`${where}: ${k} must be a whole number from 1`);
      (cfg as unknown as Record<string, number>)[k] = v;
    }
  }
  return cfg;
}

function invalid(message: string): EvolveError {
  return new EvolveError("conductor_config_invalid", message, `fix ${AGENT_PATHS.config} (every key is optional; see \`evolve harness init\`)`);
}
