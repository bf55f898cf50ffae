/**
 * The pathology catalogue: every way a failed run can go wrong that its trace can show, with the detector that finds
 * it and the `.agent/` file a candidate would change to address it (harness-evolution.md: `diagnose` → `(skill,
 * pathology)` diagnoses with trace events). Ids are a stable contract like the validator's codes (engine/task/codes.ts):
 * a gene bank cell and a candidate's descriptor name them, so an id is never renamed once shipped. docs/pathologies.md
 * is the catalogue for people; engine/evolve/pathologies.test.ts checks it says what this registry says, and gives every
 * entry a run that shows it and a near miss that must not.
 *
 * Detectors read any harness's trace, not only the conductor's: they go by the event kinds of engine/trace/events.ts,
 * a tool call's `kind`, `title` and `rawInput`, and the wording of errors as each provider and CLI phrases them. They
 * are pure and total: a trace of any shape (a torn one, one of another harness) gives evidence or null, never a throw.
 */
import { AGENT_PATHS } from "../conductor/layout.ts";
import type { TraceUpdate, ToolCallStatusUpdate, ToolCallUpdate } from "../trace/events.ts";
import type { Where } from "./types.ts";

/**
 * One run as the detectors see it: a task card's run from episodic memory, or a trial of a job.
 * `trace` says how much of the run `events` holds: `full` (a trial's stored trace) or `failures` (an episode keeps
 * only the events of what went wrong, so the absence of an event there proves nothing and the detectors that need
 * the whole run, such as `no_action`, decline).
 */
export interface RunEvidence {
  /** The episode id or the trial id. */
  id: string;
  /** The card id or the task name. */
  task: string;
  /** The skill the run exercises: the card's domain, or the task's org / dataset name. */
  domain: string;
  /** How the run ended: a ConductorOutcome (`finished`, `max_turns`, `model_error`, `timeout`, `aborted`) or, for a trial, what its record says (runsFromJob). */
  outcome: string;
  /** 0..1 when something scored the run, null when nothing did. */
  score: number | null;
  /** A trial's status (SCORED, BUDGET, …). */
  status?: string;
  /** A trial's exception type (AgentTimeoutError, …). */
  exception?: string;
  /** The run's trace events, in order (each may carry its `seq`). */
  events: TraceUpdate[];
  /** How much of the run `events` holds (default `full`). */
  trace?: "full" | "failures";
}

/** One entry of the catalogue. */
export interface PathologyDef {
  /** Stable snake_case id. */
  id: string;
  /** A few words for listings. */
  title: string;
  /** One paragraph: what the trace shows. */
  description: string;
  /** The AGENT_PATHS entry a candidate addressing it would change. */
  points_at: string;
  /** The kind of candidate that addresses it. */
  where: Where;
  /** The events that show the pathology in `run` (possibly none, when the run's record alone shows it), or null when it does not. */
  detect(run: RunEvidence): TraceUpdate[] | null;
}

// ---- reading events generically -------------------------------------------------------------------------------

type Call = { event: TraceUpdate; update: ToolCallUpdate; index: number };
type Result = { event: TraceUpdate; update: ToolCallStatusUpdate | ToolCallUpdate; index: number };

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** The update of an event, when it has one of the expected shape (a hand-written or damaged trace may not). */
function upd(e: TraceUpdate): Record<string, unknown> | undefined {
  const d = (e as { data?: unknown }).data;
  return isObj(d) && isObj(d.update) ? d.update : undefined;
}

function calls(events: readonly TraceUpdate[]): Call[] {
  const out: Call[] = [];
  events.forEach((event, index) => {
    const u = upd(event);
    if (event.type === "tool_call" && u && typeof u.toolCallId === "string") out.push({ event, update: u as unknown as ToolCallUpdate, index });
  });
  return out;
}

/**
 * Each call's final status, in the order the calls ended: a `tool_call_update` that completed or failed, or a
 * `tool_call` recorded already ended (some parsers emit the call once its result is known).
 */
function results(events: readonly TraceUpdate[]): Result[] {
  const out: Result[] = [];
  events.forEach((event, index) => {
    const u = upd(event);
    if (!u || (event.type !== "tool_call_update" && event.type !== "tool_call")) return;
    if (u.status === "completed" || u.status === "failed") out.push({ event, update: u as unknown as ToolCallStatusUpdate, index });
  });
  return out;
}

