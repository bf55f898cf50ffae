/**
 * `evolve gateway serve` through the real CLI: it prints one local credential with the env a client needs, the
 * official Anthropic SDK completes a turn through it against the scripted upstream, the upstream sees the real
 * provider key and never the printed one, and the call is metered to $EVOLVE_HOME/gateway/calls.jsonl. Like a
 * run's gateway, it books spend in the store's ledger, obeys `evolve gateway stop` from another process, and
 * refuses calls past the `[budget]` credits.
 */
import Anthropic from "@anthropic-ai/sdk";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
const upstream = new ScriptedUpstream();
const REAL_KEY = "sk-ant-real-provider-key-for-tests";
let home: string;
const children: ReturnType<typeof spawn>[] = [];
const bun = join(root, "node_modules/.bin/bun");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-gw-serve-"));
  await upstream.start();
});
afterAll(async () => {
  for (const c of children) c.kill("SIGTERM");
  await upstream.close();
});

/** Starts `evolve gateway serve` in `home` and resolves with the env it printed, once it listens. */
async function serve(home: string): Promise<{ env: Record<string, string>; child: ReturnType<typeof spawn> }> {
  const child = spawn(bun, [join(root, "main.ts"), "gateway", "serve", "--port", "0"], {
    env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", ANTHROPIC_API_KEY: REAL_KEY, ANTHROPIC_BASE_URL: upstream.url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let printed = "";
  let errors = "";
  child.stdout!.on("data", (b) => (printed += b));
  child.stderr!.on("data", (b) => (errors += b));
  const t0 = Date.now();
  while (!/export ANTHROPIC_BASE_URL=/.test(printed) && Date.now() - t0 < 20_000 && child.exitCode === null) await sleep(50);
  if (!/export ANTHROPIC_BASE_URL=/.test(printed)) throw new Error(`gateway serve did not start: ${errors}`);
  return { env: Object.fromEntries([...printed.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!])), child };
}

// the short commands (status, stop, resume) run in one Bun host process (tests/support/cli-host.ts)
const host = cliHost();
afterAll(() => host.close());

/** Runs a short CLI command to completion in `home`. */
function evolve(home: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = host.run(args, { env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
  return { status: r.code, stdout: r.stdout, stderr: r.stderr };
}

const ask = (client: Anthropic) => client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });

it("serves a real SDK turn with its own printed credential, holds the provider key, and meters the call", async () => {
  const { env } = await serve(home);
  expect(env.ANTHROPIC_API_KEY).toMatch(/^evk-/);
  expect(env.ANTHROPIC_API_KEY).not.toBe(REAL_KEY);

  upstream.push({ text: "hello through the gateway", usage: { input_tokens: 12, output_tokens: 5 } });
  const client = new Anthropic({ apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL, maxRetries: 0 });
  const msg = await client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
  expect(msg.content).toEqual([{ type: "text", text: "hello through the gateway" }]);

  const seen = upstream.requests.at(-1)!;
  expect(seen.headers["x-api-key"]).toBe(REAL_KEY);
  expect(JSON.stringify(seen.headers)).not.toContain(env.ANTHROPIC_API_KEY);

  const bad = new Anthropic({ apiKey: "evk-not-issued", baseURL: env.ANTHROPIC_BASE_URL, maxRetries: 0 });
  await expect(bad.messages.create({ model: "claude-sonnet-4-5", max_tokens: 8, messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 401 });

  const log = join(home, "gateway", "calls.jsonl");
  expect(existsSync(log)).toBe(true);
  const calls = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const ok = calls.find((c) => c.status === 200);
  expect(ok).toMatchObject({ trialId: "local", lane: "agent", route: "messages" });
  expect(ok.usage).toMatchObject({ input_tokens: 12, output_tokens: 5 });
  expect(ok.cost_usd).toBeGreaterThan(0);
  expect(readFileSync(log, "utf8")).not.toContain(REAL_KEY);

  // the spend is booked in the store's ledger (batched off the call's path, so within moments)
  let status: any;
  for (let i = 0; i < 40; i++) {
    status = JSON.parse(evolve(home, ["gateway", "status", "--json"]).stdout);
    if (status.user.spent_usd > 0) break;
    await sleep(50);
  }
  expect(status.user.spent_usd).toBeCloseTo(ok.cost_usd, 12);
});

it("obeys `evolve gateway stop` from another process within a second, and `resume` lifts it", async () => {
  const h = mkdtempSync(join(tmpdir(), "evolve-gw-serve-stop-"));
  const { env } = await serve(h);
  const client = new Anthropic({ apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL, maxRetries: 0 });
  await ask(client);

  expect(evolve(h, ["gateway", "stop", "provider incident"]).status).toBe(0);
  // asked until the stop shows, for as long as the test used to sleep: the gateway polls the store every second
  let before = 0;
  let refused: any;
  for (const t0 = Date.now(); ; ) {
    before = upstream.requests.length;
    refused = await ask(client).then(() => undefined, (e) => e);
    if (refused !== undefined || Date.now() - t0 > 1500) break;
    await sleep(50);
  }
  expect(refused).toMatchObject({ status: 429 });
  expect(refused.error).toMatchObject({ type: "error", error: { type: "rate_limit_error", message: "other: provider incident" } });
  expect(upstream.requests.length).toBe(before);

  expect(evolve(h, ["gateway", "resume"]).status).toBe(0);
  upstream.push({ text: "back", usage: { input_tokens: 3, output_tokens: 1 } });
  let back = await ask(client).then((m) => m, (e) => e);
  for (const t0 = Date.now(); back?.status === 429 && Date.now() - t0 <= 1500; ) {
    await sleep(50);
    back = await ask(client).then((m) => m, (e) => e);
  }
  expect(back.content).toEqual([{ type: "text", text: "back" }]);
});

it("refuses calls past the user's [budget] credits in the provider's shape, sending nothing upstream", async () => {
  const h = mkdtempSync(join(tmpdir(), "evolve-gw-serve-credits-"));
  // a sonnet call with max_tokens 64 may cost about $0.001: credits of a tenth of a cent less than that cannot hold it
  writeFileSync(join(h, "config.toml"), '[budget]\nuser = "carol"\nuser_credits_usd = 0.0001\n');
  const { env } = await serve(h);
  const client = new Anthropic({ apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL, maxRetries: 0 });
  const before = upstream.requests.length;
  const refused = await ask(client).then(() => undefined, (e) => e);
  expect(refused).toMatchObject({ status: 429 });
  expect(refused.error.error.message).toMatch(/^user: user carol budget of \$0\.0001/);
  expect(upstream.requests.length).toBe(before);
});

it("a gateway.toml it cannot read is a one-line error with a stable code, exit 2", () => {
  const h = mkdtempSync(join(tmpdir(), "evolve-gw-serve-bad-"));
  writeFileSync(join(h, "gateway.toml"), "[upstreams.local\nbase_url = 1\n");
  // a process of its own: were it to start serving, it would never end
  const r = spawnSync(bun, [join(root, "main.ts"), "gateway", "serve", "--port", "0"], { env: { ...process.env, EVOLVE_HOME: h, NO_COLOR: "1" }, encoding: "utf8", timeout: 30_000 });
  expect(r.status).toBe(2);
  expect(r.stderr.split("\n")[0]).toMatch(/^error\[gateway_config_invalid\]: cannot read the gateway's upstreams \(.*gateway\.toml\): /);
  expect(r.stdout).toBe("");
});

it("refuses a body over its limit in the provider's shape, under Bun too: gateway.toml's limit, and the default past Bun's own 128 MB", async () => {
  const h = mkdtempSync(join(tmpdir(), "evolve-gw-serve-body-"));
  writeFileSync(join(h, "gateway.toml"), "max_request_body_mb = 1\n");
  const { env } = await serve(h);
  const client = new Anthropic({ apiKey: env.ANTHROPIC_API_KEY, baseURL: env.ANTHROPIC_BASE_URL, maxRetries: 0 });
  const before = upstream.requests.length;
  const refused = await client.messages
    .create({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "x".repeat(2 * 1024 * 1024) }] })
    .then(() => undefined, (e) => e);
  expect(refused).toMatchObject({ status: 413 });
  expect(refused.error).toEqual({ type: "error", error: { type: "request_too_large", message: "request body exceeds this gateway's limit of 1 MiB (max_request_body_mb in gateway.toml)" } });
  expect(upstream.requests.length).toBe(before);

  // no gateway.toml: the default limit (64 MiB) answers a 200 MB body, where Bun alone answered an empty 413
  const d = await serve(mkdtempSync(join(tmpdir(), "evolve-gw-serve-body-default-")));
  const r = await fetch(`${d.env.ANTHROPIC_BASE_URL}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": d.env.ANTHROPIC_API_KEY!, "content-type": "application/json" },
    body: new Uint8Array(200 * 1024 * 1024).fill(32),
  });
  expect(r.status).toBe(413);
  expect((await r.json()).error.message).toBe("request body exceeds this gateway's limit of 64 MiB (max_request_body_mb in gateway.toml)");
  expect(upstream.requests.length).toBe(before);
}, 60_000);
