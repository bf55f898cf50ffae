/**
 * The conductor's built-in tools: shell, read_file, write_file, edit_file and finish. Every tool answers with text
 * the model reads next turn, bounded to `max_observation_chars`; a failure is a result with `isError`, never a
 * throw, so one bad call costs the run a turn and nothing more. Paths are relative to the working directory.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { constants } from "node:fs";
import { mkdir, open, stat, type FileHandle } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { ToolKind } from "../trace/events.ts";
import type { ConductorConfig, ToolName } from "./layout.ts";
import type { ToolCall, ToolSchema } from "./types.ts";

/** The schemas `harness init` writes to protocols/tool_schemas/, and the capability seat's list when that folder is absent. */
export const DEFAULT_TOOL_SCHEMAS: Record<ToolName, ToolSchema> = {
  shell: {
    name: "shell",
    description: "Run a shell command (sh -c) in the working directory. Returns its combined stdout and stderr and, when it is not 0, the exit code.",
    input_schema: { type: "object", properties: { command: { type: "string", description: "the command line" } }, required: ["command"] },
  },
  read_file: {
    name: "read_file",
    description: "Read a text file. Relative paths are taken from the working directory. Long files are cut; use offset and limit (lines) to read on.",
    input_schema: {
      type: "object",
      properties: {
        path: { type: "string", description: "the file to read" },
        offset: { type: "integer", description: "the first line to return (1-based, default 1)" },
        limit: { type: "integer", description: "how many lines to return at most" },
      },
      required: ["path"],
    },
  },
  write_file: {
    name: "write_file",
    description: "Write a file whole, creating it (and its folders) or replacing what it held.",
    input_schema: {
      type: "object",
      properties: { path: { type: "string", description: "the file to write" }, content: { type: "string", description: "the file's new content" } },
      required: ["path", "content"],
    },
  },
  edit_file: {
    name: "edit_file",
    description: "Replace one exact piece of text in a file. old_text must occur exactly once in the file; include enough context to make it unique.",
    input_schema: {
      type: "object",
      properties: {
        path: { type: "string", description: "the file to edit" },
        old_text: { type: "string", description: "the exact text to replace (must occur once)" },
        new_text: { type: "string", description: "the text to put in its place" },
      },
      required: ["path", "old_text", "new_text"],
    },
  },
  finish: {
    name: "finish",
    description: "End the task. Give the final answer (or a summary of what was done) as answer.",
    input_schema: { type: "object", properties: { answer: { type: "string", description: "the final answer" } }, required: ["answer"] },
  },
};

/** ACP's kind of each built-in tool, for the trace. */
export function toolKind(name: string): ToolKind {
  return name === "shell" ? "execute" : name === "read_file" ? "read" : name === "write_file" || name === "edit_file" ? "edit" : "other";
}

/** A short human title of a call: the command or the path. */
export function toolTitle(call: ToolCall): string {
  const i = call.input;
  const s = call.name === "shell" ? i.command : call.name === "finish" ? "finish" : i.path;
  return typeof s === "string" && s ? s.slice(0, 200) : call.name;
}

/** Where and how tools run. */
export interface ToolContext {
  workdir: string;
  config: ConductorConfig;
  env?: Record<string, string>;
  signal?: AbortSignal;
}

/** What a tool returned. */
export interface ToolResult {
  text: string;
  isError: boolean;
}

/** The largest file read_file and edit_file will read (bytes): beyond it they answer an error, not a hang. */
const MAX_FILE_BYTES = 32 * 1024 * 1024;

/** Runs one call of a built-in tool other than `finish` (the loop ends the run on that). */
export async function runTool(call: ToolCall, ctx: ToolContext): Promise<ToolResult> {
  try {
    switch (call.name) {
      case "shell":
        return await shell(str(call.input, "command"), ctx);
      case "read_file":
        return await readFileTool(call.input, ctx);
      case "write_file":
        return await writeFileTool(path(call.input, ctx), str(call.input, "content", true));
      case "edit_file":
        return await editFileTool(path(call.input, ctx), str(call.input, "old_text"), str(call.input, "new_text", true), ctx);
      default:
        return { text: `unknown tool "${call.name}"`, isError: true };
    }
  } catch (e) {
    if (e instanceof ArgError) return { text: e.message, isError: true };
    return { text: `${call.name} failed: ${String((e as Error)?.message ?? e).split("\n")[0]}`, isError: true };
  }
}