/** The text of a tool result (its content blocks), or of a chunk. */
function textOf(e: TraceUpdate): string {
  const u = upd(e);
  if (!u) return "";
  const c = u.content;
  if (isObj(c) && typeof c.text === "string") return c.text;
  if (Array.isArray(c)) {
    return c
      .map((b) => (isObj(b) && isObj(b.content) && typeof b.content.text === "string" ? b.content.text : isObj(b) && typeof b.text === "string" ? b.text : ""))
      .join("\n");
  }
  if (typeof u.message === "string") return u.message;
  return "";
}

/** A long text's start and end: where a tool result or an error says what happened. */
function ends(s: string, n = 2000): string {
  return s.length <= 2 * n ? s : `${s.slice(0, n)}\n${s.slice(-n)}`;
}

const meta = (e: TraceUpdate): Record<string, unknown> => {
  const m = upd(e)?._meta;
  return isObj(m) ? m : {};
};

const isVetoed = (e: TraceUpdate) => meta(e).vetoed === true || VETO_TEXT.test(ends(textOf(e)));
const isMalformed = (e: TraceUpdate) => typeof meta(e).malformed === "string" || MALFORMED_TEXT.test(ends(textOf(e)));

/** The errors of a run, with their messages. */
function errors(events: readonly TraceUpdate[]): { event: TraceUpdate; message: string; fatal: boolean }[] {
  const out: { event: TraceUpdate; message: string; fatal: boolean }[] = [];
  for (const event of events) {
    const u = upd(event);
    if (event.type === "error" && u) out.push({ event, message: typeof u.message === "string" ? u.message : "", fatal: u.fatal !== false });
  }
  return out;
}

/**
 * A call's command: `rawInput.command` (a string, or an argv array), else the title of an `execute` call. Spaces are
 * collapsed so the same command typed twice is the same.
 */
export function commandOf(u: ToolCallUpdate): string | undefined {
  const raw = isObj(u.rawInput) ? u.rawInput.command ?? u.rawInput.cmd : undefined;
  let cmd: string | undefined;
  if (typeof raw === "string") cmd = raw;
  else if (Array.isArray(raw) && raw.every((x) => typeof x === "string")) cmd = raw.join(" ");
  else if (u.kind === "execute" && typeof u.title === "string") cmd = u.title;
  const s = cmd?.trim().replace(/\s+/g, " ");
  return s ? s : undefined;
}

/** The conductor's `finish` tool (layout.ts TOOL_NAMES): the agent saying it is done. */
const isFinish = (u: ToolCallUpdate) => u.name === "finish";
/** Calls that change the world: a repeated command after one of these may see a different world. */
const CHANGES = new Set(["edit", "delete", "move"]);
const changesFiles = (u: ToolCallUpdate) => CHANGES.has(u.kind) || u.name === "write_file" || u.name === "edit_file";

/** The run failed: it scored below 1 or nothing scored it, or it did not end finished. */
export function isFailed(run: RunEvidence): boolean {
  return run.score === null || run.score < 1 || run.outcome !== "finished";
}

/**
 * The agent's last answer: the `finish` call, when the run ended with one after its last message, else the message
 * chunks at the end of the trace (after its last tool call or result), in order.
 */
function lastAnswer(events: readonly TraceUpdate[]): { events: TraceUpdate[]; text: string } {
  let i = events.length - 1;
  const chunks: TraceUpdate[] = [];
  for (; i >= 0; i--) {
    const e = events[i];
    if (e.type === "agent_message_chunk") chunks.unshift(e);
    else if (e.type === "tool_call") {
      const u = upd(e) as unknown as ToolCallUpdate | undefined;
      if (u && isFinish(u) && chunks.length === 0) return { events: [e], text: Object.values(u.rawInput ?? {}).filter((v) => typeof v === "string").join("\n") };
      break;
    } else if (e.type === "tool_call_update") {
      // the finish call's own result: look past it for the call
      if (chunks.length === 0) continue;
      break;
    } else if (e.type === "user_message_chunk" || e.type === "prompt") break;
    // usage, thoughts, plans, errors: not part of the answer, not its end either
  }
  return { events: chunks, text: chunks.map(textOf).join("") };
}

