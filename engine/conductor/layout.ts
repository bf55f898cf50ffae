/**
 * The layout of an agent directory (`.agent/`): the policy the conductor runs with and the evolver changes. Every
 * path and default of it lives here; the conductor (engine/conductor), the harnesses that are handed a `.agent/`
 * (engine/harness/cli.ts) and the evolver (engine/evolve) all ask this module.
 *
 * ```
 * .agent/
 *   harness/PLANNING.md            planning seat: how the work is approached (absent: a built-in frame)
 *   harness/seats.json             {"memory"|"planning"|"capability"|"action": "module:function"} overrides
 *   harness/config.json            ConductorConfig (turn limit, context budget, disabled_tools, shell timeout)
 *   knowledge/*.md                 what the agent knows, appended to its instructions in name order
 *   protocols/tool_schemas/*.json  one tool each: {name, description, input_schema}
 *   hooks/pre_tool_call            optional executable: the call as JSON on stdin; exit 0 runs it, else its output is the veto
 *   memory/episodes.jsonl          episodic memory: one Episode per run (host runs; a trial's episode is its record)
 * ```
 */
import { join } from "node:path";

/** Paths inside an agent directory, relative to it. */
export const AGENT_PATHS = {
  planning: "harness/PLANNING.md",
  seats: "harness/seats.json",
  config: "harness/config.json",
  knowledge: "knowledge",
  toolSchemas: "protocols/tool_schemas",
  preToolCall: "hooks/pre_tool_call",
  episodes: "memory/episodes.jsonl",
} as const;

/** Where a `.agent/` handed to a trial is mounted in the agent's box (read-only). */
export const BOX_AGENT_ROOT = "/opt/evolve/agent-root";
/** Where the evolve binary is mounted in the box for the conductor (read-only). */
export const BOX_EVOLVE_BINARY = "/opt/evolve/bin/evolve";

/** The four seats of the conductor. */
export const SEAT_NAMES = ["memory", "planning", "capability", "action"] as const;
export type SeatName = (typeof SEAT_NAMES)[number];

/** The built-in tools (each has its schema in protocols/tool_schemas/<name>.json). */
export const TOOL_NAMES = ["shell", "read_file", "write_file", "edit_file", "finish"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/** `harness/config.json`: the conductor's runtime settings. Every key is optional; absent keys take the defaults. */
export interface ConductorConfig {
  /** Model turns before the run ends with outcome `max_turns`. */
  max_turns: number;
  /** Tokens (estimated at 4 characters a token) the memory seat keeps in a turn's context. */
  context_budget_tokens: number;
  /** Tools left out of the capability seat's list. */
  disabled_tools: string[];
  /** Seconds one shell command may run before it is killed (its result says so). */
  shell_timeout_sec: number;
  /** The largest tool output (characters) kept in the context; the rest is cut with a note. */
  max_observation_chars: number;
  /** The model's output limit per turn. */
  max_output_tokens: number;
}

/** The defaults of {@link ConductorConfig}. */
export const DEFAULT_CONDUCTOR_CONFIG: ConductorConfig = {
  max_turns: 30,
  context_budget_tokens: 32_000,
  disabled_tools: [],
  shell_timeout_sec: 120,
  max_observation_chars: 16_000,
  max_output_tokens: 4096,
};

/**
 * The most files a `.agent/` (memory/ aside) may hold, and their bytes: the one limit for every copy of one (a trial's
 * snapshot, an overlay, a scaffold, an install's backup), so what the evolver builds a trial can always take. A harness
 * is text a person edits; more than this is a mistake (a checkout, a dataset) rather than a policy.
 */
export const MAX_AGENT_FILES = 2000;
export const MAX_AGENT_BYTES = 32 * 1024 * 1024;

/** The absolute path of `rel` (an AGENT_PATHS entry) inside the agent directory `root`. */
export function agentPath(root: string, rel: string): string {
  return join(root, rel);
}
