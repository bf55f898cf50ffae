/**
 * The real agent CLIs through the gateway (issue 4 §6): `codex exec --json` with a custom Responses provider and
 * `claude -p --output-format stream-json` each complete a scripted turn against the scripted upstream, holding only
 * a gateway credential; the upstream sees the real provider key, and the gateway meters the call from the stream
 * (codex hangs up right after `response.completed`, so metering must not wait for anything after it).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { Budgets } from "../gateway/budget.ts";
import { Credentials } from "../gateway/credentials.ts";
import { CallMeter } from "../gateway/meter.ts";
import { Prices } from "../gateway/prices.ts";
import { serveGateway, type GatewayListener } from "../gateway/serve.ts";
import { serveFetch } from "../engine/runtime.ts";
import { buildUpstreams } from "../gateway/upstreams.ts";

const root = resolve(__dirname, "..");
const CODEX = join(root, "node_modules/.bin/codex");
const CLAUDE = join(root, "node_modules/.bin/claude");
const REAL_ANTHROPIC = "sk-ant-REAL-key-held-by-the-gateway";
const REAL_OPENAI = "sk-oai-REAL-key-held-by-the-gateway";

const upstream = new ScriptedUpstream();
const credentials = new Credentials();
const prices = new Prices();
let meter: CallMeter;
let gw: GatewayListener;
let scratch: string;

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-gw-clis-"));
  await upstream.start();
  gw = await serveGateway({
    upstreams: buildUpstreams(
      { upstreams: { anthropic: { base_url: upstream.url, api_key: REAL_ANTHROPIC }, openai: { base_url: `${upstream.url}/v1`, api_key: REAL_OPENAI } } },
      {},
    ),
    authenticate: credentials.authenticate,
    meter: (c) => meter.meter(c),
    budget: new Budgets(),
    prices: (m) => prices.priceOf(m) ?? undefined,
  }, { port: 0 }, serveFetch);
});

afterAll(async () => {
  await gw?.close();
  await upstream.close();
  rmSync(scratch, { recursive: true, force: true });
});

beforeEach(() => {
  upstream.reset();
  meter = new CallMeter();
});

/** Runs a CLI to completion with a hard time limit; stdin is closed so neither waits for input. */
function run(cmd: string, args: string[], env: Record<string, string>, cwd: string, limitMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b) => (stdout += b));
    child.stderr.on("data", (b) => (stderr += b));
    const timer = setTimeout(() => child.kill("SIGKILL"), limitMs);
    child.once("error", (e) => {
      clearTimeout(timer);
      fail(e);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** Only what a CLI needs from the host: a PATH, a private HOME, and nothing that could carry a real key. */
function baseEnv(home: string): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, LANG: "C.UTF-8", NO_COLOR: "1" };
}

const jsonLines = (s: string): any[] =>
  s.split("\n").filter((l) => l.trim().startsWith("{")).map((l) => JSON.parse(l));

/** Stream metering runs when the body ends; the client may exit a moment before the gateway's end hook. */
async function waitForCalls(trialId: string, n: number): Promise<void> {
  const t0 = Date.now();
  while (meter.records(trialId).length < n && Date.now() - t0 < 5_000) await new Promise((r) => setTimeout(r, 20));
}

