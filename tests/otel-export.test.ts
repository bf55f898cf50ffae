/**
 * OpenTelemetry export (issue 22 §5): `evolve trace export` and `run --otlp`'s live exporter, against a local
 * OTLP/HTTP receiver started here that decodes protobuf with the official opentelemetry-proto definitions (the .proto
 * files an npm package ships, loaded with protobufjs, independent of the encoder evolve uses) and reads JSON. Trials
 * are written straight into a store (no container engine): the spans must carry what `trial show` prints.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import protobuf from "protobufjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJob } from "../engine/job/job.ts";
import { EvolveError } from "../engine/errors.ts";
import { exportTrials, liveExporter, resolveTarget } from "../engine/otel/export.ts";
import { spanIdOf, traceIdOf } from "../engine/otel/spans.ts";
import { openStore, type TrialRecord } from "../engine/store/index.ts";
import { chunkEvent, promptEvent, toolCallEvent, toolResultEvent } from "../engine/trace/events.ts";
import { appendGatewayUsage, openTraceWriter } from "../engine/trace/store.ts";
import type { GatewayUsageEvent } from "../gateway/meter.ts";
import { cliHost } from "./support/cli-host.ts";
import { jobConfig } from "./support/job-config.ts";

const ROOT = resolve(__dirname, "..");
const BUN = join(ROOT, "node_modules/.bin/bun");
// the official definitions, as @opentelemetry/otlp-grpc-exporter-base@0.38 shipped them (build/protos)
const PROTOS = join(ROOT, "node_modules/@opentelemetry/otlp-grpc-exporter-base/build/protos");
const host = cliHost();
let home: string;
let jobId: string;
let A: string; // scored: two gateway calls, a tool call, two reward keys
let B: string; // settled without a trace (INFRASTRUCTURE_ERROR)
let C: string; // scored with tokens and spend but no trace (an agent without a parser): nothing itemizes its calls
let R: string; // still running
let Request: protobuf.Type;

const env = () => ({ ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" });
const evolve = (args: string[]) => host.run(args, { cwd: ROOT, env: env() });

function call(model: string, prompt: number, cached: number, output: number, reasoning: number, cost: number | null, timing?: { started_at: string; latency_ms: number }): GatewayUsageEvent {
  return {
    type: "usage",
    data: {
      update: {
        sessionUpdate: "usage",
        source: "gateway",
        scope: "call",
        model,
        lane: "agent",
        cost_usd: cost,
        usage: { promptTokens: prompt, completionTokens: output, inputTokens: prompt - cached, cachedReadTokens: cached, cachedWriteTokens: 0, thoughtTokens: reasoning, totalTokens: prompt + output },
        ...timing,
      },
    },
  };
}

// ---- the receiver ------------------------------------------------------------------------------------------

interface Received {
  path: string;
  headers: IncomingMessage["headers"];
  body: Buffer;
}

/** An OTLP/HTTP receiver on loopback: answers `status` (or never, with `hang`), keeps every request. */
async function receiver(opts: { status?: number; hang?: boolean } = {}): Promise<{ url: string; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      got.push({ path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) });
      if (opts.hang) return;
      res.writeHead(opts.status ?? 200, { "content-type": "application/json" });
      res.end(opts.status && opts.status >= 300 ? '{"error":"unsupported"}' : "{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    got,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

// ---- decoding to one comparable shape ----------------------------------------------------------------------

type Attrs = Record<string, string | number | boolean>;
interface FlatSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  start: string;
  end: string;
  attributes: Attrs;
  events: { name: string; time: string; attributes: Attrs }[];
  status: number;
}

function anyValue(v: Record<string, unknown>): string | number | boolean {
  if ("stringValue" in v) return v.stringValue as string;
  if ("boolValue" in v) return v.boolValue as boolean;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return Number(v.doubleValue);
  throw new Error(`unexpected AnyValue ${JSON.stringify(v)}`);
}

function attrs(list: unknown): Attrs {
  const out: Attrs = {};
  for (const kv of (list as { key: string; value: Record<string, unknown> }[] | undefined) ?? []) out[kv.key] = anyValue(kv.value);
  return out;
}

const hex = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString("hex") : typeof v === "string" ? v : "");

