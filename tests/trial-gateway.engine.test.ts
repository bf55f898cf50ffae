/**
 * The gateway in real trials (issue 4 §2–§5): an agent in a no-network box calls its model with the official SDKs
 * through the trial's gateway lease, and nothing else answers it; its key dies with the agent phase; an LLM-judged
 * verifier gets its own family-scoped credential; spend is metered into the record, the trace, result.json and
 * evolve.json; budgets stop a trial (BUDGET) or end the agent (the trial's own cap); and the provider keys are
 * found nowhere a box, the trial tree, the store or the logs could show them.
 *
 * Upstream is fixtures/upstream/server.ts, the scripted stand-in for the providers; everything else is real:
 * podman, LMDB, node and the SDKs inside the box.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import type { Engine } from "../engine/driver/types.ts";
import { registerHarness, type HarnessContext } from "../engine/harness/index.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { ModelGateway } from "../engine/gateway-host/model-gateway.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import type { TrialRequest } from "../engine/trial/types.ts";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { probeHarness, stageProbe } from "./support/probe-harness.ts";
import { readTrace } from "../engine/trace/store.ts";

const FIXTURES = join(__dirname, "..", "fixtures", "tasks", "trials");
// distinctive, so a scan that finds them cannot be finding anything else
const REAL_ANTHROPIC = "sk-ant-REAL-provider-key-7f3c9e1d5b";
const REAL_OPENAI = "sk-REAL-openai-provider-key-2a8d4f6c0e";

let home: string;
let engine: Engine;
let store: Store;
let staged: string;
let other: Server;
let otherUrl: string;
const upstream = new ScriptedUpstream();
/** Per-trial knobs of the registered probe (the registry is process-wide). */
const probe: { extraEnv: Record<string, string>; afterRun?: (ctx: HarnessContext) => Promise<void> } = { extraEnv: {} };

function hostAddress(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal && !a.address.startsWith("10.88.")) return a.address;
  }
  throw new Error("no external IPv4 address on this host");
}

async function trial(task: string, o: Partial<TrialRequest> & { gateway?: ModelGateway } = {}): Promise<TrialRecord> {
  const { gateway, ...req } = o;
  const dir = join(FIXTURES, task);
  return runTrial(
    { trialId: newId(), jobId: "JOB-GW-TEST", home, task: { dir, digest: await taskDigest(dir), name: task }, agent: { name: "sdk-probe" }, timeoutMultiplier: 1, secrets: {}, ...req },
    { engine, store, ...(gateway ? { gateway } : {}) },
  );
}

const trialFile = (id: string, p: string) => readFileSync(join(home, "trials", id, p), "utf8");

/** Every file under `dir` whose bytes contain one of `needles` (binary files included: LMDB's data file). */
function filesContaining(dir: string, needles: string[]): string[] {
  const hits: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) {
        const bytes = readFileSync(p);
        if (needles.some((n) => bytes.includes(n))) hits.push(p);
      }
    }
  };
  walk(dir);
  return hits;
}

/** Concatenated tar streams of box folders, searched as bytes (a needle split between chunks is still found). */
async function boxBytes(ctx: HarnessContext, paths: string[]): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (const p of paths) await ctx.engine.archiveGet(ctx.containerId, p, (c) => parts.push(c)).catch(() => false);
  return Buffer.concat(parts);
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-trial-gw-"));
  await upstream.start();
  writeFileSync(
    join(home, "gateway.toml"),
    `[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "${REAL_ANTHROPIC}"\n\n[upstreams.openai]\nbase_url = "${upstream.url}/v1"\napi_key = "${REAL_OPENAI}"\n`,
  );
  engine = await openEngine({ home });
  store = openStore(home);
  staged = stageProbe();
  registerHarness(probeHarness(staged, { get extraEnv() { return probe.extraEnv; }, afterRun: (ctx) => probe.afterRun?.(ctx) ?? Promise.resolve() }));
  other = createServer((_req, res) => res.end("other-destination"));
  await new Promise<void>((r) => other.listen(0, "0.0.0.0", r));
  otherUrl = `http://${hostAddress()}:${(other.address() as { port: number }).port}/`;
}, 120_000);

afterAll(async () => {
  await settleRemovals();
  other?.close();
  await upstream.close();
  await store?.close();
  await engine?.close();
  for (const d of [home, staged]) if (d) rmSync(d, { recursive: true, force: true });
});

