/**
 * Where a trial's parsed trace lives, and the one API that writes and reads it.
 *
 * Storage: an append-only JSON-lines file, `<trial folder>/trace-parsed.jsonl` (layout.ts TRIAL.trace), one
 * `{"seq":N,"type":"…","data":…}` per line, in seq order. It sits in the host-only part of the trial folder, never
 * under agent/ or another folder a box mounts (issue 9: the host writes nothing a live box can swap for a link).
 * Why a file and not LMDB keyed by [trial, seq] (the store's old `events` db):
 * - reads are the hot path (`trial trace --json`, `--grep`, `job grep` over millions of events): a line is matched
 *   and printed as the bytes it was stored as, so most events are never decoded (msgpack + JSON.stringify per event
 *   would be); `--grep` tests a regex against the stored text;
 * - a trace of millions of events is the trial's blob, like its logs: it goes with the trial folder (download, gc,
 *   a new attempt starts without it: ATTEMPT_OUTPUTS) instead of growing the shared data file for every trial;
 * - another process reads it while the trial runs (`--follow`) with plain reads: a line is visible once its newline
 *   is written, and the reader never takes a lock the writer waits on.
 * Crash safety: each `append` is one write of whole lines (O_APPEND), so a crash can only cut the last line short.
 * Readers skip a last line without its newline (it may also be a write in flight); the next writer to open the file
 * cuts the torn bytes off and stores a `trace_loss` in their place, so nothing before it is ever touched and the loss
 * is never silent. Nothing is fsynced per append (a trace is written at the agent's pace, line by line); `close`
 * syncs, so a machine crash loses at most the unsynced tail.
 * One writer per trial at a time: its runner (the stream parser's writer while the agent runs, then
 * {@link appendGatewayUsage} once it settles). The positions are counted by that writer, from the file's last line.
 */
import { closeSync, constants, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { EvolveError } from "../errors.ts";
import { trialDir } from "../store/paths.ts";
import { TRIAL } from "../box/layout.ts";
import type { GatewayUsageEvent } from "../../gateway/meter.ts";
import { traceLossEvent, type TraceEvent, type TraceKind, type TraceUpdate, type UsageUpdate } from "./events.ts";

/** How many bytes a read takes at once: large enough that a million-line trace is a few hundred reads. */
const CHUNK = 1 << 20;
/** traceBytes's chunk: smaller, as each is a buffer of its own the collector frees late. */
const BYTES_CHUNK = 256 << 10;
/** The most a writer reads back from the end to find the last whole line (an event larger than this is refused). */
const MAX_LINE = 64 << 20;

/** The trace file of a trial. */
export function tracePath(home: string, trialId: string): string {
  return join(trialDir(home, trialId), TRIAL.trace);
}

/** Appends to one trial's trace. */
export interface TraceWriter {
  /** Stores `updates` after the last stored event and returns them with their positions (gapless, from 0). */
  append(updates: readonly TraceUpdate[]): TraceEvent[];
  /** Syncs and closes the file. Idempotent. */
  close(): void;
}

function openFile(path: string, flags: number): number | undefined {
  try {
    // O_NOFOLLOW: a link is never followed; O_NONBLOCK: a FIFO planted there cannot hang the open
    const fd = openSync(path, flags | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644);
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      throw new EvolveError("store_corrupt", `${path} is not a regular file`, "remove it; the trace cannot be read from it");
    }
    return fd;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    if ((e as NodeJS.ErrnoException).code === "ELOOP") throw new EvolveError("store_corrupt", `${path} is a symbolic link`, "remove it; the trace cannot be read from it");
    throw e;
  }
}

/**
 * The end of the file's whole lines, the seq of its last one (-1 when none) and the torn bytes after it: read
 * backwards from the end, so opening a trace of any length costs one or two reads.
 */
function lastWholeLine(fd: number, size: number): { end: number; lastSeq: number; torn: string } {
  let tail = Buffer.alloc(0);
  let pos = size;
  let nl = -1; // the last newline, as an index into tail
  for (;;) {
    if (nl < 0) nl = tail.lastIndexOf(10);
    if (nl >= 0) {
      const start = nl > 0 ? tail.lastIndexOf(10, nl - 1) : -1;
      if (start >= 0 || pos === 0) return finish(tail.subarray(start + 1, nl).toString("utf8"), pos + nl + 1, tail.subarray(nl + 1).toString("utf8"));
    } else if (pos === 0) return { end: 0, lastSeq: -1, torn: tail.toString("utf8") };
    if (size - pos > MAX_LINE) throw new EvolveError("store_corrupt", `the trace's last line is over ${MAX_LINE >> 20} MiB`, "the trace file was changed by something other than evolve");
    const n = Math.min(CHUNK, pos);
    pos -= n;
    const buf = Buffer.alloc(n);
    readSync(fd, buf, 0, n, pos);
    tail = Buffer.concat([buf, tail]);
    if (nl >= 0) nl += n;
  }
}