/** The spans of a decoded request (protobufjs's object, or the JSON), ids as hex, times as decimal strings. */
function flatten(req: { resourceSpans?: { resource?: { attributes?: unknown }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[] }): FlatSpan[] {
  const spans: FlatSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    expect(attrs(rs.resource?.attributes)["service.name"]).toBe("evolve");
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        spans.push({
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name as string,
          kind: Number(s.kind),
          start: String(s.startTimeUnixNano),
          end: String(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          events: ((s.events as Record<string, unknown>[] | undefined) ?? []).map((e) => ({ name: e.name as string, time: String(e.timeUnixNano), attributes: attrs(e.attributes) })),
          status: Number((s.status as { code?: number } | undefined)?.code ?? 0),
        });
      }
  }
  return spans.sort((a, b) => a.spanId.localeCompare(b.spanId));
}

function decodeProtobuf(body: Buffer): FlatSpan[] {
  const msg = Request.decode(body);
  return flatten(Request.toObject(msg, { longs: String, enums: Number, bytes: Uint8Array as unknown as StringConstructor, defaults: false }) as never);
}

function decodeJson(body: Buffer | string): FlatSpan[] {
  return flatten(JSON.parse(String(body)));
}

// ---- the store -------------------------------------------------------------------------------------------

const T0 = "2026-03-01T10:00:00.000Z";
beforeAll(async () => {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(PROTOS, target);
  root.loadSync("opentelemetry/proto/collector/trace/v1/trace_service.proto");
  Request = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest");

  home = mkdtempSync(join(tmpdir(), "evolve-otel-"));
  const store = openStore(home);
  const job = createJob(store, jobConfig(4));
  jobId = job.id;
  [A, B, C, R] = store.listTrials(job.id).map((t) => t.id);
  const put = (id: string, patch: Partial<TrialRecord>) => store.putTrial({ ...store.getTrial(id)!, ...patch });
  put(A, {
    agent: "claude-code",
    model: "anthropic/claude-sonnet-4-5",
    status: "SCORED",
    started_at: T0,
    finished_at: "2026-03-01T10:02:00.000Z",
    phase_timings: { agent: { started_at: "2026-03-01T10:00:10.000Z", finished_at: "2026-03-01T10:01:40.000Z" }, verify: { started_at: "2026-03-01T10:01:41.000Z", finished_at: "2026-03-01T10:01:55.500Z" } },
    rewards: { reward: 1, tests_passed: 0.75 },
    reward: 1,
    tokens: { prompt: 1824, cached_read: 312, cache_write: 0, output: 164, reasoning: 40 },
    spend: { live_usd: 0.0037, final_usd: 0.0037, source: "measured", calls: 2, unpriced_calls: 0 },
  });
  put(B, { status: "INFRASTRUCTURE_ERROR", started_at: T0, finished_at: "2026-03-01T10:00:05.000Z", exception: { type: "BuildError", message: "the image did not build", traceback: "", occurred_at: T0 } });
  put(C, { agent: "mytool", model: "openai/gpt-5", status: "SCORED", started_at: T0, finished_at: "2026-03-01T10:03:00.000Z", rewards: { reward: 0 }, reward: 0, tokens: { prompt: 500, cached_read: 100, cache_write: 20, output: 50, reasoning: 10 }, spend: { live_usd: 0.01, final_usd: 0.01, source: "measured", calls: 3, unpriced_calls: 0 } });
  put(R, { status: "RUNNING", started_at: T0 });
  const w = openTraceWriter(home, A);
  w.append([
    promptEvent("Create hello.txt containing Hello."),
    chunkEvent("agent_message_chunk", "I'll create the file."),
    toolCallEvent({ toolCallId: "call-1", name: "Write", title: "Write hello.txt", kind: "edit", status: "pending", rawInput: { path: "hello.txt" }, _meta: { timestamp: "2026-03-01T10:00:20.000Z" } }),
    toolResultEvent("call-1", "completed", "Success", undefined, { timestamp: "2026-03-01T10:00:21.250Z" }),
    chunkEvent("agent_message_chunk", " Done."),
  ]);
  w.close();
    // the first call as the gateway records it now (its start and latency); the second as older traces hold it
  appendGatewayUsage(home, A, [call("anthropic/claude-sonnet-4-5", 1000, 200, 100, 40, 0.0025, { started_at: "2026-03-01T10:00:12.000Z", latency_ms: 2140 }), call("anthropic/claude-sonnet-4-5", 824, 112, 64, 0, 0.0012)]);
  await store.close();
});

