/**
 * The conductor's contracts: what each seat is asked and answers, what one run is given and returns, and the
 * episodic memory record. The conductor (loop.ts) holds no strategy: every turn it asks the four seats and
 * assembles their answers into one model call. A `harness/seats.json` entry `"module:function"` replaces a seat
 * with a function of that shape, loaded at run time from a JS/TS module relative to the `.agent/`.
 */
import type { WireApi } from "../providers.ts";
import type { TraceUpdate } from "../trace/events.ts";
import type { ConductorConfig, SeatName } from "./layout.ts";

/** One tool as the model is offered it (`protocols/tool_schemas/<name>.json`). */
export interface ToolSchema {
  name: string;
  description: string;
  /** JSON Schema of the arguments (an object schema). */
  input_schema: Record<string, unknown>;
}

/** One tool call the model asked for. */
export interface ToolCall {
  id: string;
  name: string;
  /** The arguments; `{}` with `malformed` set when the model's arguments were not a JSON object. */
  input: Record<string, unknown>;
  /** Why the arguments could not be read, when they could not. */
  malformed?: string;
  /**
   * What the provider needs back with this call on the next request, opaque to everything but engine/conductor/model.ts
   * (Gemini's `thoughtSignature`, without which a thinking model refuses its own function call).
   */
  providerData?: Record<string, unknown>;
}

/** One entry of the run's history, in order: what the memory seat chooses from. */
export type HistoryEntry =
  | { kind: "instruction"; text: string }
  | { kind: "assistant"; text: string; toolCalls: ToolCall[]; turn: number }
  | { kind: "observation"; toolCallId: string; name: string; text: string; isError: boolean; turn: number };

/** What every seat is shown of the run so far. */
export interface SeatInput {
  /** The agent directory (absolute). */
  agentRoot: string;
  /** The working directory tools run in. */
  workdir: string;
  instruction: string;
  config: ConductorConfig;
  /** 1-based turn about to be taken. */
  turn: number;
  /** Everything so far (never trimmed: trimming is the memory seat's job). */
  history: readonly HistoryEntry[];
}

/** memory: what this turn sees. Returns the entries (a subset/summary of history, instruction first) sent to the model. */
export type MemorySeat = (input: SeatInput) => HistoryEntry[] | Promise<HistoryEntry[]>;
/** planning: the system prompt (the frame the work is approached in, knowledge included). */
export type PlanningSeat = (input: SeatInput) => string | Promise<string>;
/** capability: the tools offered this turn. */
export type CapabilitySeat = (input: SeatInput) => ToolSchema[] | Promise<ToolSchema[]>;
/** action: whether one call may run; a veto's reason is what the model sees as the call's result. */
export type ActionSeat = (call: ToolCall, input: SeatInput) => ActionVerdict | Promise<ActionVerdict>;
export type ActionVerdict = { allow: true } | { allow: false; reason: string };

/** The four seats, resolved (defaults or seats.json overrides). */
export interface Seats {
  memory: MemorySeat;
  planning: PlanningSeat;
  capability: CapabilitySeat;
  action: ActionSeat;
  /** Which seats came from seats.json, as `"module:function"`: recorded in the trace's first event. */
  overridden: Partial<Record<SeatName, string>>;
}

/** How the conductor reaches its model: always the gateway, in one of its wire APIs. */
export interface ModelEndpoint {
  api: WireApi;
  /** The gateway's root URL (no path): `/v1/messages`, `/v1/responses`, `/v1/chat/completions`, `/v1beta/models/…` below it. */
  baseUrl: string;
  key: string;
  /** The model name without its provider. */
  model: string;
}

/** How a run ended. */
export type ConductorOutcome = "finished" | "max_turns" | "model_error" | "timeout" | "aborted";

/** One run of the conductor on one instruction. */
export interface ConductorRunOptions {
  agentRoot: string;
  instruction: string;
  workdir: string;
  endpoint: ModelEndpoint;
  /** Each trace update as it happens (the parsed-trace vocabulary; the CLI prints them as JSON lines). */
  onTrace?: (u: TraceUpdate) => void;
  /** Wall-clock limit for the whole run. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Environment for shell commands (default: the process's). */
  env?: Record<string, string>;
}

/** What a run returns. */
export interface ConductorResult {
  outcome: ConductorOutcome;
  /** The `finish` tool's answer, else the last assistant text ("" when none): TASK_OUTPUT for a task card. */
  output: string;
  turns: number;
  /** Every trace update of the run, in order. */
  trace: TraceUpdate[];
  /** The failure's message, for outcomes other than `finished`. */
  error?: string;
  /**
   * Set (outcome `model_error`) when the model was never reached: the first call failed with no answer, an auth
   * failure, no such model or upstream, a provider's rate limit or a 5xx, never a budget's refusal (the gateway's
   * one rule, gateway/meter.ts unavailableFailure). Not a score.
   */
  model_unavailable?: boolean;
}

/**
 * One record of episodic memory (`memory/episodes.jsonl`): a run's outcome, its score when a check gave one, and the
 * trace events of each failure (a failed run's trace; a passing run's failed calls) so `harness diagnose` needs no other file.
 */
export interface Episode {
  /** Opaque id of the run. */
  id: string;
  /** ISO time the run ended. */
  at: string;
  /** The task card's id, or the trial id, when there was one. */
  task?: string;
  /** The card's domain (a diagnosis's skill). */
  domain?: string;
  outcome: ConductorOutcome;
  /** 0..1 when checked, null when nothing scored the run. */
  score: number | null;
  turns: number;
  /**
   * The trace events that show what went wrong: a failed run's whole trace (bounded, usage left out), so every
   * pathology a trace shows can be read from memory alone; a passing run's failed tool calls only (empty when clean).
   */
  failures: TraceUpdate[];
  /** `full`: `failures` is the run's trace; `failures`: only its failure events (a passing run, or an older record). */
  trace?: "full" | "failures";
}