describe("an agent's model calls", () => {
  let rec: TrialRecord;
  const seen: { procEnv: string; boxFiles: Buffer; live?: TrialRecord["spend"] } = { procEnv: "", boxFiles: Buffer.alloc(0) };

  beforeAll(async () => {
    upstream.reset();
    probe.extraEnv = { PROBE_OTHER_URLS: `${otherUrl},http://1.1.1.1/` };
    probe.afterRun = async (ctx) => {
      const env = await ctx.engine.exec(ctx.containerId, ["sh", "-c", "for p in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $p; done 2>/dev/null"], { user: "root" });
      seen.procEnv = env.stdout;
      seen.boxFiles = await boxBytes(ctx, ["/etc", "/root", "/tmp", "/app", "/logs", "/home", "/run", "/var/tmp", "/opt/probe/probe.mjs"]);
      seen.live = store.getTrial(id)?.spend;
    };
    const id = newId();
    rec = await trial("gateway-agent", { trialId: id });
    probe.afterRun = undefined;
  }, 240_000);

  it("reach the model through the gateway with the official SDKs from a no-network box, and nothing else", () => {
    expect(rec.status, trialFile(rec.id, "trial.log")).toBe("SCORED");
    const out = JSON.parse(trialFile(rec.id, "agent/probe.json"));
    expect(out.calls.map((c: { name: string; ok: boolean }) => [c.name, c.ok])).toEqual([
      ["anthropic", true],
      ["anthropic-stream", true],
      ["openai-chat", true],
    ]);
    expect(out.other).toHaveLength(2);
    for (const o of out.other) expect(o.ok, JSON.stringify(o)).toBe(false);
    // upstream saw exactly those three calls, each with the real key and never the trial's gateway key
    expect(upstream.requests.map((r) => r.path)).toEqual(["/messages", "/messages", "/chat/completions"]);
    expect(upstream.requests[0].headers["x-api-key"]).toBe(REAL_ANTHROPIC);
    expect(upstream.requests[2].headers.authorization).toBe(`Bearer ${REAL_OPENAI}`);
    for (const r of upstream.requests) expect(JSON.stringify(r.headers)).not.toContain("evk-");
  });

  it("lose their key when the agent phase ends: the verifier's call with it is refused (401)", () => {
    expect(trialFile(rec.id, "verifier/test-stdout.txt")).toContain("agent key after the agent phase -> 401");
    expect(rec.rewards).toEqual({ reward: 1 });
  });

  it("are metered: live spend while running, then final spend, tokens, trace events, result.json and evolve.json", () => {
    expect(seen.live).toMatchObject({ source: "live", final_usd: null });
    expect(seen.live!.live_usd).toBeGreaterThan(0);
    const events = [...readTrace(home, rec.id)].filter((e) => (e.data as { update?: { source?: string } }).update?.source === "gateway");
    expect(events.map((e) => (e.data as { update: { model: string } }).update.model)).toEqual(["anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5", "openai/gpt-4o-mini"]);
    const costs = events.map((e) => (e.data as { update: { costUsd: number } }).update.costUsd);
    for (const c of costs) expect(c).toBeGreaterThan(0);
    const total = costs.reduce((a, b) => a + b, 0);
    expect(rec.spend).toMatchObject({ source: "measured", calls: 3, unpriced_calls: 0 });
    expect(rec.spend!.final_usd).toBeCloseTo(total, 12);
    expect(rec.tokens).toMatchObject({ prompt: 75, output: 36 });
    const result = JSON.parse(trialFile(rec.id, "result.json"));
    expect(result.agent_result).toMatchObject({ n_input_tokens: 75, n_output_tokens: 36, cost_usd: rec.spend!.final_usd });
    const evolve = JSON.parse(trialFile(rec.id, "evolve.json"));
    expect(evolve).toMatchObject({ spend_source: "measured", lanes: { agent: { calls: 3, final: true }, judge: null } });
  });

  it("never let a provider key into the box, the trial tree, the store or the logs", () => {
    const keys = [REAL_ANTHROPIC, REAL_OPENAI];
    // the scans see what they should: the box's own processes (its creation env), and the files where the agent
    // left its environment (/logs/agent/env.json) and its gateway key (/tmp/agent-key)
    expect(seen.procEnv).toContain("HOSTNAME=");
    expect(seen.boxFiles.includes('"ANTHROPIC_API_KEY": "evk-')).toBe(true);
    expect(seen.boxFiles.includes('"ANTHROPIC_BASE_URL": "http://evolve-gateway:4000"')).toBe(true);
    for (const k of keys) {
      expect(seen.procEnv).not.toContain(k);
      expect(seen.boxFiles.includes(k)).toBe(false);
    }
    // the home holds the store (LMDB data file), the trial tree, the logs and gateway.toml itself: only the latter
    expect(filesContaining(home, keys)).toEqual([join(home, "gateway.toml")]);
    // and the gateway keys the box did see are redacted from the trial tree
    expect(filesContaining(join(home, "trials", rec.id), ["evk-"])).toEqual([]);
  });
});