// ---- the wording of errors, as providers and CLIs phrase them ----------------------------------------------------

/**
 * A context window overflow in any provider's or CLI's words: Anthropic `prompt is too long: 208000 tokens > 200000
 * maximum`, OpenAI `This model's maximum context length is 128000 tokens` / `context_length_exceeded` / `Your input
 * exceeds the context window of this model`, Codex `ran out of room in the model's context window`, Gemini `The input
 * token count (1200000) exceeds the maximum number of tokens allowed (1048576)`, Moonshot `exceeded model token limit`,
 * Bedrock `Input is too long for requested model`, vLLM/Mistral `too large for model with 32768 maximum context length`.
 */
export const CONTEXT_OVERFLOW_TEXT =
  /prompt is too long|input is too long|maximum context length|context[_ ]length[_ ]exceeded|context[_ ]window[_ ]exceeded|exceeds? the context window|out of room in the model'?s context window|context window (is )?(full|exceeded)|too many (input |prompt )?tokens|input token count .{0,40}exceeds|exceeded model token limit|reduce the length of the (messages|prompt|input)|ContextWindowExceeded|context (length|size) (of \d+ )?(is )?exceeded/i;

/**
 * A budget or turn limit reached: the gateway's refusal (`trial: … budget of $1.00 would be exceeded`, a spend cap),
 * a CLI's turn limit (claude-code `error_max_turns`, `Reached max turns`, gemini-cli `MAX_TURNS`), a budget subtype
 * (`error_max_budget_usd`), a provider's quota (`insufficient_quota`, `usage limit`).
 */
export const BUDGET_TEXT =
  /budget of .{0,40}would be exceeded|spend cap|error_max_budget|max[_ ]?budget|max(imum)?[_ ]?(session[_ ])?turns|turn limit|maximum number of turns|insufficient_quota|usage limit|credit balance is too low|budget (exhausted|exceeded|reached)/i;

/** A tool result saying the command was stopped for running too long (claude-code `Command timed out after 2m 0.0s`, the conductor's shell timeout). */
const TOOL_TIMEOUT_TEXT = /\btimed out after\b|\b(command|process|execution|tool call)( was)? (timed out|killed)\b|\bkilled after \d|\btimeout of \d+\s*(ms|s|sec|seconds|m)?\b.{0,20}\b(exceeded|reached)\b/i;

/**
 * The action seat (a pre-tool hook, a CLI's permission system) refused the call: claude-code `Claude requested
 * permissions to use Bash, but you haven't granted it yet`, a hook's block. Not a shell's own `Permission denied`.
 */
const VETO_TEXT = /requested permissions? to use|haven'?t granted it yet|permission to use \S+ (has been|was) denied|blocked by (a |the )?\S*\s?hook|\bvetoed\b|user (doesn'?t want to proceed|rejected) (with )?this tool/i;

/** The call's arguments could not be used: bad JSON, a schema violation, a tool that does not exist. */
const MALFORMED_TEXT =
  /InputValidationError|invalid (tool )?(input|arguments|parameters|params)\b|failed to parse (function |tool )?(call )?arguments|arguments? (is|are|were) not valid JSON|must have required property|missing required (parameter|argument|field)|No such tool available|unknown tool\b|tool \S+ (is )?not found|tool_use_error/i;

/** Words an answer uses to say the task is done. */
const CLAIM = /\b(done|complete[ds]?|finished|fixed|solved|resolved|succeeded|successful(ly)?|implemented|accomplished|works( now| correctly)?|pass(es|ed|ing)?)\b/gi;
/**
 * Words that, a few words before a claim in the same sentence, take it back (`could not complete`, `not fixed yet`,
 * `haven't been able to get it passing`). A bare `no` only counts right before the claim (`no passing tests`), so
 * `No errors, all done` is still a claim.
 */
const NEGATION = /\b(not|never|unable|cannot|can'?t|couldn'?t|didn'?t|doesn'?t|don'?t|isn'?t|aren'?t|wasn'?t|weren'?t|won'?t|haven'?t|hasn'?t|failed|fails|fail|yet to|without|neither|nor)\b/i;