class ArgError extends Error {}

/** What goes between output and a note after it: nothing when the output already ends its line. */
const sepOf = (text: string): string => (text === "" || text.endsWith("\n") ? "" : "\n");

function str(input: Record<string, unknown>, key: string, allowEmpty = false): string {
  const v = input[key];
  if (typeof v !== "string" || (!allowEmpty && v === "")) throw new ArgError(`argument "${key}" must be a${allowEmpty ? "" : " non-empty"} string`);
  return v;
}

function path(input: Record<string, unknown>, ctx: ToolContext): string {
  return resolve(ctx.workdir, str(input, "path"));
}

/** `text` cut to `max` characters (its head and tail, which is where errors and results are), with a note when cut. */
export function bound(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = Math.floor(max / 2);
  const tail = max - head;
  return `${text.slice(0, head)}\n[… ${text.length - max} of ${text.length} characters left out …]\n${text.slice(text.length - tail)}`;
}

/** Keeps the head and the tail of a stream within `max` characters, counting what passed. */
class BoundedOutput {
  private head = "";
  private tail = "";
  private total = 0;
  constructor(private readonly max: number) {}
  push(s: string): void {
    this.total += s.length;
    const half = Math.floor(this.max / 2);
    if (this.head.length < half) {
      const take = half - this.head.length;
      this.head += s.slice(0, take);
      s = s.slice(take);
    }
    if (!s) return;
    this.tail += s;
    if (this.tail.length > 2 * this.max) this.tail = this.tail.slice(-this.max);
  }
  text(): string {
    const all = this.head + this.tail;
    if (this.total <= this.max) return all;
    const keep = this.max - this.head.length;
    return `${this.head}\n[… ${this.total - this.max} of ${this.total} characters left out …]\n${this.tail.slice(-keep)}`;
  }
}

/**
 * `sh -c command` in its own process group, so a timeout (or the run's end) kills everything it started. When sh
 * exits while something it left in the background still holds the pipes, the output so far is the result: a
 * server started with `&` must not hold the turn.
 */
