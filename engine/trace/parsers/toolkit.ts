/**
 * What every stream parser needs besides its own format: reading one JSON line without throwing, coalescing
 * unreadable lines into one `trace_loss` per run of them, the ACP kind of a harness's tool, and a todo tool's
 * arguments as a plan.
 */
import { traceLossEvent, type PlanUpdate, type ToolKind, type TraceUpdate } from "../events.ts";

/** A JSON object value, or undefined for anything else. */
export type Obj = Record<string, unknown>;

/** `v` when it is a plain object. */
export function obj(v: unknown): Obj | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
}

/** `v` when it is a string. */
export function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** `v` when it is a finite number, else 0: token counts a harness left out count as none. */
export function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

/** True for a line of nothing but whitespace; one that opens with a printable ASCII character is decided without a trimmed copy. */
export function isBlank(line: string): boolean {
  const c = line.charCodeAt(0);
  return !(c > 32 && c < 127) && !line.trim();
}

/** The events of one readable line after what came before it (a prompt, a pending loss), copied only when there is such. */
export function joinLine(before: TraceUpdate[], loss: LineLoss, events: TraceUpdate[]): TraceUpdate[] {
  return before.length === 0 && !loss.pending ? events : [...before, ...loss.flush(), ...events];
}

/**
 * One stdout line of a JSON-lines stream: blank lines are skipped, a line that is no JSON object, or that `read` does
 * not know (undefined), is counted as lost with `unknown`'s reason, and the events `read` returns follow `before`
 * (the prompt, a pending loss). The one line loop of every parser whose events are objects read by a switch.
 */
export function readJsonLine(
  text: string,
  before: TraceUpdate[],
  loss: LineLoss,
  read: (ev: Obj) => TraceUpdate[] | undefined,
  unknown: (ev: Obj) => string,
): TraceUpdate[] {
  if (isBlank(text)) return before;
  const ev = jsonObject(text);
  const events = ev ? read(ev) : undefined;
  if (!events) {
    loss.lost(text, ev ? unknown(ev) : "not a JSON object");
    return before;
  }
  return joinLine(before, loss, events);
}

/** One stdout line as a JSON object, or undefined when it is not one. */
export function jsonObject(line: string): Obj | undefined {
  try {
    return obj(JSON.parse(line));
  } catch {
    return undefined;
  }
}

/**
 * Counts unreadable lines and hands them out as one `trace_loss` when a readable line (or the end) follows, so a
 * burst of garbage is one event with its count and the first line as a sample.
 */
export class LineLoss {
  private count = 0;
  private reason = "";
  private sample = "";

  /** One more line that could not be read. */
  lost(line: string, reason: string): void {
    if (this.count === 0) {
      this.reason = reason;
      this.sample = line;
    }
    this.count++;
  }

  /** Whether lines were lost since the last flush: lets a hot path skip {@link LineLoss.flush}'s array. */
  get pending(): boolean {
    return this.count > 0;
  }

  /** The pending loss as an event (none when nothing was lost since the last flush). */
  flush(): TraceUpdate[] {
    if (this.count === 0) return [];
    const ev = traceLossEvent(this.count, this.reason, this.sample);
    this.count = 0;
    return [ev];
  }
}

const KINDS: [ToolKind, string[]][] = [
  ["execute", ["bash", "shell", "execute", "exec_command", "run_shell_command", "local_shell", "run_command", "terminal"]],
  ["read", ["read", "read_file", "readfile", "view", "read_many_files", "readmediafile", "notebookread"]],
  ["edit", ["edit", "multiedit", "write", "write_file", "writefile", "create", "apply_patch", "applypatch", "patch", "str_replace", "replace", "notebookedit", "notebook_edit"]],
  ["search", ["grep", "glob", "ls", "list", "list_directory", "find", "search", "search_file_content", "grep_search", "codesearch", "codebase_search"]],
  ["fetch", ["webfetch", "web_fetch", "fetch", "fetchurl", "websearch", "web_search", "google_web_search"]],
  ["think", ["think"]],
];
/** Lower-cased tool name → kind; a name in two lists keeps the first list's kind. */
const KIND_OF = new Map<string, ToolKind>();
for (const [kind, names] of KINDS) for (const n of names) if (!KIND_OF.has(n)) KIND_OF.set(n, kind);

const TODO_TOOLS = new Set(["todo", "todowrite", "todolist", "todo_write", "write_todos"]);

/**
 * What a tool name means, by the name as the harness spelled it: a run calls a handful of tools many times, and each
 * spelling is lower-cased and looked up once. Bounded, so a stream naming a new tool on every line cannot grow it
 * without end.
 */
const BY_NAME = new Map<string, { kind: ToolKind; todo: boolean }>();

function toolInfo(name: string): { kind: ToolKind; todo: boolean } {
  let info = BY_NAME.get(name);
  if (info === undefined) {
    const n = name.toLowerCase();
    info = { kind: KIND_OF.get(n) ?? "other", todo: TODO_TOOLS.has(n) };
    if (BY_NAME.size < 4096) BY_NAME.set(name, info);
  }
  return info;
}

/** The ACP kind of a tool, from the harness's own tool name (case-insensitive). */
export function toolKind(name: string): ToolKind {
  return toolInfo(name).kind;
}

/** True for a harness's todo tool (TodoWrite, todowrite, TodoList, gemini-cli's write_todos): its arguments are the agent's plan. */
export function isTodoTool(name: string): boolean {
  return toolInfo(name).todo;
}

const PLAN_STATUS: Record<string, PlanUpdate["entries"][number]["status"]> = {
  pending: "pending",
  todo: "pending",
  in_progress: "in_progress",
  "in-progress": "in_progress",
  active: "in_progress",
  completed: "completed",
  complete: "completed",
  done: "completed",
};

/** A todo tool's `todos` as the plan's entries, or undefined when its arguments hold no list. */
export function todoPlan(input: Obj): PlanUpdate["entries"] | undefined {
  const todos = input.todos;
  if (!Array.isArray(todos)) return undefined;
  return todos.map((t) => {
    const o = obj(t) ?? {};
    const p = str(o.priority);
    return {
      content: str(o.content) ?? str(o.title) ?? str(o.text) ?? str(o.description) ?? "",
      priority: p === "high" || p === "low" ? p : "medium",
      status: PLAN_STATUS[str(o.status) ?? ""] ?? "pending",
    };
  });
}

/** A plan event (events.ts has no builder for it). */
export function planEvent(entries: PlanUpdate["entries"]): TraceUpdate {
  return { type: "plan", data: { update: { sessionUpdate: "plan", entries } } };
}

const TITLE_KEYS = ["command", "cmd", "file_path", "filePath", "path", "pattern", "url", "query", "description", "summary"] as const;

/** A short title for a tool call: its command, path or pattern when it has one, else its name. */
export function toolTitle(name: string, input: Obj): string {
  for (const k of TITLE_KEYS) {
    const v = input[k];
    if (typeof v === "string" && v) return v.length > 200 ? `${v.slice(0, 199)}…` : v;
    if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v.join(" ").slice(0, 200);
  }
  return name;
}

/** An ISO time from a millisecond epoch, when the harness stamped one. */
export function msTime(v: unknown): { timestamp: string } | undefined {
  return typeof v === "number" && Number.isFinite(v) ? { timestamp: new Date(v).toISOString() } : undefined;
}
