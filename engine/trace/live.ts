/**
 * The trace of a running agent: its stdout file (box-written, in the trial's `agent/` folder) is tailed from the
 * host while the agent runs, each whole line goes through the harness's parser and the updates are stored at
 * once; after the run the rest of the file and the session files the parser asks for are read and the parser ends.
 * Every read goes through box/fs.ts (no links, no FIFOs, bounded), and a parser that throws is logged and set aside:
 * the trace is best effort, the verdict never depends on it.
 */
import { join, relative, sep } from "node:path";
import { linkedOnTheWay, listBoxFiles, readBoxBytes, readBoxFile } from "../box/fs.ts";
import { promptEvent, traceLossEvent, type SessionFile, type TraceParser, type TraceUpdate } from "./events.ts";
import type { ParserSpec } from "./parsers/index.ts";

/** How often the stdout file is looked at while the agent runs. */
const POLL_MS = 500;
/** The most bytes read from the stdout file per look (the rest waits for the next). */
const CHUNK = 1024 * 1024;
/** A line longer than this is not a line a parser can use: counted as lost, not held in memory. */
const MAX_LINE = 16 * 1024 * 1024;
/** The most session files, and bytes of them, handed to a parser's `end`. */
const MAX_SESSION_FILES = 200;
const MAX_SESSION_BYTES = 64 * 1024 * 1024;

/** What a live trace needs. */
export interface LiveTraceOptions {
  /** The trial's `agent/` folder on the host (the root every read must stay inside). */
  agentDir: string;
  /** The stdout file's name in it. */
  stdoutName: string;
  /** The CLI's home folder, relative to `agentDir` (session globs are relative to it). */
  homeRel: string;
  parser?: ParserSpec;
  instruction: string;
  /** Stores updates (the trial's trace). */
  sink: (updates: readonly TraceUpdate[]) => void;
  log: (line: string) => void;
}

/** Turns a session glob (`**` any depth, `*` within a name) into a matcher of paths relative to the home folder. */
export function globMatcher(glob: string): (rel: string) => boolean {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*" && glob[i + 1] === "*") {
      // `**/` matches zero or more folders
      if (glob[i + 2] === "/") {
        re += "(?:.*/)?";
        i += 2;
      } else {
        re += ".*";
        i += 1;
      }
    } else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  const rx = new RegExp(`^${re}$`);
  return (rel) => rx.test(rel);
}

/** One agent run's trace, fed while it runs. */
export class LiveTrace {
  private offset = 0;
  private carry: Buffer = Buffer.alloc(0);
  private dropping = false;
  private unreadable = false;
  private parser?: TraceParser;
  private broken = false;
  private timer?: ReturnType<typeof setInterval>;
  private chain: Promise<void> = Promise.resolve();
  private readonly path: string;

  constructor(private readonly o: LiveTraceOptions) {
    this.path = join(o.agentDir, o.stdoutName);
    if (o.parser) {
      this.parser = this.guard(() => o.parser!.create({ instruction: o.instruction }));
    } else {
      // a registered agent without a parser still gets its instruction in the trace
      o.sink([promptEvent(o.instruction)]);
    }
  }

  /** Starts looking at the stdout file every POLL_MS. */
  start(): void {
    this.timer = setInterval(() => {
      this.chain = this.chain.then(() => this.readMore(false));
    }, POLL_MS);
    this.timer.unref?.();
  }

  /** Stops the polling without finishing (the run failed before its output could be read). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /**
   * Stops the polling and finishes: the rest of stdout, its last unterminated line, then `end` with the session
   * files. Call once every agent process is gone.
   */
  async finish(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.chain;
    await this.readMore(true);
    if (this.carry.length > 0 && !this.dropping) this.feed(this.carry.toString("utf8"));
    this.carry = Buffer.alloc(0);
    if (!this.parser || this.broken) return;
    const files = this.o.parser!.sessionGlobs.length > 0 ? await this.sessionFiles() : [];
    const p = this.parser;
    const out = this.guard(() => p.end(files));
    if (out && out.length > 0) this.o.sink(out);
  }

