/**
 * The conductor's four seats: the defaults, and `harness/seats.json` overrides loaded at run time. An override is
 * `"module:function"`, the module a JS/TS file inside the `.agent/` imported by absolute path (Bun's compiled
 * binary and vitest both import a .ts file so), the function of the seat's shape (engine/conductor/types.ts).
 *
 * The defaults hold the conductor's only built-in strategy, and each is plain enough to read in one go: memory keeps
 * the instruction and the newest entries within the token budget; planning is a fixed frame, PLANNING.md and the
 * knowledge files; capability is the tool schemas minus `disabled_tools`; action asks `hooks/pre_tool_call`.
 */
import { spawn } from "node:child_process";
import { constants, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { access } from "node:fs/promises";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { EvolveError } from "../errors.ts";
import { AGENT_PATHS, agentPath, SEAT_NAMES, TOOL_NAMES, type SeatName } from "./layout.ts";
import { ADAPTER_INSTRUCTIONS, agentInstructionFiles } from "./instructions.ts";
import { DEFAULT_TOOL_SCHEMAS } from "./tools.ts";
import type { ActionSeat, ActionVerdict, CapabilitySeat, HistoryEntry, MemorySeat, PlanningSeat, SeatInput, Seats, ToolCall, ToolSchema } from "./types.ts";

/** What every system prompt starts with: how the conductor works, whatever the planning says. */
export const BUILTIN_FRAME = [
  "You are an agent working on a task in a working directory, through tools.",
  "Each turn, call one or more tools; their results come back next turn. Work step by step and check what you did.",
  "When the task is done, call finish with the final answer (or a short summary of what you did).",
].join("\n");

/** The planning frame used when the agent has no harness/PLANNING.md. */
export const BUILTIN_PLANNING = [
  "## How to work",
  "1. Read the task and look around (list files, read what matters) before changing anything.",
  "2. Make a short plan, then carry it out one step at a time.",
  "3. After each change, check it (run the code, the tests, or read the file back).",
  "4. When the result is right, call finish.",
].join("\n");

/** Characters per token, for every budget estimate. */
export const CHARS_PER_TOKEN = 4;

/** How long `hooks/pre_tool_call` may take before its silence is a veto (ms). */
export const HOOK_TIMEOUT_MS = 30_000;
/** The most of a hook's output kept as a veto's reason. */
const MAX_REASON_CHARS = 4000;

function entrySize(e: HistoryEntry): number {
  if (e.kind === "assistant") return e.text.length + e.toolCalls.reduce((n, c) => n + c.name.length + JSON.stringify(c.input).length + 16, 0);
  return e.text.length + 16;
}

/**
 * The default memory seat: the instruction, then the newest entries that fit `context_budget_tokens` (4 characters
 * a token), a model turn always whole with its tool results (the APIs refuse a result without its call), and a
 * note of how many older entries were left out. The newest turn is kept even when it alone is over the budget.
 */
export const defaultMemory: MemorySeat = (input: SeatInput): HistoryEntry[] => {
  const [first, ...rest] = input.history;
  const instruction: HistoryEntry = first?.kind === "instruction" ? first : { kind: "instruction", text: input.instruction };
  const body = first?.kind === "instruction" ? rest : [...input.history];
  // units: an assistant turn with the observations that follow it (or a lone entry)
  const units: HistoryEntry[][] = [];
  for (const e of body) {
    if (e.kind === "observation" && units.length > 0 && units[units.length - 1]![0]!.kind === "assistant") units[units.length - 1]!.push(e);
    else units.push([e]);
  }
  let budget = input.config.context_budget_tokens * CHARS_PER_TOKEN - instruction.text.length;
  const kept: HistoryEntry[][] = [];
  for (let i = units.length - 1; i >= 0; i--) {
    const size = units[i]!.reduce((n, e) => n + entrySize(e), 0);
    if (size > budget && kept.length > 0) break;
    kept.unshift(units[i]!);
    budget -= size;
  }
  const left = units.slice(0, units.length - kept.length).reduce((n, u) => n + u.length, 0);
  const out: HistoryEntry[] = [instruction];
  if (left > 0) out.push({ kind: "instruction", text: `[memory: ${left} older ${left === 1 ? "entry was" : "entries were"} left out to fit the context budget of ${input.config.context_budget_tokens} tokens]` });
  for (const u of kept) out.push(...u);
  return out;
};

/**
 * The default planning seat's prompt for `root`: the frame, an adapter's ADAPTER.md, PLANNING.md (or the built-in planning) and the knowledge,
 * one section each. Which files and in which order is instructions.ts's rule, the one the installed CLIs get too.
 */
export function planningPrompt(root: string): string {
  let planning = BUILTIN_PLANNING;
  const adapter: string[] = [];
  const knowledge: string[] = [];
  for (const f of agentInstructionFiles(root)) {
    const text = f.text.trim();
    if (!text) continue;
    if (f.path === ADAPTER_INSTRUCTIONS) adapter.push(`## Adapter: ${ADAPTER_INSTRUCTIONS}\n\n${text}`);
    else if (f.path === AGENT_PATHS.planning) planning = text;
    else knowledge.push(`## Knowledge: ${f.path.slice(AGENT_PATHS.knowledge.length + 1)}\n\n${text}`);
  }
  return [BUILTIN_FRAME, ...adapter, planning, ...knowledge].join("\n\n");
}

/**
 * The tool schemas of `root` (`protocols/tool_schemas/*.json`, name order), or the built-in ones when the folder is
 * absent. A file that is not `{name, description, input_schema}` is `tool_schema_invalid`.
 */
export function readToolSchemas(root: string): ToolSchema[] {
  const dir = agentPath(root, AGENT_PATHS.toolSchemas);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".json")).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return TOOL_NAMES.map((n) => DEFAULT_TOOL_SCHEMAS[n]);
    throw new EvolveError("tool_schema_invalid", `cannot list ${dir}: ${(e as Error).message}`);
  }
  const out: ToolSchema[] = [];
  const seen = new Set<string>();
  for (const n of names) {
    const file = join(dir, n);
    const bad = (why: string) => new EvolveError("tool_schema_invalid", `${AGENT_PATHS.toolSchemas}/${n}: ${why}`, "a tool schema is {\"name\", \"description\", \"input_schema\": {\"type\": \"object\", …}}");
    let s: any;
    try {
      s = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      throw bad(`not JSON (${String((e as Error).message).split("\n")[0]})`);
    }
    if (s === null || typeof s !== "object" || Array.isArray(s)) throw bad("not a JSON object");
    if (typeof s.name !== "string" || !/^[a-zA-Z0-9_-]{1,64}$/.test(s.name)) throw bad("name must be a tool name (letters, digits, _ and -)");
    if (!(TOOL_NAMES as readonly string[]).includes(s.name)) throw bad(`"${s.name}" is no tool of the conductor (its tools: ${TOOL_NAMES.join(", ")})`);
    if (typeof s.description !== "string") throw bad("description must be a string");
    if (s.input_schema === null || typeof s.input_schema !== "object" || Array.isArray(s.input_schema) || s.input_schema.type !== "object") throw bad('input_schema must be an object schema ({"type": "object", …})');
    if (seen.has(s.name)) throw bad(`tool "${s.name}" is defined twice`);
    seen.add(s.name);
    out.push({ name: s.name, description: s.description, input_schema: s.input_schema });
  }
  return out;
}

