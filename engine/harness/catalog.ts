/**
 * The agent CLIs evolve ships (one CliSpec module each under ./agents/). The list of the seven names is here so that
 * `agent list` and `agent register` know them before every module has landed; registered agents are manifest.ts's.
 */
import type { CliSpec } from "./cli-types.ts";
import { claudeCode } from "./agents/claude-code.ts";
import { codex } from "./agents/codex.ts";
import { conductor } from "./agents/conductor.ts";
import { droid } from "./agents/droid.ts";
import { geminiCli } from "./agents/gemini-cli.ts";
import { kimiCode } from "./agents/kimi-code.ts";
import { opencode } from "./agents/opencode.ts";
import { qwenCode } from "./agents/qwen-code.ts";

/**
 * The installed CLIs evolve knows by name (issue 11), in the order `agent list` shows them; `conductor` is evolve's own
 * (the evolve binary running `evolve conductor run` in the box, nothing vendored).
 */
export const CLI_AGENT_NAMES = ["claude-code", "codex", "gemini-cli", "qwen-code", "opencode", "droid", "kimi-code", "conductor"] as const;

/** The agents that are no CLI: the task's own solution, and the agent that does nothing. */
export const PLAIN_AGENT_NAMES = ["oracle", "nop"] as const;

// One import and one entry per CliSpec module under ./agents/ as it lands.
const BUILTIN_SPECS: readonly CliSpec[] = [claudeCode, codex, geminiCli, qwenCode, opencode, droid, kimiCode, conductor];

/** Whether `name` is an agent evolve ships (a registered agent cannot take it). */
export function isBuiltinAgentName(name: string): boolean {
  return (CLI_AGENT_NAMES as readonly string[]).includes(name) || (PLAIN_AGENT_NAMES as readonly string[]).includes(name);
}

/** The built-in CliSpecs whose modules are present. */
export function builtinSpecs(): readonly CliSpec[] {
  return BUILTIN_SPECS;
}