afterAll(() => {
  host.close();
  rmSync(home, { recursive: true, force: true });
});

// ---- the tests -------------------------------------------------------------------------------------------

describe("trace export over OTLP/HTTP", () => {
  it("sends a trial as one trace whose protobuf, decoded with the official protos, carries trial show's figures", async () => {
    const rx = await receiver();
    try {
      const store = openStore(home);
      const report = await exportTrials(home, [store.getTrial(A)!], resolveTarget({ dest: rx.url, headers: ["Authorization=Basic cGs6c2s="] }));
      await store.close();
      expect(report).toEqual({ trials: 1, spans: 4 });
      expect(rx.got).toHaveLength(1);
      const r = rx.got[0];
      expect(r.path).toBe("/v1/traces");
      expect(r.headers["content-type"]).toBe("application/x-protobuf");
      expect(r.headers.authorization).toBe("Basic cGs6c2s=");
      const spans = decodeProtobuf(r.body);

      // the figures `trial show --json` prints for the same trial
      const show = JSON.parse(evolve(["trial", "show", A, "--json"]).stdout) as { tokens: Record<string, number>; rewards: Record<string, number>; live_spent_usd: number; agent_result: { cost_usd: number } };
      const traceId = traceIdOf(A);
      expect(spans.every((s) => s.traceId === traceId)).toBe(true);
      const agent = spans.find((s) => s.name === "invoke_agent claude-code")!;
      expect(agent.spanId).toBe(spanIdOf(A, "agent"));
      expect(agent.parentSpanId).toBe("");
      expect(agent.kind).toBe(1); // INTERNAL
      expect(agent.status).toBe(1); // OK
      expect(agent.start).toBe(String(Date.parse(T0)) + "000000");
      expect(agent.attributes).toMatchObject({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.name": "claude-code",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "evolve.usage.input_tokens": show.tokens.prompt,
        "evolve.usage.output_tokens": show.tokens.output,
        "evolve.usage.cache_read.input_tokens": show.tokens.cached_read,
        "evolve.usage.cache_creation.input_tokens": show.tokens.cache_write,
        "evolve.usage.reasoning.output_tokens": show.tokens.reasoning,
        "evolve.usage.cost": show.agent_result.cost_usd,
        "openinference.span.kind": "AGENT",
        "langfuse.observation.type": "agent",
        "input.value": "Create hello.txt containing Hello.",
        "output.value": "I'll create the file. Done.",
        "session.id": jobId,
      });
      // the calls are itemized below, so the agent span carries no gen_ai usage a backend would add to theirs
      expect(Object.keys(agent.attributes).filter((k) => k.startsWith("gen_ai.usage.") || k.startsWith("llm.token_count."))).toEqual([]);
      // the verifier's rewards, one evaluation event each, at the verifier's end
      expect(agent.events.map((e) => [e.attributes["gen_ai.evaluation.name"], e.attributes["gen_ai.evaluation.score.value"]])).toEqual(Object.entries(show.rewards));
      expect(agent.events.every((e) => e.name === "gen_ai.evaluation.result" && e.time === `${Date.parse("2026-03-01T10:01:55.500Z")}000000`)).toBe(true);

      const chats = spans.filter((s) => s.name === "chat claude-sonnet-4-5");
      expect(chats).toHaveLength(2);
      for (const c of chats) {
        expect(c.kind).toBe(3); // CLIENT
        expect(c.parentSpanId).toBe(agent.spanId);
        expect(c.attributes["openinference.span.kind"]).toBe("LLM");
        expect(c.attributes["langfuse.observation.type"]).toBe("generation");
        expect(c.attributes["llm.model_name"]).toBe("claude-sonnet-4-5");
        expect(c.attributes["llm.token_count.prompt"]).toBe(c.attributes["gen_ai.usage.input_tokens"]);
        expect(c.attributes["llm.token_count.completion"]).toBe(c.attributes["gen_ai.usage.output_tokens"]);
      }
      // a call's span lasts as long as the call; one stored without its time sits at the agent phase's start
      const ns = (iso: string) => `${Date.parse(iso)}000000`;
      const [timed, untimed] = [chats.find((c) => c.attributes["evolve.trace.seq"] === 5)!, chats.find((c) => c.attributes["evolve.trace.seq"] === 6)!];
      expect([timed.start, timed.end]).toEqual([ns("2026-03-01T10:00:12.000Z"), ns("2026-03-01T10:00:14.140Z")]);
      expect([untimed.start, untimed.end]).toEqual([ns("2026-03-01T10:00:10.000Z"), ns("2026-03-01T10:00:10.000Z")]);
      expect(timed.attributes["gen_ai.usage.cost"]).toBe(0.0025);
      // the calls add up to the trial's totals, as trial show prints them
      const sum = (k: string) => chats.reduce((n, c) => n + Number(c.attributes[k]), 0);
      expect(sum("gen_ai.usage.input_tokens")).toBe(show.tokens.prompt);
      expect(sum("gen_ai.usage.output_tokens")).toBe(show.tokens.output);
      expect(sum("gen_ai.usage.cache_read.input_tokens")).toBe(show.tokens.cached_read);
      expect(sum("gen_ai.usage.reasoning.output_tokens")).toBe(show.tokens.reasoning);
      expect(sum("gen_ai.usage.cost")).toBeCloseTo(show.live_spent_usd, 10);

      const tool = spans.find((s) => s.name === "execute_tool Write")!;
      expect(tool.parentSpanId).toBe(agent.spanId);
      expect(tool.spanId).toBe(spanIdOf(A, "seq:2"));
      expect(tool.attributes).toMatchObject({ "gen_ai.tool.name": "Write", "gen_ai.tool.call.id": "call-1", "openinference.span.kind": "TOOL", "input.value": '{"path":"hello.txt"}', "output.value": "Success" });
      expect(tool.start).toBe(`${Date.parse("2026-03-01T10:00:20.000Z")}000000`);
      expect(tool.end).toBe(`${Date.parse("2026-03-01T10:00:21.250Z")}000000`);
      expect(tool.status).toBe(1);
    } finally {
      await rx.close();
    }
  });

  it("puts a trial's totals in gen_ai.usage.* on the agent span when no call is itemized", async () => {
    const rx = await receiver();
    try {
      const store = openStore(home);
      const c = store.getTrial(C)!;
      await store.close();
      await exportTrials(home, [c], resolveTarget({ dest: rx.url }));
      const spans = decodeProtobuf(rx.got[0].body);
      expect(spans).toHaveLength(1);
      const show = JSON.parse(evolve(["trial", "show", C, "--json"]).stdout) as { tokens: Record<string, number>; agent_result: { cost_usd: number } };
      expect(spans[0].attributes).toMatchObject({
        "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": show.tokens.prompt,
        "gen_ai.usage.output_tokens": show.tokens.output,
        "gen_ai.usage.cache_read.input_tokens": show.tokens.cached_read,
        "gen_ai.usage.cache_creation.input_tokens": show.tokens.cache_write,
        "gen_ai.usage.reasoning.output_tokens": show.tokens.reasoning,
        "gen_ai.usage.cost": show.agent_result.cost_usd,
        "evolve.usage.input_tokens": show.tokens.prompt,
      });
      expect(spans[0].events.map((e) => e.attributes)).toEqual([{ "gen_ai.evaluation.name": "reward", "gen_ai.evaluation.score.value": 0 }]);
    } finally {
      await rx.close();
    }
  });

  it("encodes JSON as OTLP/JSON (hex ids, 64-bit integers as strings, enums as integers) equal to the protobuf, with the same ids on every export", async () => {
    const rx = await receiver();
    try {
      const store = openStore(home);
      const a = store.getTrial(A)!;
      await store.close();
      await exportTrials(home, [a], resolveTarget({ dest: `${rx.url}/v1/traces`, protocol: "http/json" }));
      await exportTrials(home, [a], resolveTarget({ dest: rx.url, protocol: "http/protobuf" }));
      await exportTrials(home, [a], resolveTarget({ dest: rx.url, protocol: "http/protobuf" }));
      expect(rx.got.map((g) => g.headers["content-type"])).toEqual(["application/json", "application/x-protobuf", "application/x-protobuf"]);
      const text = rx.got[0].body.toString("utf8");
      const raw = JSON.parse(text);
      const span0 = raw.resourceSpans[0].scopeSpans[0].spans[0];
      expect(span0.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(span0.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(typeof span0.startTimeUnixNano).toBe("string");
      expect(typeof span0.kind).toBe("number");
      const ints = [...text.matchAll(/"intValue":("?)[0-9]+/g)];
      expect(ints.length).toBeGreaterThan(0);
      expect(ints.every((m) => m[1] === '"')).toBe(true);
      // the same spans either way, and the same bytes on a re-export (derived ids, times from the records)
      expect(decodeJson(rx.got[0].body)).toEqual(decodeProtobuf(rx.got[1].body));
      expect(rx.got[2].body.equals(rx.got[1].body)).toBe(true);
    } finally {
      await rx.close();
    }
  });

  it("refuses a non-2xx answer with otlp_rejected, naming the status but never a header's value", async () => {
    const rx = await receiver({ status: 415 });
    try {
      const store = openStore(home);
      const a = store.getTrial(A)!;
      await store.close();
      const err = await exportTrials(home, [a], resolveTarget({ dest: rx.url, protocol: "http/json", headers: ["Authorization=Basic c2VjcmV0"] })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EvolveError);
      expect((err as EvolveError).code).toBe("otlp_rejected");
      expect((err as EvolveError).message).toContain("415");
      expect((err as EvolveError).hint).toContain("protobuf only");
      expect(JSON.stringify({ m: (err as EvolveError).message, h: (err as EvolveError).hint })).not.toContain("c2VjcmV0");
    } finally {
      await rx.close();
    }
  });

  it("gives up on an endpoint that never answers within the time limit (otlp_unreachable)", async () => {
    const rx = await receiver({ hang: true });
    try {
      const store = openStore(home);
      const a = store.getTrial(A)!;
      await store.close();
      const err = await exportTrials(home, [a], resolveTarget({ dest: rx.url, timeoutMs: 300 })).catch((e: unknown) => e);
      expect((err as EvolveError).code).toBe("otlp_unreachable");
      expect((err as EvolveError).message).toContain("no answer within 0.3 s");
      expect(rx.got).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });

  it("the live exporter warns on a failure, never throws, and stops trying an unreachable endpoint", async () => {
    const rx = await receiver();
    const { url } = rx;
    await rx.close(); // nothing listens there now
    const store = openStore(home);
    const trials = [store.getTrial(A)!, store.getTrial(B)!];
    await store.close();
    const warned: string[] = [];
    const live = liveExporter(home, resolveTarget({ dest: url }), (l) => warned.push(l));
    for (const t of trials) live.settled(t);
    const report = await live.done();
    expect(report).toEqual({ trials: 0, spans: 0, skipped: 1 });
    expect(warned[0]).toContain(`OpenTelemetry export of trial ${A} failed: error[otlp_unreachable]`);
    expect(warned[1]).toContain(`evolve trace export ${jobId}`);
  });

  it("the live exporter sends each trial as it settles", async () => {
    const rx = await receiver();
    try {
      const store = openStore(home);
      const trials = [store.getTrial(A)!, store.getTrial(B)!];
      await store.close();
      const warned: string[] = [];
      const live = liveExporter(home, resolveTarget({ dest: rx.url }), (l) => warned.push(l));
      for (const t of trials) live.settled(t);
      expect(await live.done()).toEqual({ trials: 2, spans: 5, skipped: 0 });
      expect(warned).toEqual([]);
      const b = decodeProtobuf(rx.got[1].body);
      // a trial that failed before its agent ran: its one span, an error with the exception
      expect(b).toHaveLength(1);
      expect(b[0].status).toBe(2);
      expect(b[0].traceId).toBe(traceIdOf(B));
    } finally {
      await rx.close();
    }
  });
});

describe("evolve trace export (the command)", () => {
  it("exports a job's settled trials to an endpoint, leaving out the running one", async () => {
    const rx = await receiver();
    try {
      // spawned, not through the in-process host: the receiver needs this process's event loop while the CLI runs
      const child = spawn(BUN, ["main.ts", "trace", "export", jobId, "--otlp", rx.url, "--header", "Authorization=Basic c2VjcmV0", "--json"], { cwd: ROOT, env: env() });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (c) => (stdout += c));
      child.stderr.on("data", (c) => (stderr += c));
      const code = await new Promise<number | null>((r) => child.on("close", r));
      expect(stderr).toBe("");
      expect(code).toBe(0);
      expect(stdout).not.toContain("c2VjcmV0");
      const doc = JSON.parse(stdout);
      expect(doc).toEqual({ destination: `${rx.url}/v1/traces`, protocol: "http/protobuf", job_id: jobId, trials: 3, spans: 6, unsettled: [R] });
      expect(rx.got.map((g) => decodeProtobuf(g.body)[0].traceId).sort()).toEqual([traceIdOf(A), traceIdOf(B), traceIdOf(C)].sort());
    } finally {
      await rx.close();
    }
  }, 60_000);

  it("writes JSON lines to a file, one request per trial, and protobuf as one request", () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-otel-file-"));
    try {
      const r = evolve(["trace", "export", A, "--otlp", join(dir, "a.jsonl")]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`exported 1 trial (4 spans) to ${join(dir, "a.jsonl")} as http/json`);
      const lines = readFileSync(join(dir, "a.jsonl"), "utf8").split("\n").filter(Boolean);
      expect(lines).toHaveLength(1);
      expect(decodeJson(lines[0])).toHaveLength(4);
      const p = evolve(["trace", "export", jobId, "--otlp", join(dir, "j.pb"), "--protocol", "http/protobuf"]);
      expect(p.code).toBe(0);
      // concatenated messages are one request whose resource_spans are every trial's
      const spans = decodeProtobuf(readFileSync(join(dir, "j.pb")));
      expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([traceIdOf(A), traceIdOf(B), traceIdOf(C)]));
      expect(decodeJson(lines[0])).toEqual(spans.filter((s) => s.traceId === traceIdOf(A)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses what it cannot do with a stable code, before sending anything", () => {
    const cases: [string[], string][] = [
      [["trace", "export", A, "--otlp", "grpc://localhost:4317"], "otlp_destination_invalid"],
      [["trace", "export", A, "--otlp", "http://"], "otlp_destination_invalid"],
      [["trace", "export", A, "--otlp", "http://127.0.0.1:9", "--header", "no-equals-sign"], "otlp_header_invalid"],
      [["trace", "export", "nosuchthing", "--otlp", "http://127.0.0.1:9"], "otlp_target_not_found"],
      [["trace", "export", R, "--otlp", "http://127.0.0.1:9"], "otlp_trial_not_settled"],
      [["trace", "export", A, "--otlp", "/nonexistent-dir/x/spans.jsonl"], "otlp_write_failed"],
    ];
    for (const [args, code] of cases) {
      const r = evolve(args);
      expect(r.stderr, args.join(" ")).toContain(`error[${code}]`);
      expect(r.code, args.join(" ")).toBe(2);
    }
  });

  it("says an endpoint that refuses connections is unreachable, fast", () => {
    // port 9 (discard) on loopback: nothing listens in a test box, so the connection is refused at once
    const r = evolve(["trace", "export", A, "--otlp", "http://127.0.0.1:9", "--timeout", "5"]);
    expect(r.stderr).toContain("error[otlp_unreachable]");
    expect(r.code).toBe(2);
  });

  it("run refuses a bad --otlp before a job is recorded or the engine is opened", () => {
    const own = mkdtempSync(join(tmpdir(), "evolve-otel-run-"));
    try {
      const run = (args: string[]) => host.run(args, { cwd: ROOT, env: { ...process.env, EVOLVE_HOME: own, NO_COLOR: "1" } });
      const r = run(["run", "-p", "fixtures/tasks/valid/minimal", "-a", "oracle", "--otlp", "grpc://localhost:4317"]);
      expect(r.stderr).toContain("error[otlp_destination_invalid]");
      expect(r.code).toBe(2);
      const h = run(["run", "-p", "fixtures/tasks/valid/minimal", "-a", "oracle", "--otlp", "http://localhost:4318", "--otlp-header", "Authorization"]);
      expect(h.stderr).toContain("error[otlp_header_invalid]");
      expect(JSON.parse(run(["job", "list", "--json"]).stdout)).toEqual([]);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });

  it("keeps a header's value out of every message", () => {
    const r = evolve(["trace", "export", A, "--otlp", "http://127.0.0.1:9", "--header", "Authorization=Basic c2VjcmV0", "--timeout", "5"]);
    expect(r.code).toBe(2);
    expect(r.stdout + r.stderr).not.toContain("c2VjcmV0");
  });
});