/** The default capability seat over `schemas`: all of them but `disabled_tools`. */
export function capabilityOf(schemas: readonly ToolSchema[]): CapabilitySeat {
  return (input) => schemas.filter((s) => !input.config.disabled_tools.includes(s.name));
}

/**
 * The default action seat: `hooks/pre_tool_call` of the agent directory, when it exists and is executable, gets the
 * call as JSON on stdin (`{tool, input, id, turn, workdir}`); exit 0 lets the call run, anything else (a timeout
 * included) vetoes it with the hook's output as the reason. No hook: every call runs.
 */
export const defaultAction: ActionSeat = async (call: ToolCall, input: SeatInput): Promise<ActionVerdict> => {
  const hook = agentPath(input.agentRoot, AGENT_PATHS.preToolCall);
  try {
    await access(hook, constants.X_OK);
    if (!statSync(hook).isFile()) return { allow: true };
  } catch {
    return { allow: true };
  }
  return runHook(hook, JSON.stringify({ tool: call.name, input: call.input, id: call.id, turn: input.turn, workdir: input.workdir }), input);
};

function runHook(hook: string, stdin: string, input: SeatInput): Promise<ActionVerdict> {
  return new Promise((done) => {
    let out = "";
    const child = spawn(hook, [], { cwd: input.workdir, detached: true, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, EVOLVE_AGENT_ROOT: input.agentRoot } });
    const keep = (d: Buffer) => {
      if (out.length < MAX_REASON_CHARS) out += d.toString("utf8");
    };
    child.stdout!.on("data", keep);
    child.stderr!.on("data", keep);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // gone
      }
    }, HOOK_TIMEOUT_MS);
    child.on("error", (e) => {
      clearTimeout(timer);
      done({ allow: false, reason: `hooks/pre_tool_call could not run: ${e.message}` });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0 && !timedOut) return done({ allow: true });
      const said = out.trim().slice(0, MAX_REASON_CHARS);
      const why = timedOut ? `hooks/pre_tool_call did not answer within ${HOOK_TIMEOUT_MS / 1000} s` : said || `vetoed by hooks/pre_tool_call (exit ${code})`;
      done({ allow: false, reason: why });
    });
    // a hook that does not read its stdin closes the pipe early: that is no failure of the call
    child.stdin!.on("error", () => {});
    child.stdin!.end(stdin);
  });
}

