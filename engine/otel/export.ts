/**
 * Sending trials' traces somewhere (issue 22 §5): to an OTLP/HTTP endpoint (a collector, Langfuse, Phoenix) or to a
 * file. `evolve trace export` sends settled trials once; `evolve run --otlp` sends each trial as it settles
 * ({@link liveExporter}), where a failure is a warning and never touches the trial.
 *
 * Where: a destination that starts with `http://` or `https://` is an endpoint, anything else with a scheme is
 * refused (`otlp_destination_invalid`), and the rest is a file path. An endpoint whose path does not already end in
 * `/v1/traces` gets it appended, as OTEL_EXPORTER_OTLP_ENDPOINT is read: `http://localhost:6006` (Phoenix) and
 * `https://cloud.langfuse.com/api/public/otel` (Langfuse) both work as given.
 * How: one request (one ExportTraceServiceRequest) per trial. A file gets JSON lines (one request per line, the
 * collector's otlpjsonfile shape) or, for protobuf, the messages back to back: protobuf concatenation merges
 * repeated fields, so the file is one valid request holding every trial.
 * Headers (`--header K=V`, Langfuse's `Authorization=Basic …`) are sent and never printed: messages name the
 * endpoint without its credentials and never a header's value.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { EvolveError, firstLine } from "../errors.ts";
import { isSettled } from "../job/actions.ts";
import { findJob } from "../job/list.ts";
import { resolveTrial, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { CONTENT_TYPE, encodeSpans, OTLP_PROTOCOLS, type OtlpProtocol } from "./encode.ts";
import { trialSpans } from "./spans.ts";

/** How long one request may take before the endpoint counts as unreachable. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** How much of a refusal's body a message quotes. */
const BODY_QUOTE = 300;

/** Where spans go, as the user gave it. */
export interface OtlpOptions {
  /** A file path, or an http(s) URL. */
  dest: string;
  /** Default: http/protobuf for an endpoint (every backend takes it; Phoenix takes nothing else), http/json for a file. */
  protocol?: string;
  /** `K=V` each. */
  headers?: readonly string[];
  timeoutMs?: number;
}

/** A checked destination. */
export type OtlpTarget =
  | { kind: "url"; url: URL; protocol: OtlpProtocol; headers: Record<string, string>; timeoutMs: number }
  | { kind: "file"; path: string; protocol: OtlpProtocol };

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** `K=V` flags as headers: the name a valid HTTP token, the value on one line. */
export function parseHeaders(list: readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of list ?? []) {
    const eq = h.indexOf("=");
    const name = eq > 0 ? h.slice(0, eq).trim() : "";
    // the value is never echoed: it is often a credential
    if (!TOKEN.test(name)) throw new EvolveError("otlp_header_invalid", `--header ${eq > 0 ? `${name}=…` : "(no =)"} is not NAME=VALUE with an HTTP header name`, "e.g. --header Authorization=\"Basic $(printf %s pk:sk | base64 -w0)\"");
    const value = h.slice(eq + 1);
    if (/[\r\n\0]/.test(value)) throw new EvolveError("otlp_header_invalid", `--header ${name}: the value holds a line break or NUL`, "give the value on one line");
    out[name] = value;
  }
  return out;
}

/** The endpoint as messages show it: no user, no password, no query (any of which may hold a key). */
export function shownUrl(u: URL): string {
  return `${u.protocol}//${u.host}${u.pathname}`;
}