/** Whether `text` claims success: a claim word not taken back by a negation just before it in its sentence. */
export function claimsSuccess(text: string): boolean {
  for (const m of text.matchAll(CLAIM)) {
    const sentence = text.slice(Math.max(0, m.index - 120), m.index).split(/[.!?;\n]/).at(-1) ?? "";
    const words = sentence.trim().split(/\s+/).filter(Boolean);
    if (NEGATION.test(words.slice(-8).join(" "))) continue;
    if (/^no$/i.test(words.at(-1) ?? "") || /^no$/i.test(words.at(-2) ?? "")) continue;
    return true;
  }
  return false;
}

// ---- the detectors ------------------------------------------------------------------------------------------

const nonUsage = (events: readonly TraceUpdate[]) => events.filter((e) => e.type !== "usage");

function timeout(run: RunEvidence): TraceUpdate[] | null {
  if (run.outcome !== "timeout" && run.exception !== "AgentTimeoutError") return null;
  // what it was doing when the time ran out
  return nonUsage(run.events).slice(-3);
}

/** The longest run of failed calls in a row (vetoes and malformed calls have their own entries and break no streak). */
function toolErrorLoop(run: RunEvidence): TraceUpdate[] | null {
  const byId = new Map(calls(run.events).map((c) => [c.update.toolCallId, c.event]));
  let best: Result[] = [];
  let cur: Result[] = [];
  for (const r of results(run.events)) {
    if (isVetoed(r.event) || isMalformed(r.event)) continue;
    if (r.update.status === "failed") cur.push(r);
    else cur = [];
    if (cur.length > best.length) best = [...cur];
  }
  if (best.length < 3) return null;
  return best.flatMap((r) => {
    const call = byId.get(r.update.toolCallId);
    return call && call !== r.event ? [call, r.event] : [r.event];
  });
}

function repeatedCommand(run: RunEvidence): TraceUpdate[] | null {
  // occurrences of each command since the last call that changed files
  let seen = new Map<string, TraceUpdate[]>();
  let worst: TraceUpdate[] = [];
  for (const c of calls(run.events)) {
    if (changesFiles(c.update)) {
      seen = new Map();
      continue;
    }
    const cmd = commandOf(c.update);
    if (!cmd) continue;
    const list = seen.get(cmd) ?? [];
    list.push(c.event);
    seen.set(cmd, list);
    if (list.length > worst.length) worst = list;
  }
  return worst.length >= 3 ? worst : null;
}

function prematureFinish(run: RunEvidence): TraceUpdate[] | null {
  if (run.outcome !== "finished" || !isFailed(run) || run.trace === "failures") return null;
  const all = calls(run.events);
  const finish = all.find((c) => isFinish(c.update));
  if (!finish) return null;
  const before = all.filter((c) => c.index < finish.index && !isFinish(c.update));
  // the first turn: no tool result had come back when it finished
  const firstResult = results(run.events).find((r) => r.event.type === "tool_call_update");
  const firstTurn = !firstResult || firstResult.index > finish.index;
  if (before.length > 0 && !firstTurn) return null;
  return [...before.map((c) => c.event), finish.event];
}

function contextOverflow(run: RunEvidence): TraceUpdate[] | null {
  const hits = errors(run.events).filter((e) => CONTEXT_OVERFLOW_TEXT.test(e.message));
  return hits.length > 0 ? hits.map((e) => e.event) : null;
}

function malformedToolCall(run: RunEvidence): TraceUpdate[] | null {
  const byId = new Map(calls(run.events).map((c) => [c.update.toolCallId, c.event]));
  const hits = results(run.events).filter((r) => r.update.status === "failed" && !isVetoed(r.event) && isMalformed(r.event));
  if (hits.length === 0) return null;
  return hits.flatMap((r) => {
    const call = byId.get(r.update.toolCallId);
    return call && call !== r.event ? [call, r.event] : [r.event];
  });
}