/** Parses seats.json: a JSON object of seat → `"module:function"`. */
function readSeatsJson(root: string): Partial<Record<SeatName, string>> {
  const file = agentPath(root, AGENT_PATHS.seats);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw seatsInvalid(`cannot read ${AGENT_PATHS.seats}: ${(e as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw seatsInvalid(`${AGENT_PATHS.seats} is not JSON: ${String((e as Error).message).split("\n")[0]}`);
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw seatsInvalid(`${AGENT_PATHS.seats} must hold a JSON object of seat → "module:function"`);
  const out: Partial<Record<SeatName, string>> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (!(SEAT_NAMES as readonly string[]).includes(k)) throw seatsInvalid(`${AGENT_PATHS.seats}: unknown seat "${k}" (seats: ${SEAT_NAMES.join(", ")})`);
    if (typeof v !== "string" || !/^[^:]+:[A-Za-z_$][\w$]*$/.test(v)) throw seatsInvalid(`${AGENT_PATHS.seats}: ${k} must be "module:function" (e.g. "seats/memory.ts:build"), not ${JSON.stringify(v)}`);
    out[k as SeatName] = v;
  }
  return out;
}

function seatsInvalid(message: string): EvolveError {
  return new EvolveError("seats_invalid", message, `fix ${AGENT_PATHS.seats}: {"memory"|"planning"|"capability"|"action": "module:function"}, the module a .ts/.js file inside .agent/`);
}

/** Imports the function a seats.json entry names; the module must lie inside `root`, links resolved. */
async function loadSeatFunction(root: string, seat: SeatName, spec: string): Promise<(...args: never[]) => unknown> {
  const at = spec.lastIndexOf(":");
  const modPath = spec.slice(0, at);
  const fn = spec.slice(at + 1);
  if (isAbsolute(modPath)) throw seatsInvalid(`${AGENT_PATHS.seats}: ${seat}'s module ${modPath} must be a path relative to .agent/`);
  const realRoot = realpathSync(root);
  let file: string;
  try {
    file = realpathSync(resolve(root, modPath));
  } catch {
    throw seatsInvalid(`${AGENT_PATHS.seats}: ${seat}'s module ${modPath} does not exist in .agent/`);
  }
  const rel = relative(realRoot, file);
  if (rel === "" || rel.startsWith(`..${sep}`) || rel === ".." || isAbsolute(rel)) throw seatsInvalid(`${AGENT_PATHS.seats}: ${seat}'s module ${modPath} lies outside .agent/`);
  if (!statSync(file).isFile()) throw seatsInvalid(`${AGENT_PATHS.seats}: ${seat}'s module ${modPath} is not a file`);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (e) {
    throw seatsInvalid(`${AGENT_PATHS.seats}: ${seat}'s module ${modPath} cannot be loaded: ${String((e as Error)?.message ?? e).split("\n")[0]}`);
  }
  const f = mod[fn] ?? (fn === "default" ? undefined : (mod.default as Record<string, unknown> | undefined)?.[fn]);
  if (typeof f !== "function") throw seatsInvalid(`${AGENT_PATHS.seats}: ${seat}'s module ${modPath} exports no function "${fn}"`);
  return f as (...args: never[]) => unknown;
}

/**
 * The seats of the agent directory `root`: the defaults, each replaced by its seats.json entry when it has one.
 * Everything is read and checked here, before the first turn: a bad seats.json is `seats_invalid`, a bad tool
 * schema `tool_schema_invalid`.
 */
export async function loadSeats(root: string): Promise<Seats> {
  const specs = readSeatsJson(root);
  const planning = planningPrompt(root);
  const seats: Seats = {
    memory: defaultMemory,
    planning: (() => planning) as PlanningSeat,
    capability: capabilityOf(readToolSchemas(root)),
    action: defaultAction,
    overridden: {},
  };
  for (const seat of SEAT_NAMES) {
    const spec = specs[seat];
    if (spec === undefined) continue;
    (seats as unknown as Record<SeatName, unknown>)[seat] = await loadSeatFunction(root, seat, spec);
    seats.overridden[seat] = spec;
  }
  return seats;
}
