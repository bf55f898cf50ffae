/**
 * Gateway benchmark (issue 4 §6): `bun scripts/bench/gateway.ts [--requests N] [--quick]`. Not run in CI.
 *
 * Prints one JSON document: the latency the gateway adds — (client→gateway→upstream) minus (client→upstream
 * directly), both measured in this run against the same local upstream — as p50/p99 for non-streaming and
 * streaming Anthropic Messages requests (streaming: time to the last byte) at 1, 64 and 256 concurrent clients;
 * requests/s through the gateway at 64 and 256; and the gateway's RSS with 256 streams held open compared with 16
 * (an upstream that withholds the rest of its events keeps them open). `goals_met` says whether each goal was met;
 * a missed goal never fails the run (exit 2 only when it cannot run at all), since numbers depend on the machine.
 *
 * The upstream is a minimal node:http server answering one fixed body in Anthropic's exact wire format (the
 * scripted fixture's bookkeeping would be measured too). The gateway runs in a child process with the real
 * credentials, budgets, meter and prices, so its RSS is its own and the load generator does not share its event
 * loop. Clients use keep-alive (one socket per concurrent client), as SDKs do; each gateway phase also reports how
 * many connections the gateway opened upstream, which shows whether its fetch pool kept them alive.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

/** Goals from issue 4 §6 (stated for 2 cores). */
export const GOALS = { p50_added_ms: 0.3, p99_added_ms: 2, requests_per_s: 3000, rss_ratio_max: 1.5 } as const;

const CONCURRENCY = [1, 64, 256] as const;
const REQUEST_BODY = JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
const STREAM_BODY = JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 64, stream: true, messages: [{ role: "user", content: "hi" }] });
/** The upstream holds a stream after its first event when the body carries this marker (passed through unchanged). */
const HOLD_MARKER = "bench_hold";
const HOLD_BODY = JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 64, stream: true, metadata: { user_id: HOLD_MARKER }, messages: [{ role: "user", content: "hi" }] });

const MESSAGE_JSON = JSON.stringify({
  id: "msg_bench", type: "message", role: "assistant", model: "claude-sonnet-4-5",
  content: [{ type: "text", text: "ok" }], stop_reason: "end_turn", stop_sequence: null,
  usage: { input_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 2 },
});
const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const SSE_HEAD = sse("message_start", {
  type: "message_start",
  message: { id: "msg_bench", type: "message", role: "assistant", model: "claude-sonnet-4-5", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } },
});
const SSE_TAIL =
  sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
  sse("ping", { type: "ping" }) +
  sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ok" } }) +
  sse("content_block_stop", { type: "content_block_stop", index: 0 }) +
  sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 2 } }) +
  sse("message_stop", { type: "message_stop" });

/** The lean upstream: fixed JSON, a short SSE stream, or (with the marker) a stream held open until released. */
function startUpstream(): Promise<{ url: string; held: http.ServerResponse[]; connections(): number; release(): void; close(): Promise<void> }> {
  const held: http.ServerResponse[] = [];
  // New connections, so a phase can tell whether the gateway's upstream fetch reused its keep-alive sockets.
  let connections = 0;
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => {
      if (!body.includes('"stream":true')) {
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(MESSAGE_JSON), "request-id": "req_bench" });
        res.end(MESSAGE_JSON);
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "request-id": "req_bench" });
      if (body.includes(HOLD_MARKER)) {
        res.write(SSE_HEAD);
        held.push(res);
      } else {
        res.end(SSE_HEAD + SSE_TAIL);
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on("connection", () => connections++);
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        held,
        connections: () => connections,
        release: () => {
          for (const r of held.splice(0)) r.end(SSE_TAIL);
        },
        close: () => new Promise<void>((done) => {
          server.closeAllConnections();
          server.close(() => done());
        }),
      });
    });
  });
}