function vetoedAction(run: RunEvidence): TraceUpdate[] | null {
  const byId = new Map(calls(run.events).map((c) => [c.update.toolCallId, c.event]));
  const hits = results(run.events).filter((r) => r.update.status === "failed" && isVetoed(r.event));
  if (hits.length === 0) return null;
  return hits.flatMap((r) => {
    const call = byId.get(r.update.toolCallId);
    return call && call !== r.event ? [call, r.event] : [r.event];
  });
}

const BUDGET_EXCEPTIONS = new Set(["ApiUsageLimitError", "AgentSpendCapError"]);

function budgetExhausted(run: RunEvidence): TraceUpdate[] | null {
  const hits = errors(run.events).filter((e) => BUDGET_TEXT.test(e.message) && !CONTEXT_OVERFLOW_TEXT.test(e.message));
  if (hits.length > 0) return hits.map((e) => e.event);
  if (run.outcome === "max_turns" || run.outcome === "budget" || run.status === "BUDGET" || BUDGET_EXCEPTIONS.has(run.exception ?? "")) return nonUsage(run.events).slice(-2);
  return null;
}

function verifierDisagreement(run: RunEvidence): TraceUpdate[] | null {
  if (run.score === null || run.score > 0 || run.trace === "failures") return null;
  const answer = lastAnswer(run.events);
  return answer.events.length > 0 && claimsSuccess(answer.text) ? answer.events : null;
}

function noAction(run: RunEvidence): TraceUpdate[] | null {
  if (!isFailed(run) || run.trace === "failures" || calls(run.events).length > 0) return null;
  // a model error, a timeout or a budget explains a run that did nothing; those have their own entries
  if (errors(run.events).some((e) => e.fatal) || ["timeout", "model_error", "max_turns", "budget"].includes(run.outcome) || run.exception === "AgentTimeoutError") return null;
  const said = run.events.filter((e) => e.type === "agent_message_chunk" || e.type === "agent_thought_chunk");
  return said.length > 0 ? said.slice(-3) : null;
}

function modelError(run: RunEvidence): TraceUpdate[] | null {
  const all = errors(run.events);
  // a timeout's own error (the run's deadline) is the timeout entry's
  const timedOut = run.outcome === "timeout" || run.exception === "AgentTimeoutError";
  const covered = (m: string) => CONTEXT_OVERFLOW_TEXT.test(m) || BUDGET_TEXT.test(m) || (timedOut && /timed? ?out|deadline/i.test(m));
  const uncovered = all.filter((e) => e.fatal && !covered(e.message));
  if (uncovered.length > 0) return uncovered.map((e) => e.event);
  if (run.outcome === "model_error" && !all.some((e) => covered(e.message))) return all.map((e) => e.event);
  return null;
}

function toolTimeout(run: RunEvidence): TraceUpdate[] | null {
  const byId = new Map(calls(run.events).map((c) => [c.update.toolCallId, c.event]));
  const hits = results(run.events).filter((r) => r.event.type === "tool_call_update" && (meta(r.event).timedOut === true || meta(r.event).timed_out === true || TOOL_TIMEOUT_TEXT.test(ends(textOf(r.event), 500))));
  if (hits.length === 0) return null;
  return hits.flatMap((r) => {
    const call = byId.get(r.update.toolCallId);
    return call ? [call, r.event] : [r.event];
  });
}

