/**
 * `evolve trial trace`, `evolve job grep`, `evolve trace convert` and `evolve trial download --stream`: printing a
 * parsed trace and a trial's artifacts. The trace is read through engine/trace/store.ts, streamed: `--json` prints
 * each stored line as it is (the event whole, its `data` in the harness's ACP vocabulary, so its keys keep their
 * camelCase spelling as platform-trial-outputs.md shows them), and every write waits for a slow pipe instead of
 * queueing the trace in memory.
 *
 * Exit codes: 0 when the trace (or artifact) was printed, even when the filters kept nothing; 1 when the trial
 * stored no trace (`trace_not_recorded`) or no such artifact (`artifact_not_recorded`), and for `job grep` when
 * nothing matched (like grep); 2 for a usage error (a kind that does not exist, a regex that does not compile, an
 * unknown harness, an unreadable input file).
 */
import { EvolveError } from "../engine/errors.ts";
import { requireParser } from "../engine/harness/mod.ts";
import { isSettled, requireTrial } from "../engine/job/mod.ts";
import type { TrialRecord } from "../engine/store/mod.ts";
import {
  ARTIFACT_STREAMS,
  type ArtifactStream,
  convertRun,
  convertToAtif,
  followTrace,
  hasTrace,
  type Sink,
  type StoredLine,
  streamArtifact,
  streamTraceLines,
  type TraceFilter,
  traceLines,
  parseGrep,
  parseKinds,
} from "../engine/trace/mod.ts";
import { withStore } from "./store.ts";
import { jobFromArg } from "./job.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How often `--follow` looks for new events. */
const FOLLOW_POLL_MS = 250;
/** How much of an event's data a human line shows. */
const CUT = 140;

/** Writes to stdout, resolving once the pipe takes more (a slow reader slows the command, not its memory). */
const stdoutSink: Sink = (chunk) =>
  new Promise<void>((res) => {
    if (process.stdout.write(chunk)) res();
    else process.stdout.once("drain", () => res());
  });

/** Collects lines and writes them in batches of about 1 MiB: a million events are not a million writes. */
function batcher(sink: Sink) {
  let buf = "";
  return {
    async line(s: string) {
      buf += s + "\n";
      if (buf.length >= 1 << 20) {
        const b = buf;
        buf = "";
        await sink(b);
      }
    },
    async flush() {
      if (buf) {
        const b = buf;
        buf = "";
        await sink(b);
      }
    },
  };
}

/** An event's data as JSON text, cut to CUT characters. */
function cutData(s: StoredLine): string {
  const data = s.dataAt > 0 ? s.json.slice(s.dataAt, -1) : JSON.stringify((JSON.parse(s.json) as { data: unknown }).data);
  return data.length > CUT ? `${data.slice(0, CUT - 1)}…` : data;
}

/** A gateway usage event's summary (`gateway <model> …`), or undefined for any other event. */
function gatewaySummary(s: StoredLine): string | undefined {
  if (s.type !== "usage" || !s.json.includes('"source":"gateway"')) return undefined;
  const u = (JSON.parse(s.json) as { data: { update: { source?: string; model?: string; costUsd?: number; usage?: Record<string, number> } } }).data.update;
  if (u.source !== "gateway") return undefined;
  const t = u.usage ?? {};
  const cost = u.costUsd === undefined ? "unpriced" : `$${u.costUsd.toFixed(6)}`;
  return `gateway ${u.model ?? "?"}  prompt ${t.promptTokens ?? 0} (cached ${t.cachedTokens ?? 0})  completion ${t.completionTokens ?? 0}  ${cost}`;
}

/** The human line of one event: position, kind, and the data cut (a gateway usage event as its summary). */
export function humanLine(s: StoredLine): string {
  return `${String(s.seq).padStart(6)}  ${s.type.padEnd(19)}  ${gatewaySummary(s) ?? cutData(s)}`;
}

function notRecorded(t: TrialRecord): EvolveError {
  return isSettled(t)
    ? new EvolveError("trace_not_recorded", `trial ${t.id} stored no parsed trace (${t.status}; agent ${t.agent})`, "its agent has no trace parser, or never ran; see `evolve trial logs --stream agent` for its raw output")
    : new EvolveError("trace_not_recorded", `trial ${t.id} has no parsed trace yet (${t.status})`, `follow it as it arrives: evolve trial trace ${t.id} --follow`);
}