describe.skipIf(!existsSync(CODEX))("codex exec through the gateway", () => {
  it("completes a scripted Responses turn, with the real key only upstream, and the call metered", async () => {
    const { key } = credentials.issueAgent({ trialId: "trial-codex" });
    const dir = mkdtempSync(join(scratch, "codex-"));
    const codexHome = join(dir, "codex-home");
    const work = join(dir, "work");
    mkdirSync(codexHome);
    mkdirSync(work);
    writeFileSync(
      join(codexHome, "config.toml"),
      [
        'model = "gpt-5"',
        'model_provider = "evolve"',
        "",
        "[model_providers.evolve]",
        'name = "evolve gateway"',
        `base_url = "${gw.url}/v1"`,
        'env_key = "EVOLVE_GATEWAY_KEY"',
        'wire_api = "responses"',
        "supports_websockets = false",
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
      ].join("\n"),
    );
    upstream.push({ text: "hi from the scripted upstream", usage: { input_tokens: 1200, output_tokens: 9, cache_read_tokens: 300 } });

    const r = await run(
      CODEX,
      ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C", work, "say hi"],
      { ...baseEnv(dir), CODEX_HOME: codexHome, EVOLVE_GATEWAY_KEY: key },
      work,
    );
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const lines = jsonLines(r.stdout);
    const messages = lines.filter((l) => l.type === "item.completed" && l.item?.type === "agent_message").map((l) => l.item.text);
    expect(messages).toContain("hi from the scripted upstream");

    const posts = upstream.requests.filter((q) => q.method === "POST" && q.path === "/responses");
    expect(posts).toHaveLength(1);
    expect(posts[0]!.headers.authorization).toBe(`Bearer ${REAL_OPENAI}`);
    expect(JSON.stringify(upstream.requests.map((q) => q.headers))).not.toContain(key);

    await waitForCalls("trial-codex", 1);
    const calls = meter.records("trial-codex");
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ route: "responses", model: "openai/gpt-5", stream: true, status: 200, lane: "agent" });
    // Responses counts cached tokens inside input_tokens; the meter keeps the buckets disjoint.
    expect(calls[0]!.usage).toMatchObject({ input_tokens: 1200, cached_read_tokens: 300, output_tokens: 9 });
    expect(calls[0]!.error).toBeUndefined();
    expect(calls[0]!.cost_usd).toBeGreaterThan(0);
  }, 90_000);
});

describe.skipIf(!existsSync(CLAUDE))("claude -p through the gateway", () => {
  it("completes a scripted Messages turn, forwarding anthropic-version/-beta, with the call metered", async () => {
    const { key } = credentials.issueAgent({ trialId: "trial-claude" });
    const dir = mkdtempSync(join(scratch, "claude-"));
    const config = join(dir, "claude-config");
    const work = join(dir, "work");
    mkdirSync(config);
    mkdirSync(work);
    upstream.push({ text: "hi from the scripted upstream", usage: { input_tokens: 40, output_tokens: 7, cache_read_tokens: 1000, cache_write_tokens: 200 } });

    const r = await run(
      CLAUDE,
      ["-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5", "say hi"],
      {
        ...baseEnv(dir),
        ANTHROPIC_BASE_URL: gw.url,
        ANTHROPIC_API_KEY: key,
        IS_SANDBOX: "1",
        CLAUDE_CONFIG_DIR: config,
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1",
        DISABLE_AUTOUPDATER: "1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      },
      work,
    );
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const lines = jsonLines(r.stdout);
    const result = lines.at(-1);
    expect(result).toMatchObject({ type: "result", subtype: "success", is_error: false, result: "hi from the scripted upstream" });

    const posts = upstream.requests.filter((q) => q.method === "POST" && q.path === "/messages");
    // With non-essential traffic off there is no side call (session title): exactly the one turn.
    expect(posts).toHaveLength(1);
    expect(posts[0]!.headers["x-api-key"]).toBe(REAL_ANTHROPIC);
    expect(posts[0]!.headers["anthropic-version"]).toBe("2023-06-01");
    // its `?beta=true` passes through with the request, as a transparent gateway should
    expect(posts[0]!.query).toBe("beta=true");
    // Its comma-separated beta list arrives whole (claude-code-YYYYMMDD plus the feature betas).
    expect(String(posts[0]!.headers["anthropic-beta"])).toMatch(/(^|,)claude-code-\d{8}(,|$)/);
    expect(String(posts[0]!.headers["anthropic-beta"]).split(",").length).toBeGreaterThan(1);
    expect(JSON.stringify(upstream.requests.map((q) => q.headers))).not.toContain(key);

    // Its warm-up `HEAD /` is answered without a 5xx (a 404 is fine: the CLI only probes reachability).
    expect((await fetch(`${gw.url}/`, { method: "HEAD" })).status).toBeLessThan(500);

    await waitForCalls("trial-claude", 1);
    const calls = meter.records("trial-claude");
    expect(calls).toHaveLength(1);
    const turn = calls[0];
    expect(turn).toMatchObject({ model: "anthropic/claude-sonnet-4-5", stream: true, status: 200, lane: "agent" });
    expect(turn!.usage).toMatchObject({ input_tokens: 40, cached_read_tokens: 1000, cache_write_tokens: 200, output_tokens: 7 });
    expect(turn!.cost_usd).toBeGreaterThan(0);
  }, 90_000);
});
