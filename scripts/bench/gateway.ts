/**
 * Gateway benchmark (issue 4 §6). Not run in CI.
 *
 *   bun scripts/bench/gateway.ts [--requests N] [--rounds R] [--model-latency-ms MS] [--only LOADS] [--quick]
 *
 * Prints one JSON document. Every gateway figure is taken beside the same figure for two baselines measured in the
 * same run, against the same upstream: `direct` (the client calls the upstream itself) and `floor` (the least proxy
 * this runtime can be: served and calling upstream the way the gateway is, with no routing, auth, budget or
 * metering). A load runs in R rounds (default 3), each running direct, floor and gateway back to back, so a slow
 * spell of the machine hits all three; a figure is the median over rounds.
 *
 * - `added_latency`: what the gateway adds, (client→gateway→upstream) − (client→upstream), p50/p99, for
 *   non-streaming and streaming Anthropic Messages requests (streaming: time to the last byte) at 1, 64 and 256
 *   concurrent clients; `floor_added_*` is the same for the floor proxy, and `over_floor_*` is the gateway's own
 *   share (gateway − floor). `relay_added_*` (one client) is what an agent in a box sees: the gateway reached
 *   through the trial's relay (the python3 TCP-to-unix pipe of engine/trial/proxy/script.ts, run here on the
 *   host) to its unix socket. Each trial has a relay of its own for its one agent, so only one client goes through
 *   it; left out where python3 is missing. Each client sends its next request when the last one is answered, and the upstream
 *   takes `--model-latency-ms` (default 50) to answer, as a model does: 64 clients keep 64 calls in flight at about
 *   64/50 ms = 1280 req/s, 256 clients about 5120 req/s. That is how gateways are measured (Bifrost's figures are
 *   taken at a fixed 5000 req/s against a mock provider with model-like latency); 50 ms is far quicker than any real
 *   model, so the rate, and the load on the gateway, is higher than a real run would give it. Clients start spread
 *   over one model latency (else they would stay in lock step and arrive in bursts). A single client sends back to
 *   back (no model latency): alone, it queues behind nobody, and the phase gets enough samples.
 * - `throughput`: requests/s at saturation, with an upstream that answers at once and 64 or 256 clients sending back
 *   to back. The latencies seen there are queueing (Little's law: clients / rate) on a box whose 2 cores also run
 *   the load generator and the upstream: they say how fast the box is, not what the gateway adds to a call.
 * - `memory`: the gateway's RSS with 256 streams held open compared with 16 (an upstream that withholds the rest of
 *   its events keeps them open).
 *
 * `goals_met` says whether each goal was met; a missed goal never fails the run (exit 2 only when it cannot run at
 * all), since numbers depend on the machine.
 *
 * Five processes: this one (the clients), the upstream, the gateway, the floor and the relay. The upstream is a minimal
 * node:http server answering one fixed body in Anthropic's exact wire format (the scripted fixture's bookkeeping
 * would be measured too), in a process of its own as a provider is, so a direct call crosses between processes as
 * an agent's does; the request body tells it how long to wait (or to hold a stream open), and the gateway passes
 * bodies through unchanged. The gateway child has the real credentials, budgets, meter and prices, so its RSS is
 * its own. Clients use keep-alive (one socket per concurrent client), as SDKs do; each load also reports how many
 * connections the gateway opened upstream, which shows whether its fetch pool kept them alive.
 *
 * `--only non_streaming.c64,streaming.saturated_c256` runs just those loads; BENCH_GATEWAY_FLAGS passes runtime
 * flags to the gateway child alone (e.g. "--cpu-prof-md --cpu-prof-dir=/tmp/prof" to profile it under one load).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

/** Goals from issue 4 §6 (stated for 2 cores). */
export const GOALS = { p50_added_ms: 0.3, p99_added_ms: 2, requests_per_s: 3000, rss_ratio_max: 1.5 } as const;

const CONCURRENCY = [1, 64, 256] as const;
const SATURATION_CONCURRENCY = [64, 256] as const;
/**
 * A request body; `metadata.user_id` (passed through unchanged) tells the upstream how long to wait before it
 * answers (`bench_delay_<ms>`) or to hold a stream open after its first event (`bench_hold`).
 */
const requestBody = (stream: boolean, marker: string) =>
  JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 64, stream, metadata: { user_id: marker }, messages: [{ role: "user", content: "hi" }] });
const delayMarker = (ms: number) => `bench_delay_${ms}`;
const HOLD_MARKER = "bench_hold";
const HOLD_BODY = requestBody(true, HOLD_MARKER);

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