export interface TraceOpts {
  type?: string[];
  grep?: string;
  tail?: number;
  cursor?: number;
  json?: boolean;
  follow?: boolean;
}

/** `evolve trial trace <id>` */
export async function traceCommand(arg: string, opts: TraceOpts): Promise<number> {
  const filter: TraceFilter = { types: parseKinds(opts.type), grep: parseGrep(opts.grep), tail: opts.tail, after: opts.cursor };
  return withStore(async (store, home) => {
    const t = requireTrial(store, arg);
    const out = batcher(stdoutSink);
    const print = (s: StoredLine) => out.line(opts.json ? s.json : humanLine(s));
    if (!opts.follow) {
      if (!hasTrace(home, t.id)) throw notRecorded(t);
      const whole = opts.json && !filter.types && !filter.grep && filter.tail === undefined && filter.after === undefined;
      // the whole trace as JSON: its lines as stored, without decoding them
      if (whole) return await streamTraceLines(home, t.id, stdoutSink), 0;
      for (const s of traceLines(home, t.id, filter)) await print(s);
      await out.flush();
      return 0;
    }
    // --follow: print what is stored, then what arrives, until the trial has settled and the last lines are out
    const f = followTrace(home, t.id, filter);
    let seen = false;
    for (;;) {
      const now = store.getTrial(t.id) ?? t;
      const settled = isSettled(now);
      for (const s of f.poll()) await print(s);
      await out.flush();
      seen ||= hasTrace(home, t.id);
      if (settled) {
        if (!seen) throw notRecorded(now);
        return 0;
      }
      await sleep(FOLLOW_POLL_MS);
    }
  });
}

/** `evolve job grep <job> <regex>`: every trial of the job, in trial order; exit 1 when nothing matched. */
export async function jobGrepCommand(jobArg: string, pattern: string, opts: { json?: boolean; type?: string[] }): Promise<number> {
  const grep = parseGrep(pattern, "the pattern")!;
  const types = parseKinds(opts.type);
  return withStore(async (store, home) => {
    const job = jobFromArg(store, jobArg);
    const out = batcher(stdoutSink);
    let matched = 0;
    for (const t of store.listTrials(job.id)) {
      // the trial id goes first in the JSON line as in the text one: `{"trial_id":…,"seq":…,"type":…,"data":…}`
      const head = `{"trial_id":${JSON.stringify(t.id)},`;
      for (const s of traceLines(home, t.id, { grep, types })) {
        matched++;
        await out.line(opts.json ? head + s.json.slice(1) : `${t.id} ${s.seq} ${s.type} ${gatewaySummary(s) ?? cutData(s)}`);
      }
    }
    await out.flush();
    return matched > 0 ? 0 : 1;
  });
}

/** `evolve trace convert --harness <name> <stdout-file> [--session <file>]... [--instruction <file>] [--format parsed|atif]` */
export async function traceConvertCommand(file: string, opts: { harness: string; session?: string[]; instruction?: string; format?: string }): Promise<number> {
  const parser = requireParser(opts.harness);
  const inputs = { sessions: opts.session ?? [], ...(opts.instruction !== undefined ? { instruction: opts.instruction } : {}) };
  if ((opts.format ?? "parsed") === "atif") {
    await stdoutSink(JSON.stringify(await convertToAtif(parser, file, inputs), null, 2) + "\n");
    return 0;
  }
  const events = convertRun(parser, file, inputs);
  const out = batcher(stdoutSink);
  for await (const e of events) await out.line(JSON.stringify({ seq: e.seq, type: e.type, data: e.data }));
  await out.flush();
  return 0;
}

/** `evolve trial download <id> --stream <name>`: one artifact to stdout; with `-o DIR` the whole tree (commands/results.ts). */
export async function downloadCommand(arg: string, opts: { stream?: string; output?: string; overwrite?: boolean; json?: boolean }): Promise<number> {
  if ((opts.stream === undefined) === (opts.output === undefined)) {
    throw new EvolveError("usage", "trial download needs exactly one of -o <dir> (the whole trial) and --stream <name> (one artifact to stdout)", `streams: ${ARTIFACT_STREAMS.join(", ")}`);
  }
  if (opts.output !== undefined) return (await import("./results.ts")).trialDownloadCommand(arg, { ...opts, output: opts.output });
  return withStore(async (store, home) => {
    const t = requireTrial(store, arg);
    await streamArtifact(home, t, opts.stream as ArtifactStream, stdoutSink);
    return 0;
  });
}