/** Checks a destination, its protocol and headers before anything is read or sent. */
export function resolveTarget(o: OtlpOptions): OtlpTarget {
  if (o.protocol !== undefined && !(OTLP_PROTOCOLS as readonly string[]).includes(o.protocol)) {
    throw new EvolveError("usage", `--protocol ${o.protocol} is not one of ${OTLP_PROTOCOLS.join(", ")}`, "OTLP over gRPC is not supported; every backend that takes it also takes http/protobuf");
  }
  const protocol = o.protocol as OtlpProtocol | undefined;
  const dest = o.dest.trim();
  if (!dest) throw new EvolveError("otlp_destination_invalid", "--otlp is empty", "give a file path or an http(s) URL");
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(dest);
  if (!scheme) {
    if (o.headers && o.headers.length > 0) throw new EvolveError("usage", "--header applies to an http(s) endpoint, not a file", "drop --header, or give a URL");
    return { kind: "file", path: dest, protocol: protocol ?? "http/json" };
  }
  const s = scheme[1].toLowerCase();
  if (s !== "http" && s !== "https") throw new EvolveError("otlp_destination_invalid", `--otlp ${s}:// is not an OTLP/HTTP endpoint`, "give an http:// or https:// URL (OTLP over gRPC is not supported) or a file path");
  let url: URL;
  try {
    url = new URL(dest);
  } catch {
    throw new EvolveError("otlp_destination_invalid", `--otlp is not a valid URL`, "e.g. http://localhost:6006 or https://cloud.langfuse.com/api/public/otel");
  }
  if (!url.hostname) throw new EvolveError("otlp_destination_invalid", "--otlp names no host", "e.g. http://localhost:4318");
  if (!url.pathname.replace(/\/+$/, "").endsWith("/v1/traces")) url.pathname = url.pathname.replace(/\/+$/, "") + "/v1/traces";
  return { kind: "url", url, protocol: protocol ?? "http/protobuf", headers: parseHeaders(o.headers), timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS };
}

/** Where the bytes of each request go; `close` once done. */
export interface OtlpSink {
  send(body: Uint8Array): Promise<void>;
  close(): void;
}

/** Opens the destination: a file is created (emptied) now, an endpoint is only reached on `send`. */
export function openSink(t: OtlpTarget): OtlpSink {
  if (t.kind === "file") return fileSink(t.path, t.protocol);
  return {
    send: (body) => post(t, body),
    close() {},
  };
}