describe("judges", () => {
  it("get a family-scoped credential in the verifier, answer under --ve's model, and bill apart from the agent", async () => {
    upstream.reset();
    upstream.push({ text: "PASS" });
    const rec = await trial("gateway-judge", { agent: { name: "oracle" }, verifierEnv: { REWARDKIT_MODEL: "claude-haiku-4-5" } });
    const stdout = trialFile(rec.id, "verifier/test-stdout.txt");
    expect(rec.status, stdout).toBe("SCORED");
    expect(stdout).toMatch(/judge 200 says 'PASS'; an OpenAI model with this key -> 403; base http:\/\/evolve-gateway:4000/);
    expect(rec.rewards).toEqual({ reward: 1 });
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0].body.model).toBe("claude-haiku-4-5");
    expect(rec.spend!.judge).toMatchObject({ calls: 1, unpriced_calls: 0 });
    expect(rec.spend!.judge!.final_usd).toBeGreaterThan(0);
    expect(rec.spend).toMatchObject({ live_usd: 0, final_usd: 0, calls: 0, source: "measured" });
    const events = [...readTrace(home, rec.id)].map((e) => (e.data as { update: { _meta?: { lane?: unknown } } }).update._meta?.lane);
    expect(events).toEqual(["judge"]);
  }, 240_000);
});

describe("budgets", () => {
  it("a user's spent credits stop the trial: BUDGET, ApiUsageLimitError with user:, nothing charged", async () => {
    upstream.reset();
    probe.extraEnv = { PROBE_ONLY_ANTHROPIC: "1" };
    const gateway = new ModelGateway({ home, store, budget: { user: "tester", user_credits_usd: 0.0001 } });
    try {
      const rec = await trial("gateway-agent", { gateway });
      expect(rec.status, trialFile(rec.id, "trial.log")).toBe("BUDGET");
      expect(rec.exception?.type).toBe("ApiUsageLimitError");
      expect(rec.exception?.message).toMatch(/^user: user tester budget of \$0\.0001 would be exceeded/);
      expect(rec.rewards).toBeNull();
      expect(upstream.requests).toHaveLength(0);
      expect(store.getSpend("user", "tester", "")).toBe(0);
    } finally {
      await gateway.close();
    }
  }, 240_000);

  it("the trial's own cap ends the agent's spending, not the trial: the verifier still scores it", async () => {
    upstream.reset();
    probe.extraEnv = { PROBE_ONLY_ANTHROPIC: "1", PROBE_REPEAT: "3" };
    const gateway = new ModelGateway({ home, store, budget: { user: "tester" } });
    try {
      // each call reserves its worst case (about $0.0015: its body's bytes as tokens and 64 output tokens, at
      // sonnet's dearest rates) and costs $0.000255: one spent plus a reservation fit under $0.0019, two do not
      const rec = await trial("gateway-agent", { gateway, maxSpendUsd: 0.0019 });
      const out = JSON.parse(trialFile(rec.id, "agent/probe.json"));
      expect(out.calls.map((c: { ok: boolean; status?: number }) => c.ok || c.status)).toEqual([true, true, 429]);
      expect(rec.status).toBe("SCORED");
      expect(rec.exception?.type).toBe("AgentSpendCapError");
      expect(rec.exception?.message).toMatch(/trial: trial .* budget of \$0\.0019 would be exceeded/);
      expect(rec.spend!.final_usd!).toBeLessThanOrEqual(0.0019);
      // settled spend goes to the user's ledger, so credits carry over to the next run
      expect(store.getSpend("user", "tester", "")).toBeCloseTo(rec.spend!.final_usd!, 12);
    } finally {
      await gateway.close();
      probe.extraEnv = {};
    }
  }, 240_000);
});
