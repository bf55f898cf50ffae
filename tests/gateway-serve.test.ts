/**
 * `evolve gateway serve` through the real CLI: it prints one local credential with the env a client needs, the
 * official Anthropic SDK completes a turn through it against the scripted upstream, the upstream sees the real
 * provider key and never the printed one, and the call is metered to $EVOLVE_HOME/gateway/calls.jsonl.
 */
import Anthropic from "@anthropic-ai/sdk";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";

const root = resolve(__dirname, "..");
const upstream = new ScriptedUpstream();
const REAL_KEY = "sk-ant-real-provider-key-for-tests";
let home: string;
let child: ReturnType<typeof spawn> | undefined;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-gw-serve-"));
  await upstream.start();
});
afterAll(async () => {
  child?.kill("SIGTERM");
  await upstream.close();
});

it("serves a real SDK turn with its own printed credential, holds the provider key, and meters the call", async () => {
  child = spawn(join(root, "node_modules/.bin/bun"), [join(root, "main.ts"), "gateway", "serve", "--port", "0"], {
    env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", ANTHROPIC_API_KEY: REAL_KEY, ANTHROPIC_BASE_URL: upstream.url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let printed = "";
  child.stdout!.on("data", (b) => (printed += b));
  const t0 = Date.now();
  while (!/export ANTHROPIC_BASE_URL=/.test(printed) && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 50));
  const env = Object.fromEntries([...printed.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1], m[2]]));
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
});
