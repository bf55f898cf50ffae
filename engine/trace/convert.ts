/**
 * `trace convert`'s engine: a harness's stdout made elsewhere (a Claude Code session on a laptop, a Codex run in
 * CI) fed line by line to that harness's parser, with its session files, as the trial's runner feeds a live run.
 * The inputs are files a user names, so they are read the safe way: only a regular file (a FIFO or a device is
 * refused at once, never waited on), stdout streamed in bounded chunks, and a line over {@link MAX_LINE_BYTES}
 * becomes a `trace_loss` instead of a string that exhausts memory.
 */
import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { EvolveError, firstLine } from "../errors.ts";
import { readRange } from "../box/fs.ts";
import { TrajectoryBuilder, type AtifTrajectory } from "./atif.ts";
import { traceLossEvent, type SessionFile, type TraceEvent, type TraceUpdate } from "./events.ts";
import type { ParserSpec } from "./parsers/index.ts";

/** The longest stdout line handed to a parser; a longer one is skipped as one `trace_loss`. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** The largest session file read (whole: parsers take session files as text). */
export const MAX_SESSION_BYTES = 256 * 1024 * 1024;
const CHUNK = 1 << 20;

function unreadable(path: string, why: string): EvolveError {
  return new EvolveError("trace_input_unreadable", `cannot read ${path}: ${why}`, "give the path of a regular file the harness wrote");
}

async function openRegular(path: string): Promise<{ fh: FileHandle; size: number }> {
  let fh: FileHandle;
  try {
    // non-blocking: opening a FIFO with no writer returns at once, and the stat below refuses it
    fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw unreadable(path, code === "ENOENT" ? "no such file" : code === "EISDIR" ? "a folder, not a file" : code === "ENXIO" ? "a socket or a device" : firstLine(e));
  }
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw unreadable(path, "a folder, not a file");
    if (!st.isFile()) throw unreadable(path, "not a regular file (a FIFO, a socket or a device)");
    return { fh, size: st.size };
  } catch (e) {
    await fh.close().catch(() => undefined);
    throw e;
  }
}

/** A session file as its parser takes it: whole, as text, at most {@link MAX_SESSION_BYTES}. */
export async function readSessionFile(path: string, limit = MAX_SESSION_BYTES, what = "a session file"): Promise<SessionFile> {
  const { fh, size } = await openRegular(path);
  try {
    if (size > limit) throw unreadable(path, `${size} bytes, over the ${limit}-byte limit of ${what}`);
    return { path, text: (await readRange(fh, 0, size)).toString("utf8") };
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** What {@link fileLines} yields: a line (no newline), or one that was too long, with its start. */
export type FileLine = { line: string } | { tooLong: number; sample: string };

/**
 * The lines of a regular file, streamed in bounded chunks: memory is one chunk plus one line of at most `maxLine`
 * bytes. A longer line is read past, not kept. A last line without its newline is a line too.
 */
export async function* fileLines(path: string, maxLine = MAX_LINE_BYTES): AsyncGenerator<FileLine> {
  const { fh } = await openRegular(path);
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    let parts: Buffer[] = [];
    let partLen = 0;
    let dropped = 0; // bytes of the current over-long line read past
    let sample = "";
    const take = (b: Buffer) => {
      if (dropped > 0) return void (dropped += b.length);
      if (partLen + b.length > maxLine) {
        sample = Buffer.concat([...parts, b]).subarray(0, 200).toString("utf8");
        dropped = partLen + b.length;
        parts = [];
        partLen = 0;
        return;
      }
      parts.push(Buffer.from(b));
      partLen += b.length;
    };
    const flush = (): FileLine => {
      const r: FileLine = dropped > 0 ? { tooLong: dropped, sample } : { line: Buffer.concat(parts, partLen).toString("utf8") };
      parts = [];
      partLen = 0;
      dropped = 0;
      return r;
    };
    for (let pos = 0; ; ) {
      let n: number;
      try {
        n = (await fh.read(buf, 0, CHUNK, pos)).bytesRead;
      } catch (e) {
        throw unreadable(path, firstLine(e));
      }
      if (n === 0) break;
      pos += n;
      let start = 0;
      for (let nl = buf.indexOf(10, 0); nl >= 0 && nl < n; nl = buf.indexOf(10, start)) {
        take(buf.subarray(start, nl));
        yield flush();
        start = nl + 1;
      }
      if (start < n) take(buf.subarray(start, n));
    }
    if (partLen > 0 || dropped > 0) yield flush();
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The largest `--instruction` file read: an instruction is text a model reads, far below this. */
export const MAX_INSTRUCTION_BYTES = 16 * 1024 * 1024;

/** What a run made elsewhere left besides its stdout: its session files, and the instruction it was given. */
export interface ConvertInputs {
  /** Session files the harness wrote (paths), in the order the user gave them. */
  sessions?: readonly string[];
  /** A file holding the instruction; without it the instruction is read from the session files, when they hold it. */
  instruction?: string;
}

/**
 * The parsed trace of a run made elsewhere: `stdoutFile` line by line through the harness's parser (the caller looks
 * it up in the harness registry, engine/harness/catalog.ts requireParser: trace knows no harness), then `end` with
 * the session files, numbered from 0. The instruction (`inputs.instruction`'s file, else what the session files
 * recorded) is handed to the parser as a trial's is, so the `prompt` event comes first and the stream's echo of it
 * is not repeated. Streams: events are yielded as each line is parsed.
 */
export async function* convertRun(spec: ParserSpec, stdoutFile: string, inputs: ConvertInputs = {}): AsyncGenerator<TraceEvent> {
  // the session files are read first, so a wrong path fails before anything is printed
  const sessions: SessionFile[] = [];
  for (const p of inputs.sessions ?? []) sessions.push(await readSessionFile(p));
  const instruction = inputs.instruction !== undefined ? (await readSessionFile(inputs.instruction, MAX_INSTRUCTION_BYTES, "an instruction")).text : spec.instructionFrom?.(sessions);
  const parser = spec.create(instruction !== undefined ? { instruction } : {});
  let seq = 0;
  const number = (us: TraceUpdate[]): TraceEvent[] => us.map((u) => ({ ...u, seq: seq++ }) as TraceEvent);
  for await (const l of fileLines(stdoutFile)) {
    if ("line" in l) {
      const line = l.line.endsWith("\r") ? l.line.slice(0, -1) : l.line;
      yield* number(parser.line(line));
    } else yield* number([traceLossEvent(1, `a line of ${l.tooLong} bytes, over the ${MAX_LINE_BYTES}-byte line limit`, l.sample)]);
  }
  yield* number(parser.end(sessions));
}

/** The ATIF trajectory of a run made elsewhere ({@link convertRun}'s events, one pass; the agent's version unknown). */
export async function convertToAtif(spec: ParserSpec, stdoutFile: string, inputs: ConvertInputs = {}): Promise<AtifTrajectory> {
  const b = new TrajectoryBuilder({ agent: { name: spec.harness, version: "unknown" } });
  for await (const e of convertRun(spec, stdoutFile, inputs)) b.push(e);
  return b.finish();
}