/**
 * The lean upstream: fixed JSON or a short SSE stream, after the delay the body names (a stream sends its first
 * event at once and the rest after the delay, as a model streams), or held open until released.
 */
async function serveUpstream(): Promise<void> {
  const held: http.ServerResponse[] = [];
  // New connections, so a phase can tell whether the gateway's upstream fetch reused its keep-alive sockets.
  let connections = 0;
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => {
      const delay = Number(/"bench_delay_(\d+)"/.exec(body)?.[1] ?? 0);
      const later = (f: () => void) => (delay > 0 ? setTimeout(f, delay) : f());
      if (!body.includes('"stream":true')) {
        later(() => {
          res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(MESSAGE_JSON), "request-id": "req_bench" });
          res.end(MESSAGE_JSON);
        });
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "request-id": "req_bench" });
      if (body.includes(HOLD_MARKER)) {
        res.write(SSE_HEAD);
        held.push(res);
      } else if (delay > 0) {
        res.write(SSE_HEAD);
        later(() => res.end(SSE_TAIL));
      } else {
        res.end(SSE_HEAD + SSE_TAIL);
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on("connection", () => connections++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as AddressInfo;
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}` }) + "\n");
  answer({
    connections: () => String(connections),
    release: () => {
      for (const r of held.splice(0)) r.end(SSE_TAIL);
      return "ok";
    },
  }, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}

/** A child's command loop: each stdin line names a command whose answer is one stdout line; EOF ends the child. */
function answer(commands: Record<string, () => string>, onClose: () => void): void {
  const rl = createInterface({ input: process.stdin });
  rl.on("line", (line) => process.stdout.write((commands[line]?.() ?? `unknown command ${line}`) + "\n"));
  rl.on("close", onClose);
}

/** A full GC where the runtime offers one, so an RSS reading is settled. */
function fullGc(): string {
  (globalThis as { Bun?: { gc(sync: boolean): void } }).Bun?.gc(true);
  return "ok";
}

/** A bench child process (upstream or gateway): its first stdout line, and its command loop. */
interface Child {
  proc: ChildProcess;
  hello: Record<string, string>;
  ask(command: string): Promise<string>;
  stop(): Promise<void>;
}

/** Starts this script as a child in `--serve-<role>` mode, with optional runtime flags (a profiler). */
async function startChild(role: "upstream" | "floor" | "gateway", env: Record<string, string>, flags: string[] = []): Promise<Child> {
  const proc = spawn(process.execPath, [...flags, import.meta.filename, `--serve-${role}`], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const next = () => lines.next().then((r) => {
    if (r.done) throw new Error(`bench ${role} child exited`);
    return r.value;
  });
  const hello = JSON.parse(await next()) as Record<string, string>;
  let queue = Promise.resolve("");
  return {
    proc,
    hello,
    ask: (command) => (queue = queue.then(() => {
      proc.stdin!.write(command + "\n");
      return next();
    })),
    stop: async () => {
      // a closed stdin lets the child exit by itself (so a profiler it runs under can write its file); then it is killed
      proc.stdin!.end();
      const exited = new Promise<void>((r) => proc.once("exit", () => r()));
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      proc.kill("SIGTERM");
    },
  };
}

/**
 * The floor: the least a proxy in this runtime can be, served the way the gateway is (engine/runtime.ts
 * `serveFetch`) and calling upstream with the same fetch, with no routing, auth, budget or metering. The same
 * upstream call costs this much through any proxy here; the gateway's own work is what it adds on top.
 */
async function serveFloorChild(): Promise<void> {
  const { serveFetch } = await import("../../engine/runtime.ts");
  const target = `${process.env.ANTHROPIC_BASE_URL}/v1/messages`;
  const headers = { "content-type": "application/json", "x-api-key": "sk-ant-bench-upstream-key", "anthropic-version": "2023-06-01" };
  const srv = await serveFetch(async (req) => {
    const up = await fetch(target, { method: "POST", headers, body: await req.text() });
    return new Response(up.body, { status: up.status, headers: up.headers });
  }, { host: "127.0.0.1", port: 0 });
  process.stdout.write(JSON.stringify({ url: srv.url, key: "floor" }) + "\n");
  answer({ gc: fullGc }, () => void srv.close().then(() => process.exit(0)));
}

/** The child: the real gateway wiring, reporting its URL and key, and answering "gc" on stdin (so RSS is settled). */
async function serveGatewayChild(): Promise<void> {
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
  const deps = {
    upstreams: buildUpstreams({}, process.env),
    authenticate: credentials.authenticate,
    meter: meter.meter,
    budget: new Budgets(),
    prices: (m: string) => prices.priceOf(m) ?? undefined,
  };
  const gw = await serveGateway(deps, { host: "127.0.0.1", port: 0 }, serveFetch);
  // the same gateway on a unix socket too, as a trial's relay reaches it
  const sock = process.env.BENCH_GATEWAY_SOCKET ? await serveGateway(deps, { path: process.env.BENCH_GATEWAY_SOCKET }, serveFetch) : undefined;
  process.stdout.write(JSON.stringify({ url: gw.url, key }) + "\n");
  answer({ gc: fullGc }, () => void Promise.all([gw.close(), sock?.close()]).then(() => process.exit(0)));
}

/**
 * The trial's gateway relay (engine/trial/proxy/script.ts RELAY_SCRIPT, the python3 TCP-to-unix pipe every box
 * reaches its gateway through), run on this host in front of the gateway child's socket; undefined without python3.
 */
async function startRelay(socketPath: string): Promise<{ url: string; stop(): void } | undefined> {
  const { RELAY_SCRIPT } = await import("../../engine/trial/proxy/script.ts");
  const port = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const p = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(p));
    });
  });
  const proc = spawn("python3", ["-c", RELAY_SCRIPT, String(port), socketPath], { stdio: ["ignore", "pipe", "inherit"] });
  const up = await new Promise<boolean>((resolve) => {
    proc.once("error", () => resolve(false));
    proc.once("exit", () => resolve(false));
    createInterface({ input: proc.stdout! }).once("line", (l) => resolve(l.startsWith("evolve gateway relay listening")));
  });
  if (!up) return undefined;
  return { url: `http://127.0.0.1:${port}`, stop: () => void proc.kill("SIGTERM") };
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

/**
 * `concurrency` clients issue requests back to back until `n` are done or the time budget runs out. Client `i`
 * starts `i * spreadMs / concurrency` ms late: clients against an upstream with a fixed latency would otherwise
 * stay in lock step, and every request would arrive in one burst with all the others, which no set of agents does.
 */
async function phase(t: Target, body: string, concurrency: number, n: number, budgetMs: number, spreadMs = 0): Promise<Phase> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const stagger = (i: number) => (spreadMs > 0 ? new Promise((r) => setTimeout(r, (i * spreadMs) / concurrency)) : undefined);
  try {
    // Warm-up: open every socket and let the JITs see the path before timing; it also leaves the clients spread.
    const warm = Math.max(concurrency * 2, Math.min(200, n));
    let w = 0;
    await Promise.all(Array.from({ length: concurrency }, async (_, i) => {
      await stagger(i);
      while (w++ < warm) await once(agent, t, body);
    }));
    const latencies: number[] = [];
    let issued = 0;
    const t0 = performance.now();
    const deadline = t0 + budgetMs;
    await Promise.all(Array.from({ length: concurrency }, async (_, i) => {
      await stagger(i);
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

const median = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);

/**
 * The targets of one load, measured in rounds; each round runs them back to back. `relay` is the gateway reached
 * as a trial's box reaches it, through the relay to its unix socket.
 */
type TargetName = "direct" | "floor" | "gateway" | "relay";

/**
 * One load (mode × clients) over `rounds` rounds. A round runs the targets one after the other, so a slow spell
 * of the machine hits them alike; each figure is the median over rounds of that round's percentile, and
 * `added_*` is the median over rounds of (gateway − direct) in that round.
 */
async function load(
  targets: Partial<Record<TargetName, Target>> & Record<"direct" | "floor" | "gateway", Target>,
  body: string,
  c: number,
  n: number,
  budgetMs: number,
  rounds: number,
  spreadMs: number,
  connections: () => Promise<number>,
) {
  const names = (Object.keys(targets) as TargetName[]).filter((k) => targets[k] !== undefined);
  const per = Object.fromEntries(names.map((k) => [k, { p50: [] as number[], p99: [] as number[], rps: [] as number[], requests: 0 }])) as Record<
    TargetName,
    { p50: number[]; p99: number[]; rps: number[]; requests: number }
  >;
  const relayAdded = { p50: [] as number[], p99: [] as number[] };
  const added = { p50: [] as number[], p99: [] as number[] };
  const overFloor = { p50: [] as number[], p99: [] as number[] };
  let upstreamConnections = 0;
  for (let r = 0; r < rounds; r++) {
    const round = {} as Record<TargetName, { p50: number; p99: number }>;
    for (const name of names) {
      const before = name === "gateway" ? await connections() : 0;
      const ph = await phase(targets[name]!, body, c, Math.ceil(n / rounds), budgetMs / rounds, spreadMs);
      if (name === "gateway") upstreamConnections += (await connections()) - before;
      const sorted = ph.latencies.sort((x, y) => x - y);
      round[name] = { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
      per[name].p50.push(round[name].p50);
      per[name].p99.push(round[name].p99);
      per[name].rps.push((sorted.length / ph.elapsedMs) * 1000);
      per[name].requests += sorted.length;
    }
    added.p50.push(round.gateway.p50 - round.direct.p50);
    added.p99.push(round.gateway.p99 - round.direct.p99);
    overFloor.p50.push(round.gateway.p50 - round.floor.p50);
    overFloor.p99.push(round.gateway.p99 - round.floor.p99);
    if (round.relay) {
      relayAdded.p50.push(round.relay.p50 - round.direct.p50);
      relayAdded.p99.push(round.relay.p99 - round.direct.p99);
    }
  }
  const row: Record<string, number> = {
    requests: per.gateway.requests,
    added_p50_ms: r3(median(added.p50)),
    added_p99_ms: r3(median(added.p99)),
    floor_added_p50_ms: r3(median(per.floor.p50) - median(per.direct.p50)),
    floor_added_p99_ms: r3(median(per.floor.p99) - median(per.direct.p99)),
    over_floor_p50_ms: r3(median(overFloor.p50)),
    over_floor_p99_ms: r3(median(overFloor.p99)),
  };
  if (relayAdded.p50.length) {
    row.relay_added_p50_ms = r3(median(relayAdded.p50));
    row.relay_added_p99_ms = r3(median(relayAdded.p99));
  }
  for (const name of names) {
    row[`${name}_p50_ms`] = r3(median(per[name].p50));
    row[`${name}_p99_ms`] = r3(median(per[name].p99));
    row[`${name}_rps`] = Math.round(median(per[name].rps));
  }
  // Connections the gateway opened upstream (warm-ups included): about the client count when it reuses them.
  row.gateway_upstream_connections = upstreamConnections;
  return row;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: "string" },
      rounds: { type: "string" },
      only: { type: "string" },
      "model-latency-ms": { type: "string" },
      quick: { type: "boolean", default: false },
      "serve-gateway": { type: "boolean", default: false },
      "serve-floor": { type: "boolean", default: false },
      "serve-upstream": { type: "boolean", default: false },
    },
  });
  if (values["serve-gateway"]) return serveGatewayChild();
  if (values["serve-floor"]) return serveFloorChild();
  if (values["serve-upstream"]) return serveUpstream();
  const quick = values.quick;
  const whole = (name: string, v: string | undefined, dflt: number, min: number) => {
    const x = v === undefined ? dflt : Number(v);
    if (!Number.isInteger(x) || x < min) throw new Error(`--${name} must be a whole number >= ${min}, got ${v}`);
    return x;
  };
  const n = whole("requests", values.requests, quick ? 1500 : 8000, 1);
  const rounds = whole("rounds", values.rounds, quick ? 1 : 3, 1);
  const modelLatencyMs = whole("model-latency-ms", values["model-latency-ms"], 50, 0);
  // 32 timed phases (2 modes × (3 + 2) loads × 3 targets, and the relay at one client), each at most budgetMs in all
  // its rounds: ~2 min (quick: ~30 s).
  const budgetMs = quick ? 900 : 5000;

  // The upstream runs in a process of its own, as a provider does: a direct call then crosses between two
  // processes, as an agent's does, and the gateway adds its own process to that path, not two hops to none.
  const upstream = await startChild("upstream", {});
  const upstreamUrl = upstream.hello.url!;
  const connections = async () => Number(await upstream.ask("connections"));
  const flags = (process.env.BENCH_GATEWAY_FLAGS ?? "").split(/\s+/).filter(Boolean);
  const upstreamEnv = { ANTHROPIC_BASE_URL: upstreamUrl, ANTHROPIC_API_KEY: "sk-ant-bench-upstream-key" };
  let child: Child | undefined;
  let floor: Child | undefined;
  let relay: Awaited<ReturnType<typeof startRelay>>;
  const sockDir = mkdtempSync(join(tmpdir(), "evolve-bench-gw-"));
  const socketPath = join(sockDir, "gateway.sock");
  try {
    child = await startChild("gateway", { ...upstreamEnv, BENCH_GATEWAY_SOCKET: socketPath }, flags);
    floor = await startChild("floor", upstreamEnv);
    relay = await startRelay(socketPath);
    const common = { "content-type": "application/json", "anthropic-version": "2023-06-01" };
    const targets = {
      direct: { url: new URL(upstreamUrl), headers: { ...common, "x-api-key": "sk-ant-bench-upstream-key" } },
      floor: { url: new URL(floor.hello.url!), headers: common },
      gateway: { url: new URL(child.hello.url!), headers: { ...common, "x-api-key": child.hello.key! } },
      ...(relay ? { relay: { url: new URL(relay.url), headers: { ...common, "x-api-key": child.hello.key! } } } : {}),
    };
    // each trial has a relay of its own, serving that trial's agent alone: only one-client loads go through it
    const shared = { direct: targets.direct, floor: targets.floor, gateway: targets.gateway };

    const latency: Record<string, Record<string, Record<string, number>>> = { non_streaming: {}, streaming: {} };
    const saturated: Record<string, Record<string, Record<string, number>>> = { non_streaming: {}, streaming: {} };
    const throughput: Record<string, number> = {};
    let worstP50 = 0;
    let worstP99 = 0;
    let worstFloorP50 = 0;
    let worstOverFloorP50 = 0;
    const only = values.only?.split(",");
    const wanted = (name: string) => !only || only.includes(name);
    for (const [mode, stream] of [["non_streaming", false], ["streaming", true]] as const) {
      for (const c of CONCURRENCY) {
        if (!wanted(`${mode}.c${c}`)) continue;
        const delay = c === 1 ? 0 : modelLatencyMs;
        const row = await load(c === 1 ? targets : shared, requestBody(stream, delayMarker(delay)), c, n, budgetMs, rounds, delay, connections);
        worstP50 = Math.max(worstP50, row.added_p50_ms!);
        worstP99 = Math.max(worstP99, row.added_p99_ms!);
        worstFloorP50 = Math.max(worstFloorP50, row.floor_added_p50_ms!);
        worstOverFloorP50 = Math.max(worstOverFloorP50, row.over_floor_p50_ms!);
        latency[mode]![`c${c}`] = { ...row, model_latency_ms: delay };
      }
      for (const c of SATURATION_CONCURRENCY) {
        if (!wanted(`${mode}.saturated_c${c}`)) continue;
        const row = await load(shared, requestBody(stream, delayMarker(0)), c, n, budgetMs, rounds, 0, connections);
        saturated[mode]![`c${c}`] = row;
        throughput[`${mode}_c${c}`] = row.gateway_rps!;
      }
    }

    // Memory: RSS (after a full GC) with 16 streams held open, then with 256.
    const gw = child;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
    const open: http.ClientRequest[] = [];
    await openHeld(agent, targets.gateway, 16, open);
    await gw.ask("gc");
    const rss16 = rssKb(gw.proc.pid!);
    await openHeld(agent, targets.gateway, 240, open);
    await gw.ask("gc");
    const rss256 = rssKb(gw.proc.pid!);
    await upstream.ask("release");
    for (const r of open) r.destroy();
    agent.destroy();
    const ratio = rss256 / rss16;

    const minRps = Object.keys(throughput).length ? Math.min(...Object.values(throughput)) : Number.NaN;
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
      requests_per_load: n,
      rounds,
      model_latency_ms: modelLatencyMs,
      added_latency: latency,
      worst_added_p50_ms: r3(worstP50),
      worst_added_p99_ms: r3(worstP99),
      // the same worst for the no-logic floor proxy, and the gateway's own share over it
      worst_floor_added_p50_ms: r3(worstFloorP50),
      worst_over_floor_p50_ms: r3(worstOverFloorP50),
      throughput: { gateway_requests_per_s: throughput, saturated },
      memory: { rss_16_open_streams_mb: r3(rss16 / 1024), rss_256_open_streams_mb: r3(rss256 / 1024), ratio: r3(ratio) },
      goals: { p50_added_ms: `<= ${GOALS.p50_added_ms}`, p99_added_ms: `<= ${GOALS.p99_added_ms}`, requests_per_s: `>= ${GOALS.requests_per_s}`, memory: `flat (256/16 RSS ratio <= ${GOALS.rss_ratio_max})` },
      goals_met: { ...goals_met, all: Object.values(goals_met).every(Boolean) },
    };
    process.stdout.write(JSON.stringify(report, null, 2) + "\n");
  } finally {
    relay?.stop();
    await floor?.stop();
    await child?.stop();
    await upstream.stop();
    rmSync(sockDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`gateway bench: ${(err as Error)?.stack ?? err}\n`);
  process.exit(2);
});