/** The child: the real gateway wiring, reporting its URL and key, and answering "gc" on stdin (so RSS is settled). */
async function serveChild(): Promise<void> {
  const { Budgets } = await import("../../gateway/budget.ts");
  const { Credentials } = await import("../../gateway/credentials.ts");
  const { CallMeter } = await import("../../gateway/meter.ts");
  const { Prices } = await import("../../gateway/prices.ts");
  const { serveGateway } = await import("../../gateway/serve.ts");
  const { serveFetch } = await import("../../engine/runtime.ts");
  const { buildUpstreams } = await import("../../gateway/upstreams.ts");
  const credentials = new Credentials();
  const { key } = credentials.issueAgent({ trialId: "bench" });
  const prices = new Prices();
  const meter = new CallMeter({ keepRecords: false });
  const gw = await serveGateway({
    upstreams: buildUpstreams({}, process.env),
    authenticate: credentials.authenticate,
    meter: meter.meter,
    budget: new Budgets(),
    prices: (m) => prices.priceOf(m) ?? undefined,
  }, { host: "127.0.0.1", port: 0 }, serveFetch);
  process.stdout.write(JSON.stringify({ url: gw.url, key }) + "\n");
  const rl = createInterface({ input: process.stdin });
  rl.on("line", (line) => {
    if (line === "gc") {
      (globalThis as { Bun?: { gc(sync: boolean): void } }).Bun?.gc(true);
      process.stdout.write("ok\n");
    }
  });
  rl.on("close", () => void gw.close().then(() => process.exit(0)));
}

interface Target {
  url: URL;
  headers: Record<string, string>;
}