/** The catalogue, one entry per pathology. */
export const PATHOLOGIES: readonly PathologyDef[] = [
  {
    id: "timeout",
    title: "ran out of time",
    description:
      "The run hit its wall-clock limit (outcome `timeout`, or a trial's `AgentTimeoutError`) before it finished. The evidence is the last events before the limit: what the agent was busy with when time ran out, often a long command or a slow search.",
    points_at: AGENT_PATHS.planning,
    where: "prompt",
    detect: timeout,
  },
  {
    id: "tool_error_loop",
    title: "tool-error loop",
    description:
      "Three or more tool calls in a row failed (their results came back `failed`), and the agent kept going the same way instead of finding out why. Vetoed and malformed calls are left to their own entries. The evidence is the longest such streak, each call with its failed result.",
    points_at: AGENT_PATHS.knowledge,
    where: "knowledge",
    detect: toolErrorLoop,
  },
  {
    id: "repeated_command",
    title: "repeated identical command",
    description:
      "The same command (a call's `rawInput.command`, or an `execute` call's title, spaces collapsed) ran three or more times with no call that changed files (edit, write, delete, move) in between, so it could only give the same answer again. The same program with other arguments is not a repeat. The evidence is the repeated calls.",
    points_at: AGENT_PATHS.preToolCall,
    where: "runtime",
    detect: repeatedCommand,
  },
  {
    id: "premature_finish",
    title: "finished too early",
    description:
      "The run ended `finished` and failed, and the agent called `finish` either before any other tool call or in its first turn, before any tool result had come back: it declared the task done without having looked. The evidence is the finish call and the calls made before it.",
    points_at: AGENT_PATHS.planning,
    where: "prompt",
    detect: prematureFinish,
  },
  {
    id: "context_overflow",
    title: "context window overflow",
    description:
      "An error says the request no longer fit the model's context window, in any provider's words (`prompt is too long`, `maximum context length`, `context_length_exceeded`, `exceeds the context window`, `input token count … exceeds the maximum`, `exceeded model token limit`). The evidence is those errors.",
    points_at: AGENT_PATHS.config,
    where: "config",
    detect: contextOverflow,
  },
  {
    id: "malformed_tool_call",
    title: "malformed tool call",
    description:
      "A tool call failed because its arguments could not be used: the conductor marks it `_meta.malformed` (arguments that were not a JSON object), and other harnesses say so in the result (`InputValidationError`, `invalid arguments`, `missing required parameter`, `No such tool available`). The evidence is each such call with its result.",
    points_at: AGENT_PATHS.toolSchemas,
    where: "prompt",
    detect: malformedToolCall,
  },
  {
    id: "vetoed_action",
    title: "vetoed action",
    description:
      "The action seat refused a call: a result with `_meta.vetoed` (the conductor's pre-tool hook; its content is the reason), or a CLI's permission system saying it was not granted. A shell's own `Permission denied` is not a veto. The evidence is each refused call with its refusal.",
    points_at: AGENT_PATHS.preToolCall,
    where: "runtime",
    detect: vetoedAction,
  },
  {
    id: "budget_exhausted",
    title: "budget or turn limit reached",
    description:
      "The run stopped at a limit rather than an answer: outcome `max_turns`, a trial settled `BUDGET` or carrying `ApiUsageLimitError` / `AgentSpendCapError`, or an error saying a budget, spend cap, quota or turn limit was reached. The evidence is those errors, else the run's last events.",
    points_at: AGENT_PATHS.config,
    where: "config",
    detect: budgetExhausted,
  },
  {
    id: "verifier_disagreement",
    title: "claimed success, scored 0",
    description:
      "The agent's last answer (its final message, or its `finish` call) claims success (done, completed, fixed, passes, …, not taken back by a negation in the same sentence) but the check scored the run 0. The evidence is that answer.",
    points_at: AGENT_PATHS.planning,
    where: "prompt",
    detect: verifierDisagreement,
  },
  {
    id: "no_action",
    title: "no tool call at all",
    description:
      "The model answered (messages or reasoning in the trace) but the failed run made no tool call at all, not even `finish`, and no fatal error, timeout or limit explains it. The evidence is the model's last messages.",
    points_at: AGENT_PATHS.planning,
    where: "prompt",
    detect: noAction,
  },
  {
    id: "model_error",
    title: "model call failed",
    description:
      "A fatal error event that is not a context overflow or a budget (an API error, a refused request, a provider outage), or outcome `model_error` with no such explanation. Non-fatal errors the run went on after are left out. The evidence is those errors.",
    points_at: AGENT_PATHS.config,
    where: "config",
    detect: modelError,
  },
  {
    id: "tool_timeout",
    title: "a command ran too long",
    description:
      "A tool result says its command was stopped for running too long (`timed out after`, `killed after`, or `_meta.timedOut`): the shell timeout is too short for the work, or the agent starts commands that never end (servers, watchers, prompts waiting for input). The evidence is each such call with its result.",
    points_at: AGENT_PATHS.config,
    where: "config",
    detect: toolTimeout,
  },
];

/** The entry of `id`, or undefined. */
export function pathology(id: string): PathologyDef | undefined {
  return PATHOLOGIES.find((p) => p.id === id);
}