function shell(command: string, ctx: ToolContext): Promise<ToolResult> {
  const out = new BoundedOutput(ctx.config.max_observation_chars);
  return new Promise((resolveResult) => {
    let child: ChildProcess;
    try {
      child = spawn("sh", ["-c", command], { cwd: ctx.workdir, env: ctx.env ?? (process.env as Record<string, string>), detached: true, stdio: ["ignore", "pipe", "pipe"] });
    } catch (e) {
      return resolveResult({ text: `cannot start sh: ${(e as Error).message}`, isError: true });
    }
    let done = false;
    let killedFor: "timeout" | "abort" | undefined;
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const timeoutSec = ctx.config.shell_timeout_sec;
    const timer = setTimeout(() => {
      killedFor = "timeout";
      killGroup();
    }, timeoutSec * 1000);
    const onAbort = () => {
      killedFor = "abort";
      killGroup();
    };
    ctx.signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout!.setEncoding("utf8").on("data", (d: string) => out.push(d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => out.push(d));
    const finish = (code: number | null, sig: NodeJS.Signals | null, error?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      ctx.signal?.removeEventListener("abort", onAbort);
      child.stdout!.destroy();
      child.stderr!.destroy();
      let text = out.text();
      let isError = false;
      if (error) {
        text += `${sepOf(text)}[cannot run the command: ${error.message}]`;
        isError = true;
      } else if (killedFor === "timeout") {
        text += `${sepOf(text)}[killed: the command ran past shell_timeout_sec (${timeoutSec} s)]`;
        isError = true;
      } else if (killedFor === "abort") {
        text += `${sepOf(text)}[killed: the run ended]`;
        isError = true;
      } else if (code !== 0) {
        text += `${sepOf(text)}[exit code ${code ?? `signal ${sig}`}]`;
        isError = true;
      }
      resolveResult({ text: text || "(no output)", isError });
    };
    child.on("error", (e) => finish(null, null, e));
    child.on("close", (code, sig) => finish(code, sig));
    child.on("exit", (code, sig) => {
      // the pipes may stay open in a background child: give the output a moment, then answer
      setTimeout(() => finish(code, sig), 200).unref?.();
    });
    if (ctx.signal?.aborted) onAbort();
  });
}

/** Opens `file` for reading without ever blocking (a FIFO or a device is refused, not waited on). */
async function openRegular(file: string): Promise<{ fh: FileHandle; size: number } | ToolResult> {
  let st;
  try {
    st = await stat(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { text: code === "ENOENT" ? `no such file: ${file}` : `cannot read ${file}: ${(e as Error).message}`, isError: true };
  }
  if (st.isDirectory()) return { text: `${file} is a folder, not a file (list it with shell: ls)`, isError: true };
  if (!st.isFile()) return { text: `${file} is not a regular file (a FIFO, socket or device): not read`, isError: true };
  const fh = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  const again = await fh.stat();
  if (!again.isFile()) {
    await fh.close();
    return { text: `${file} is not a regular file: not read`, isError: true };
  }
  if (again.size > MAX_FILE_BYTES) {
    await fh.close();
    return { text: `${file} is ${again.size} bytes, over the ${MAX_FILE_BYTES}-byte limit: read parts of it with shell (head, sed -n)`, isError: true };
  }
  return { fh, size: again.size };
}

async function readWhole(fh: FileHandle, size: number): Promise<string> {
  try {
    const buf = Buffer.alloc(size);
    let at = 0;
    while (at < size) {
      const { bytesRead } = await fh.read(buf, at, size - at, at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    return buf.subarray(0, at).toString("utf8");
  } finally {
    await fh.close();
  }
}

async function readFileTool(input: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> {
  const file = path(input, ctx);
  const offset = input.offset === undefined ? 1 : Number(input.offset);
  const limit = input.limit === undefined ? Infinity : Number(input.limit);
  if (!Number.isInteger(offset) || offset < 1) return { text: `argument "offset" must be a whole number from 1`, isError: true };
  if (limit !== Infinity && (!Number.isInteger(limit) || limit < 1)) return { text: `argument "limit" must be a whole number from 1`, isError: true };
  const opened = await openRegular(file);
  if ("text" in opened) return opened;
  const text = await readWhole(opened.fh, opened.size);
  const lines = text.split("\n");
  if (offset > lines.length) return { text: `${file} has ${lines.length} lines; offset ${offset} is past its end`, isError: true };
  const max = ctx.config.max_observation_chars;
  let outText = "";
  let last = offset - 1;
  for (let i = offset - 1; i < lines.length && i - (offset - 1) < limit; i++) {
    const piece = (i > offset - 1 ? "\n" : "") + lines[i];
    if (outText.length + piece.length > max) {
      if (outText === "") outText = lines[i]!.slice(0, max);
      break;
    }
    outText += piece;
    last = i + 1;
  }
  if (last < lines.length && !(limit !== Infinity && last - (offset - 1) >= limit)) {
    outText += `\n[… cut at line ${last} of ${lines.length}: read on with offset ${last + 1}]`;
  }
  return { text: outText, isError: false };
}

async function writeFileTool(file: string, content: string): Promise<ToolResult> {
  await mkdir(dirname(file), { recursive: true });
  // O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of holding the turn
  let fh: FileHandle;
  try {
    fh = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_NONBLOCK, 0o644);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENXIO") return { text: `${file} is a FIFO: not written`, isError: true };
    if (code === "EISDIR") return { text: `${file} is a folder: not written`, isError: true };
    throw e;
  }
  try {
    if (!(await fh.stat()).isFile()) return { text: `${file} is not a regular file: not written`, isError: true };
    await fh.truncate(0);
    await fh.write(content, 0, "utf8");
  } finally {
    await fh.close();
  }
  return { text: `wrote ${Buffer.byteLength(content)} bytes to ${file}`, isError: false };
}

async function editFileTool(file: string, oldText: string, newText: string, ctx: ToolContext): Promise<ToolResult> {
  const opened = await openRegular(file);
  if ("text" in opened) return opened;
  const text = await readWhole(opened.fh, opened.size);
  const first = text.indexOf(oldText);
  if (first === -1) return { text: `old_text does not occur in ${file}: nothing changed (read the file and copy the text exactly)`, isError: true };
  let count = 0;
  for (let at = first; at !== -1; at = text.indexOf(oldText, at + oldText.length)) count++;
  if (count > 1) return { text: `old_text occurs ${count} times in ${file}: nothing changed (give more context so it occurs once)`, isError: true };
  const result = await writeFileTool(file, text.slice(0, first) + newText + text.slice(first + oldText.length));
  if (result.isError) return result;
  return { text: bound(`edited ${file}: replaced ${oldText.length} characters with ${newText.length}`, ctx.config.max_observation_chars), isError: false };
}