function finish(line: string, end: number, torn: string): { end: number; lastSeq: number; torn: string } {
  const h = head(line);
  if (!h) throw new EvolveError("store_corrupt", "the trace's last whole line is not an event", "the trace file was changed by something other than evolve");
  return { end, lastSeq: h.seq, torn };
}

/**
 * Opens the trace of `trialId` for appending (creating it), continuing after its last stored event. A torn last
 * line (a writer that died mid-write) is cut off and recorded as one `trace_loss`.
 */
export function openTraceWriter(home: string, trialId: string): TraceWriter {
  const path = tracePath(home, trialId);
  // the trial folder is the runner's; a writer for a trial not run yet (a test, a convert into a trial) makes it
  mkdirSync(dirname(path), { recursive: true });
  const fd = openFile(path, constants.O_RDWR | constants.O_CREAT | constants.O_APPEND)!;
  let seq: number;
  try {
    const size = fstatSync(fd).size;
    const last = lastWholeLine(fd, size);
    seq = last.lastSeq + 1;
    if (last.end < size) {
      ftruncateSync(fd, last.end);
      writeLines(fd, [{ ...traceLossEvent(1, "the trace's last line was cut short (its writer stopped mid-write)", last.torn), seq: seq++ }]);
    }
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  let open = true;
  return {
    append(updates) {
      if (!open) throw new Error("trace writer is closed");
      if (updates.length === 0) return [];
      const events = updates.map((u) => ({ seq: seq++, type: u.type, data: u.data }) as TraceEvent);
      writeLines(fd, events);
      return events;
    },
    close() {
      if (!open) return;
      open = false;
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    },
  };
}

/** One write for all the lines, so a crash tears at most the last one. */
function writeLines(fd: number, events: readonly TraceEvent[]): void {
  let text = "";
  for (const e of events) text += JSON.stringify({ seq: e.seq, type: e.type, data: e.data }) + "\n";
  const buf = Buffer.from(text, "utf8");
  for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
}

/**
 * Converts the gateway's per-call usage events (lease.end(): one per metered call, in call order) to the trace's
 * `usage` shape (events.ts: `source: "gateway"`, `model`, the counts, `costUsd` only when priced, the lane in
 * `_meta.lane`, the call's start and duration in `_meta.timestamp` and `_meta.latency_ms`) and appends them after the
 * harness's events. Called once the trial settles.
 */
export function appendGatewayUsage(home: string, trialId: string, calls: readonly GatewayUsageEvent[]): TraceEvent[] {
  if (calls.length === 0) return [];
  const w = openTraceWriter(home, trialId);
  try {
    return w.append(calls.map(gatewayUpdate));
  } finally {
    w.close();
  }
}

function gatewayUpdate(call: GatewayUsageEvent): TraceUpdate {
  const g = call.data.update;
  const update: UsageUpdate = {
    sessionUpdate: "usage",
    scope: "call",
    source: "gateway",
    usage: {
      promptTokens: g.usage.promptTokens,
      completionTokens: g.usage.completionTokens,
      cachedTokens: g.usage.cachedReadTokens,
      cacheWriteTokens: g.usage.cachedWriteTokens,
      reasoningTokens: g.usage.thoughtTokens,
    },
    model: g.model,
    _meta: { lane: g.lane },
  };
  // the call's own time, so an OpenTelemetry export (engine/otel) places its span where it happened
  if (g.started_at !== undefined) update._meta!.timestamp = g.started_at;
  if (g.latency_ms !== undefined) update._meta!.latency_ms = g.latency_ms;
  if (g.cost_usd !== null) update.costUsd = g.cost_usd;
  return { type: "usage", data: { update } };
}

/** A stored event as its line: position, kind, and the line's JSON text (printed as it is by `--json`). */
export interface StoredLine {
  seq: number;
  type: TraceKind;
  /** The whole line, `{"seq":…,"type":…,"data":…}`, without its newline. */
  json: string;
  /** Where `data`'s JSON starts in `json`. */
  dataAt: number;
}

/** What to read. */
export interface TraceFilter {
  /** Only events with seq > after (the resume cursor: the last seq seen). */
  after?: number;
  /** Only these kinds. */
  types?: readonly TraceKind[];
  /** Only events whose type or data (as its JSON text) matches. Give a regex without the `g` or `y` flag. */
  grep?: RegExp;
  /** Only the last `tail` of the events the other filters keep. */
  tail?: number;
}

const SEQ_AT = '{"seq":'.length;

/** The seq, type and data offset of a line as writeLines wrote it; undefined for anything else. */
function head(line: string): { seq: number; type: TraceKind; dataAt: number } | undefined {
  if (!line.startsWith('{"seq":')) return parsedHead(line);
  const comma = line.indexOf(",", SEQ_AT);
  if (comma < 0 || !line.startsWith(',"type":"', comma)) return parsedHead(line);
  const seq = Number(line.slice(SEQ_AT, comma));
  const typeAt = comma + 9;
  const q = line.indexOf('"', typeAt);
  if (q < 0 || !line.startsWith(',"data":', q + 1) || !Number.isInteger(seq)) return parsedHead(line);
  return { seq, type: line.slice(typeAt, q) as TraceKind, dataAt: q + 9 };
}

// a line in another key order (written by hand, or by another tool): read it the slow way
function parsedHead(line: string): { seq: number; type: TraceKind; dataAt: number } | undefined {
  try {
    const v = JSON.parse(line) as { seq?: unknown; type?: unknown };
    if (typeof v.seq !== "number" || typeof v.type !== "string") return undefined;
    return { seq: v.seq, type: v.type as TraceKind, dataAt: 0 };
  } catch {
    return undefined;
  }
}

/**
 * Whether a match inside a part of a line (its type, its data's JSON) is also a match somewhere in the line and in
 * the chunk of lines around it: true unless the regex looks at its surroundings (anchors, lookarounds, \B). Then
 * a line, or a whole chunk, the regex does not match is skipped without cutting it into parts.
 */
function localRegex(re: RegExp): boolean {
  return !/[\^$]|\(\?|\\B/.test(re.source);
}

interface Matcher {
  line(line: string, h: { seq: number; type: TraceKind; dataAt: number }): boolean;
  /** False when no line of `text` (whole lines joined by newlines) can match, so the chunk is skipped. */
  chunk?(text: string): boolean;
}

/** The matcher for a filter's cursor, type and grep parts. */
function matcher(f: TraceFilter): Matcher {
  const after = f.after ?? -1;
  const types = f.types && f.types.length > 0 ? new Set<string>(f.types) : undefined;
  const re = f.grep;
  if (re && (re.global || re.sticky)) throw new Error("readTrace: a grep regex must not carry the g or y flag");
  const local = re !== undefined && localRegex(re);
  return {
    line(line, h) {
      if (h.seq <= after) return false;
      if (types && !types.has(h.type)) return false;
      if (!re) return true;
      if (local && !re.test(line)) return false;
      return re.test(h.type) || re.test(h.dataAt > 0 ? line.slice(h.dataAt, -1) : line);
    },
    chunk: local ? (text) => re.test(text) : undefined,
  };
}

/**
 * A trial's stored events as lines, filtered, in seq order. Streams: one chunk at a time, never the whole trace
 * (with `tail`, at most `tail` lines are held). A trial without a trace yields nothing (see {@link hasTrace}).
 * Lines that are not events (the file was damaged) are skipped; `stats.skipped` counts them.
 */
export function* traceLines(home: string, trialId: string, f: TraceFilter = {}, stats?: { skipped: number }): Generator<StoredLine> {
  const fd = openFile(tracePath(home, trialId), constants.O_RDONLY);
  if (fd === undefined) return;
  try {
    const keep = matcher(f);
    let batch: StoredLine[] = [];
    const ring: StoredLine[] | undefined = f.tail !== undefined ? [] : undefined;
    const tail = f.tail ?? 0;
    let pos = 0;
    // one read buffer for the whole scan: a fresh one per chunk is memory the collector does not see as pressure
    const buf = Buffer.allocUnsafe(CHUNK);
    // the lines of one chunk are yielded together, so memory stays one chunk
    for (;;) {
      const before = pos;
      pos = scanFromOnce(fd, pos, (line) => {
        const h = head(line);
        if (!h) {
          if (stats) stats.skipped++;
          return;
        }
        if (!keep.line(line, h)) return;
        const s = { seq: h.seq, type: h.type, json: line, dataAt: h.dataAt };
        if (ring) {
          ring.push(s);
          if (ring.length > tail * 2 + 1024) ring.splice(0, ring.length - tail);
        } else batch.push(s);
      }, keep.chunk, buf);
      if (!ring) {
        yield* batch;
        batch = [];
      }
      if (pos === before) break;
    }
    if (ring) yield* ring.slice(Math.max(0, ring.length - tail));
  } finally {
    closeSync(fd);
  }
}

/**
 * The whole lines in the next chunk (or the one line that spans several),
 * returning the offset after them; unchanged at the end of the file.
 */
function scanFromOnce(fd: number, from: number, each: (line: string) => void, chunkOk?: (text: string) => boolean, buf = Buffer.allocUnsafe(CHUNK)): number {
  let n = readSync(fd, buf, 0, CHUNK, from);
  if (n === 0) return from;
  let nl = buf.lastIndexOf(10, n - 1);
  if (nl >= 0) {
    const text = buf.toString("utf8", 0, nl);
    if (chunkOk && !chunkOk(text)) return from + nl + 1;
    let start = 0;
    for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", start)) {
      if (i > start) each(text.slice(start, i));
      start = i + 1;
    }
    if (start < text.length) each(text.slice(start));
    return from + nl + 1;
  }
  // a line longer than a chunk: read on until its newline (or the end: then it is torn, or still being written)
  let big = Buffer.from(buf.subarray(0, n));
  let pos = from + n;
  for (;;) {
    n = readSync(fd, buf, 0, CHUNK, pos);
    if (n === 0) return from;
    nl = buf.indexOf(10);
    if (nl >= 0 && nl < n) {
      big = Buffer.concat([big, buf.subarray(0, nl)]);
      each(big.toString("utf8"));
      return pos + nl + 1;
    }
    big = Buffer.concat([big, buf.subarray(0, n)]);
    pos += n;
  }
}

/**
 * The stored trace as bytes, whole lines only (a torn or in-flight last line is left out), one chunk at a time: the
 * unfiltered `--json` and the `trace-parsed` download, which print the lines as they are stored, never decode them.
 * Each chunk is a buffer of its own (a sink may hold it until a pipe takes it).
 */
export function* traceBytes(home: string, trialId: string): Generator<Buffer> {
  const fd = openFile(tracePath(home, trialId), constants.O_RDONLY);
  if (fd === undefined) return;
  try {
    let carry: Buffer | undefined;
    for (let pos = 0; ; ) {
      const buf = Buffer.allocUnsafe(BYTES_CHUNK);
      const n = readSync(fd, buf, 0, BYTES_CHUNK, pos);
      if (n === 0) return;
      pos += n;
      const nl = buf.lastIndexOf(10, n - 1);
      if (nl < 0) {
        carry = carry ? Buffer.concat([carry, buf.subarray(0, n)]) : Buffer.from(buf.subarray(0, n));
        continue;
      }
      if (carry) {
        yield Buffer.concat([carry, buf.subarray(0, nl + 1)]);
        carry = undefined;
      } else yield buf.subarray(0, nl + 1);
      if (nl + 1 < n) carry = Buffer.from(buf.subarray(nl + 1, n));
    }
  } finally {
    closeSync(fd);
  }
}

/** A stored line as its event. */
export function parseLine(s: StoredLine): TraceEvent {
  return JSON.parse(s.json) as TraceEvent;
}

/** A trial's stored events, filtered, in seq order, streamed (see {@link traceLines}). */
export function* readTrace(home: string, trialId: string, f: TraceFilter = {}): Generator<TraceEvent> {
  for (const s of traceLines(home, trialId, f)) yield parseLine(s);
}

/** Whether the trial has a trace file at all (a trial whose agent has no parser, or that never ran, has none). */
export function hasTrace(home: string, trialId: string): boolean {
  const fd = openFile(tracePath(home, trialId), constants.O_RDONLY);
  if (fd === undefined) return false;
  closeSync(fd);
  return true;
}

/** How many events are stored: the last whole line's seq + 1, read from the end of the file. */
export function traceCount(home: string, trialId: string): number {
  const fd = openFile(tracePath(home, trialId), constants.O_RDONLY);
  if (fd === undefined) return 0;
  try {
    return lastWholeLine(fd, fstatSync(fd).size).lastSeq + 1;
  } finally {
    closeSync(fd);
  }
}

/**
 * A reader that picks up where it stopped, for `--follow`: each `poll` returns the events stored since the last
 * (whole lines only, filtered; `tail` applies to the first poll), reading only the new bytes.
 */
export function followTrace(home: string, trialId: string, f: Omit<TraceFilter, "tail"> & { tail?: number } = {}): { poll(): StoredLine[] } {
  const path = tracePath(home, trialId);
  let pos = 0;
  let first = true;
  const keep = matcher(f);
  return {
    poll() {
      const fd = openFile(path, constants.O_RDONLY);
      if (fd === undefined) return [];
      const out: StoredLine[] = [];
      try {
        // a new attempt starts its trace afresh: a file shorter than what was read is read from its start
        if (fstatSync(fd).size < pos) pos = 0;
        for (let before = -1; before !== pos; ) {
          before = pos;
          pos = scanFromOnce(fd, pos, (line) => {
            const h = head(line);
            if (h && keep.line(line, h)) out.push({ seq: h.seq, type: h.type, json: line, dataAt: h.dataAt });
          }, keep.chunk);
        }
      } finally {
        closeSync(fd);
      }
      if (first && f.tail !== undefined) {
        first = false;
        return out.slice(Math.max(0, out.length - f.tail));
      }
      first = false;
      return out;
    },
  };
}