  private async readMore(toEnd: boolean): Promise<void> {
    if (this.unreadable) return;
    try {
      for (;;) {
        const buf = await readBoxBytes(this.o.agentDir, this.path, { from: this.offset, limit: CHUNK });
        if (!buf || buf.length === 0) return;
        this.offset += buf.length;
        this.take(buf);
        if (!toEnd && buf.length < CHUNK) return;
      }
    } catch (e) {
      // a link or FIFO at the stdout's name: nothing of it is read, and the trace says why
      if (!this.unreadable) {
        this.o.log(`trace: cannot read ${this.o.stdoutName}: ${(e as Error).message}`);
        this.o.sink([traceLossEvent(1, `${this.o.stdoutName} could not be read: ${(e as Error).message}`)]);
      }
      this.unreadable = true;
      if (this.timer) clearInterval(this.timer);
    }
  }

  private take(buf: Buffer): void {
    let data = this.carry.length > 0 ? Buffer.concat([this.carry, buf]) : buf;
    let nl = data.indexOf(0x0a);
    while (nl >= 0) {
      if (this.dropping) {
        this.dropping = false;
      } else {
        this.feed(data.subarray(0, nl).toString("utf8"));
      }
      data = data.subarray(nl + 1);
      nl = data.indexOf(0x0a);
    }
    if (data.length > MAX_LINE) {
      if (!this.dropping) this.o.sink([traceLossEvent(1, `a stdout line longer than ${MAX_LINE} bytes`, data.subarray(0, 200).toString("utf8"))]);
      this.dropping = true;
      data = Buffer.alloc(0);
    }
    this.carry = Buffer.from(data);
  }

  private feed(line: string): void {
    const text = line.endsWith("\r") ? line.slice(0, -1) : line;
    if (!this.parser || this.broken || text === "") return;
    const p = this.parser;
    const out = this.guard(() => p.line(text));
    if (out && out.length > 0) this.o.sink(out);
  }

  private guard<T>(fn: () => T): T | undefined {
    try {
      return fn();
    } catch (e) {
      this.broken = true;
      this.o.log(`trace: the ${this.o.parser?.harness ?? ""} parser failed, the trace stops here: ${(e as Error).message}`);
      this.o.sink([traceLossEvent(1, `the parser failed: ${(e as Error).message}`)]);
      return undefined;
    }
  }

  /** The regular files under the home folder matching the parser's globs, bounded, in glob order. */
  private async sessionFiles(): Promise<SessionFile[]> {
    const home = join(this.o.agentDir, this.o.homeRel);
    if (relative(this.o.agentDir, home).startsWith("..")) return [];
    const bad = await linkedOnTheWay(this.o.agentDir, this.o.homeRel);
    if (bad) {
      this.o.log(`trace: session files not read: ${bad}`);
      return [];
    }
    const all = (await listBoxFiles(home, 100_000)).map((p) => relative(home, p).split(sep).join("/"));
    const out: SessionFile[] = [];
    let bytes = 0;
    for (const glob of this.o.parser!.sessionGlobs) {
      const match = globMatcher(glob);
      for (const rel of all.filter(match).sort()) {
        if (out.length >= MAX_SESSION_FILES || bytes >= MAX_SESSION_BYTES || out.some((f) => f.path === rel)) continue;
        try {
          const text = await readBoxFile(this.o.agentDir, join(home, rel), { limit: MAX_SESSION_BYTES - bytes });
          if (text === undefined) continue;
          bytes += Buffer.byteLength(text);
          out.push({ path: rel, text });
        } catch (e) {
          this.o.log(`trace: session file ${rel} not read: ${(e as Error).message}`);
        }
      }
    }
    return out;
  }
}