/** One request to the end of its body; resolves with the elapsed ms. */
function once(agent: http.Agent, t: Target, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      { host: t.url.hostname, port: t.url.port, path: "/v1/messages", method: "POST", agent, headers: { ...t.headers, "content-length": Buffer.byteLength(body) } },
      (res) => {
        if (res.statusCode !== 200) {
          let text = "";
          res.on("data", (d) => (text += d));
          res.on("end", () => reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`)));
          return;
        }
        res.on("data", () => {});
        res.on("end", () => resolve(performance.now() - t0));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

interface Phase {
  latencies: number[];
  elapsedMs: number;
}

/** `concurrency` clients issue requests back to back until `n` are done or the time budget runs out. */
async function phase(t: Target, body: string, concurrency: number, n: number, budgetMs: number): Promise<Phase> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    // Warm-up: open every socket and let the JITs see the path before timing.
    const warm = Math.max(concurrency * 2, Math.min(200, n));
    let w = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (w++ < warm) await once(agent, t, body);
    }));
    const latencies: number[] = [];
    let issued = 0;
    const t0 = performance.now();
    const deadline = t0 + budgetMs;
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (issued < n && performance.now() < deadline) {
        issued++;
        latencies.push(await once(agent, t, body));
      }
    }));
    return { latencies, elapsedMs: performance.now() - t0 };
  } finally {
    agent.destroy();
  }
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
const r3 = (x: number) => Math.round(x * 1000) / 1000;

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : Number.NaN;
}

/** Waits for one line from the child's stdout. */
function nextLine(lines: AsyncIterator<string>): Promise<string> {
  return lines.next().then((r) => {
    if (r.done) throw new Error("gateway child exited");
    return r.value;
  });
}

/** Opens `count` held streams and resolves once each has delivered its first bytes (so the gateway holds them). */
async function openHeld(agent: http.Agent, t: Target, count: number, open: http.ClientRequest[]): Promise<void> {
  await Promise.all(Array.from({ length: count }, () => new Promise<void>((resolve, reject) => {
    const req = http.request(
      { host: t.url.hostname, port: t.url.port, path: "/v1/messages", method: "POST", agent, headers: { ...t.headers, "content-length": Buffer.byteLength(HOLD_BODY) } },
      (res) => {
        res.once("data", () => resolve());
        res.on("data", () => {});
        res.on("error", () => {});
      },
    );
    req.on("error", reject);
    req.end(HOLD_BODY);
    open.push(req);
  })));
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { requests: { type: "string" }, quick: { type: "boolean", default: false }, "serve-gateway": { type: "boolean", default: false } } });
  if (values["serve-gateway"]) return serveChild();
  const quick = values.quick;
  const n = values.requests ? Number(values.requests) : quick ? 1500 : 8000;
  if (!Number.isInteger(n) || n < 1) throw new Error(`--requests must be a positive integer, got ${values.requests}`);
  // 12 timed phases (3 concurrencies × 2 modes × 2 targets) plus warm-ups must fit ~90 s (quick: ~20 s).
  const budgetMs = quick ? 900 : 5000;

  const upstream = await startUpstream();
  const child: ChildProcess = spawn(process.execPath, [import.meta.filename, "--serve-gateway"], {
    env: { ...process.env, ANTHROPIC_BASE_URL: upstream.url, ANTHROPIC_API_KEY: "sk-ant-bench-upstream-key" },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  try {
    const started = JSON.parse(await nextLine(lines)) as { url: string; key: string };
    const common = { "content-type": "application/json", "anthropic-version": "2023-06-01" };
    const direct: Target = { url: new URL(upstream.url), headers: { ...common, "x-api-key": "sk-ant-bench-upstream-key" } };
    const gateway: Target = { url: new URL(started.url), headers: { ...common, "x-api-key": started.key } };

    const latency: Record<string, Record<string, unknown>> = { non_streaming: {}, streaming: {} };
    const throughput: Record<string, number> = {};
    let worstP50 = 0;
    let worstP99 = 0;
    for (const [mode, body] of [["non_streaming", REQUEST_BODY], ["streaming", STREAM_BODY]] as const) {
      for (const c of CONCURRENCY) {
        const d = await phase(direct, body, c, n, budgetMs);
        const before = upstream.connections();
        const g = await phase(gateway, body, c, n, budgetMs);
        const upstreamConnections = upstream.connections() - before;
        const ds = d.latencies.sort((a, b) => a - b);
        const gs = g.latencies.sort((a, b) => a - b);
        const p50 = quantile(gs, 0.5) - quantile(ds, 0.5);
        const p99 = quantile(gs, 0.99) - quantile(ds, 0.99);
        worstP50 = Math.max(worstP50, p50);
        worstP99 = Math.max(worstP99, p99);
        const gwRps = (gs.length / g.elapsedMs) * 1000;
        latency[mode]![`c${c}`] = {
          requests: gs.length,
          added_p50_ms: r3(p50),
          added_p99_ms: r3(p99),
          direct_p50_ms: r3(quantile(ds, 0.5)),
          direct_p99_ms: r3(quantile(ds, 0.99)),
          gateway_p50_ms: r3(quantile(gs, 0.5)),
          gateway_p99_ms: r3(quantile(gs, 0.99)),
          direct_rps: Math.round((ds.length / d.elapsedMs) * 1000),
          gateway_rps: Math.round(gwRps),
          // Connections the gateway opened upstream in this phase (warm-up included): about `c` when it reuses them.
          gateway_upstream_connections: upstreamConnections,
        };
        if (mode === "non_streaming" && c !== 1) throughput[`c${c}`] = Math.round(gwRps);
      }
    }

    // Memory: RSS (after a full GC) with 16 streams held open, then with 256.
    const gc = async () => {
      child.stdin!.write("gc\n");
      await nextLine(lines);
    };
    const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
    const open: http.ClientRequest[] = [];
    await openHeld(agent, gateway, 16, open);
    await gc();
    const rss16 = rssKb(child.pid!);
    await openHeld(agent, gateway, 240, open);
    await gc();
    const rss256 = rssKb(child.pid!);
    upstream.release();
    for (const r of open) r.destroy();
    agent.destroy();
    const ratio = rss256 / rss16;

    const minRps = Math.min(...Object.values(throughput));
    const goals_met = {
      p50_added: worstP50 <= GOALS.p50_added_ms,
      p99_added: worstP99 <= GOALS.p99_added_ms,
      requests_per_s: minRps >= GOALS.requests_per_s,
      memory_flat: ratio <= GOALS.rss_ratio_max,
    };
    const report = {
      bench: "gateway",
      runtime: `bun ${process.versions.bun ?? "?"}`,
      cpus: (await import("node:os")).availableParallelism(),
      requests_per_phase: n,
      phase_budget_ms: budgetMs,
      added_latency: latency,
      worst_added_p50_ms: r3(worstP50),
      worst_added_p99_ms: r3(worstP99),
      gateway_requests_per_s: throughput,
      memory: { rss_16_open_streams_mb: r3(rss16 / 1024), rss_256_open_streams_mb: r3(rss256 / 1024), ratio: r3(ratio) },
      goals: { p50_added_ms: `<= ${GOALS.p50_added_ms}`, p99_added_ms: `<= ${GOALS.p99_added_ms}`, requests_per_s: `>= ${GOALS.requests_per_s}`, memory: `flat (256/16 RSS ratio <= ${GOALS.rss_ratio_max})` },
      goals_met: { ...goals_met, all: Object.values(goals_met).every(Boolean) },
    };
    process.stdout.write(JSON.stringify(report, null, 2) + "\n");
  } finally {
    child.stdin!.end();
    child.kill("SIGTERM");
    await upstream.close();
  }
}

main().catch((err) => {
  process.stderr.write(`gateway bench: ${(err as Error)?.stack ?? err}\n`);
  process.exit(2);
});