function fileSink(path: string, protocol: OtlpProtocol): OtlpSink {
  const fail = (e: unknown): never => {
    throw new EvolveError("otlp_write_failed", `cannot write ${path}: ${firstLine(e)}`, "give a writable file path");
  };
  let fd: number | undefined;
  try {
    fd = openSync(path, "w", 0o644);
  } catch (e) {
    fail(e);
  }
  return {
    async send(body) {
      try {
        const line = protocol === "http/json" ? Buffer.concat([body, Buffer.from("\n")]) : body;
        for (let off = 0; off < line.length; ) off += writeSync(fd!, line, off, line.length - off);
      } catch (e) {
        fail(e);
      }
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}

async function post(t: Extract<OtlpTarget, { kind: "url" }>, body: Uint8Array): Promise<void> {
  const where = shownUrl(t.url);
  let res: Response;
  try {
    res = await fetch(t.url, {
      method: "POST",
      headers: { ...t.headers, "content-type": CONTENT_TYPE[t.protocol] },
      body: body as BodyInit,
      signal: AbortSignal.timeout(t.timeoutMs),
    });
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    const why = err.name === "TimeoutError" || err.name === "AbortError" ? `no answer within ${Math.round(t.timeoutMs / 100) / 10} s` : (err.cause?.code ?? err.cause?.message ?? firstLine(err));
    throw new EvolveError("otlp_unreachable", `the OTLP endpoint ${where} cannot be reached: ${why}`, "check the URL and that the collector (Langfuse, Phoenix, …) is running");
  }
  let text = "";
  try {
    text = await res.text();
  } catch {
    // a body cut off after the status: the status is the answer
  }
  if (res.status < 200 || res.status > 299) {
    const quote = text.replace(/\s+/g, " ").trim().slice(0, BODY_QUOTE);
    const hint =
      res.status === 415 && t.protocol === "http/json"
        ? "this endpoint takes protobuf only (Phoenix does): drop --protocol http/json"
        : res.status === 401 || res.status === 403
          ? "check the credentials given with --header (Langfuse: Authorization=Basic base64(public_key:secret_key))"
          : "";
    throw new EvolveError("otlp_rejected", `the OTLP endpoint ${where} answered ${res.status}${quote ? `: ${quote}` : ""}`, hint);
  }
}

/** What an export sent. */
export interface ExportReport {
  trials: number;
  spans: number;
}

/** Encodes one trial's trace and sends it through `sink`; returns how many spans it held. */
export async function sendTrial(home: string, t: TrialRecord, sink: OtlpSink, protocol: OtlpProtocol): Promise<number> {
  const spans = trialSpans(home, t);
  await sink.send(encodeSpans(spans, protocol));
  return spans.length;
}

/** Sends each trial (one request each, in order); the first failure stops the export and is thrown. */
export async function exportTrials(home: string, trials: readonly TrialRecord[], target: OtlpTarget, onTrial?: (t: TrialRecord, spans: number) => void): Promise<ExportReport> {
  const sink = openSink(target);
  const report: ExportReport = { trials: 0, spans: 0 };
  try {
    for (const t of trials) {
      const n = await sendTrial(home, t, sink, target.protocol);
      report.trials++;
      report.spans += n;
      onTrial?.(t, n);
    }
  } finally {
    sink.close();
  }
  return report;
}

/**
 * Streams trials as they settle (`evolve run --otlp`): `settled` queues a trial's export behind the previous one and
 * returns at once; a failure is handed to `warn` (its code and message; the trial's status is already stored and is
 * never changed by it). An endpoint found unreachable is not tried again for the job's later trials (each try could
 * wait the whole time limit): they are counted, and `done` says how to send them later. `done` waits for what is
 * queued and closes the destination.
 */
export function liveExporter(home: string, target: OtlpTarget, warn: (line: string) => void): { settled(t: TrialRecord): void; done(): Promise<ExportReport & { skipped: number }> } {
  const report = { trials: 0, spans: 0, skipped: 0 };
  let sink: OtlpSink | undefined;
  let unreachable = false;
  let jobId: string | undefined;
  let chain: Promise<void> = Promise.resolve();
  return {
    settled(t) {
      jobId ??= t.job_id;
      chain = chain.then(async () => {
        if (unreachable) {
          report.skipped++;
          return;
        }
        try {
          sink ??= openSink(target);
          report.spans += await sendTrial(home, t, sink, target.protocol);
          report.trials++;
        } catch (e) {
          const code = e instanceof EvolveError ? `error[${e.code}] ` : "";
          warn(`OpenTelemetry export of trial ${t.id} failed: ${code}${firstLine(e)}`);
          if (e instanceof EvolveError && e.code === "otlp_unreachable") unreachable = true;
        }
      });
    },
    async done() {
      await chain;
      sink?.close();
      if (report.skipped > 0) warn(`${report.skipped} more trial(s) were not exported (the endpoint was unreachable): evolve trace export ${jobId} --otlp …`);
      return report;
    },
  };
}

/** The trials `trace export <ref>` names, with what the export leaves out. */
export interface ExportSelection {
  /** The job, when `ref` named one. */
  jobId?: string;
  trials: TrialRecord[];
  /** A job's trials still running: their traces are not final, and a backend keeps the first copy of a span id. */
  unsettled: string[];
}

/**
 * What `ref` names: a trial (its id, or a unique start or end of it) or else a job (id, unique start, or
 * `--job-name`). A job gives its settled trials; a trial must have settled (`otlp_trial_not_settled`), as Phoenix
 * would refuse the final copy of a span it already holds.
 */
export function selectForExport(store: Store, ref: string): ExportSelection {
  let trial: TrialRecord | undefined;
  try {
    trial = resolveTrial(store, ref);
  } catch (e) {
    if (!(e instanceof EvolveError) || e.code !== "trial_not_found") throw e;
  }
  if (trial) {
    if (!isSettled(trial)) throw new EvolveError("otlp_trial_not_settled", `trial ${trial.id} is still ${trial.status}`, "export it once it settles, or stream a run's trials with `evolve run --otlp`");
    return { trials: [trial], unsettled: [] };
  }
  let job: JobRecord;
  try {
    job = findJob(store, ref);
  } catch (e) {
    if (e instanceof EvolveError && e.code === "job_not_found") throw new EvolveError("otlp_target_not_found", `no trial or job ${ref}`, "see `evolve job list` and `evolve job show <job>` for ids");
    throw e;
  }
  const all = store.listTrials(job.id);
  return { jobId: job.id, trials: all.filter(isSettled), unsettled: all.filter((t) => !isSettled(t)).map((t) => t.id) };
}
