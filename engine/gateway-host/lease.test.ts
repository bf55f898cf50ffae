/**
 * The process's gateway as trials lease it (engine/gateway-host/model-gateway.ts), driven over each lease's real unix socket
 * against the scripted upstream: the global stop, credits and team budgets that carry over through the store's
 * ledger, the smallest of the per-trial caps, and a lease's end (keys dead, socket gone).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { monthOf } from "../../gateway/budget.ts";
import { buildUpstreams } from "../../gateway/upstreams.ts";
import { openStore, type Store } from "../store/index.ts";
import { INFLIGHT_SETTING, ModelGateway, STOP_SETTING, type GatewayLease } from "./model-gateway.ts";
import { ScriptedUpstream } from "../../fixtures/upstream/server.ts";

const upstream = new ScriptedUpstream();
let home: string;
let store: Store;
let n = 0;

/** One Messages call over the lease's socket, as the relay would forward it (streamed: the SSE text as `body`). */
function call(lease: GatewayLease, key: string, stream = false, model = "claude-sonnet-4-5"): Promise<{ status: number; body: any }> {
  const body = JSON.stringify({ model, max_tokens: 64, stream, messages: [{ role: "user", content: "hi" }] });
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: join(lease.socketDir, "gateway.sock"), agent: false, path: "/v1/messages", method: "POST", headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: stream && res.statusCode === 200 ? text : JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** The gateways here poll the store every 50 ms (1 s in a run); the tests wait for the polls themselves. */
const POLL_MS = 50;

/** Each test gateway's next poll, as a promise (its `onPoll` settles every waiter). */
const nextPoll = new Map<ModelGateway, () => Promise<void>>();

/**
 * Waits for `n` rounds of polls: in each, every gateway given polls once after the round before it ended, so two
 * rounds are one to publish and one to read. Event-driven, not timed: a timer firing late on a loaded machine only
 * makes the wait longer, and the tests assert what a poll brings, not its punctuality.
 */
async function pollsPassed(n: 1 | 2, ...gws: ModelGateway[]): Promise<void> {
  for (let i = 0; i < n; i++) await Promise.all(gws.map((g) => nextPoll.get(g)!()));
}

/** Waits (up to 10 s) until `cond` holds: what another timer (a ledger batch) writes. */
async function until(cond: () => boolean): Promise<void> {
  for (const t0 = Date.now(); !cond() && Date.now() - t0 < 10_000; ) await new Promise((r) => setTimeout(r, 10));
  expect(cond()).toBe(true);
}

function gateway(budget: ConstructorParameters<typeof ModelGateway>[0]["budget"]): ModelGateway {
  const upstreams = buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-ant-real" } } }, {});
  const waiters: (() => void)[] = [];
  const gw = new ModelGateway({ home, store, upstreams, budget, pollMs: POLL_MS, onPoll: () => waiters.splice(0).forEach((w) => w()) });
  nextPoll.set(gw, () => new Promise((r) => waiters.push(r)));
  return gw;
}

/** Two gateways on the one store, as two processes billing `user` against the same credits would run them. */
async function twoProcesses(user: string, credits: number) {
  const a = gateway({ user, user_credits_usd: credits });
  const b = gateway({ user, user_credits_usd: credits });
  return { a, b, la: await leased(a), lb: await leased(b) };
}

async function leased(gw: ModelGateway, capUsd?: number): Promise<{ lease: GatewayLease; key: string }> {
  const lease = await gw.lease({ trialId: `T${++n}`, jobId: "J", capUsd });
  const key = lease.agentEnv("http://evolve-gateway:4000", 60_000).ANTHROPIC_API_KEY;
  return { lease, key };
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-gw-lease-"));
  store = openStore(home);
  await upstream.start();
});

afterAll(async () => {
  await upstream.close();
  await store.close();
  rmSync(home, { recursive: true, force: true });
});

describe("the process's gateway", () => {
  it("obeys the global stop set in the store by another process, within its poll", async () => {
    const gw = gateway({ user: "u-stop" });
    const { lease, key } = await leased(gw);
    try {
      expect((await call(lease, key)).status).toBe(200);
      store.putSetting(STOP_SETTING, "maintenance window");
      await pollsPassed(1, gw);
      const refused = await call(lease, key);
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ type: "error", error: { type: "rate_limit_error", message: "other: maintenance window" } });
      expect(lease.budgetRefusal()).toEqual({ scope: "other", message: "other: maintenance window" });
      store.putSetting(STOP_SETTING, undefined);
      await pollsPassed(1, gw);
      expect((await call(lease, key)).status).toBe(200);
    } finally {
      store.putSetting(STOP_SETTING, undefined);
      await gw.close();
    }
  });

  it("a gateway left open when its store closes stops polling the stop, with a warning and no stray error", async () => {
    const own = mkdtempSync(join(tmpdir(), "evolve-gw-lease-closed-"));
    const ownStore = openStore(own);
    const warnings: string[] = [];
    const upstreams = buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-ant-real" } } }, {});
    const gw = new ModelGateway({ home: own, store: ownStore, upstreams, budget: { user: "u-closed" }, warn: (m) => warnings.push(m), pollMs: POLL_MS });
    const lease = await gw.lease({ trialId: `T${++n}`, jobId: "J" });
    await lease.end();
    await ownStore.close();
    const stopped = () => warnings.filter((w) => w.startsWith("gateway: stopped polling the global stop: "));
    for (const t0 = Date.now(); stopped().length === 0 && Date.now() - t0 < 10_000; ) await new Promise((r) => setTimeout(r, 20));
    // four more polls' time: a poll that threw would surface as an uncaught error and fail the run (no poll
    // comes to wait for here: the point is that none does)
    await new Promise((r) => setTimeout(r, 4 * POLL_MS));
    expect(stopped()).toHaveLength(1);
    await gw.close();
    rmSync(own, { recursive: true, force: true });
  });

  it("books user and team spend in the ledger, and a later process starts from it", async () => {
    const gw = gateway({ user: "u-ledger", team: "t-ledger", team_monthly_usd: 100 });
    const { lease, key } = await leased(gw);
    expect((await call(lease, key)).status).toBe(200);
    const totals = await lease.end();
    const spent = totals.agent.spentUsd;
    expect(spent).toBeGreaterThan(0);
    expect(store.getSpend("user", "u-ledger", "")).toBeCloseTo(spent, 12);
    expect(store.getSpend("team", "t-ledger", monthOf(Date.now()))).toBeCloseTo(spent, 12);
    await gw.close();

    // credits just above what is spent: one more call's worst case no longer fits, in a new process's gateway
    const next = gateway({ user: "u-ledger", user_credits_usd: spent + 0.0005 });
    const l2 = await leased(next);
    try {
      const r = await call(l2.lease, l2.key);
      expect(r.status).toBe(429);
      expect(r.body.error.message).toMatch(/^user: user u-ledger budget of \$0\.000\d+ would be exceeded \(spent \$0\.000255/);
      expect(l2.lease.budgetRefusal()?.scope).toBe("user");
    } finally {
      await next.close();
    }
  });

  it("two processes billing one user see each other's settled spend within a poll, and stop at the credits together", async () => {
    // each call here settles at $0.000255 and reserves about $0.0016 first (its ~100-byte body as 1h cache writes
    // and 64 output tokens): $0.0019 of credits admits two calls' spend plus nothing more, counted across both
    // gateways (two processes: they share only the store)
    const { a, b, la, lb } = await twoProcesses("u-two", 0.0019);
    try {
      expect((await call(la.lease, la.key)).status).toBe(200);
      expect((await call(la.lease, la.key)).status).toBe(200);
      // a's spend (both calls: each is its own batch if they settle apart) reaches the ledger within its batch
      // (50 ms), and b's next poll reads it
      await until(() => store.getSpend("user", "u-two", "") >= 2 * 0.000255 - 1e-12);
      await pollsPassed(1, b);
      const before = upstream.requests.length;
      const r = await call(lb.lease, lb.key);
      expect(r.status).toBe(429);
      expect(r.body.error.message).toMatch(/^user: user u-two budget of \$0\.0019 would be exceeded \(spent \$0\.00051,/);
      expect(lb.lease.budgetRefusal()?.scope).toBe("user");
      expect(upstream.requests.length).toBe(before);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("two processes billing one user count each other's calls in flight, and the space comes back when they settle", async () => {
    // a call reserves about $0.0016 and settles at $0.000255: $0.0019 of credits holds one call in flight, not two
    const { a, b, la, lb } = await twoProcesses("u-flight", 0.0019);
    try {
      // a's call is held in flight until released: published at a's next poll (its reservation is new), read at
      // b's next one
      let release!: () => void;
      upstream.push({ text: "slow answer", holdUntil: new Promise<void>((r) => (release = r)) });
      const sent = upstream.requests.length;
      const slow = call(la.lease, la.key, true);
      await until(() => upstream.requests.length > sent);
      await pollsPassed(2, a, b);
      const before = upstream.requests.length;
      const r = await call(lb.lease, lb.key);
      expect(r.status).toBe(429);
      expect(r.body.error.message).toMatch(/^user: user u-flight budget of \$0\.0019 would be exceeded \(spent \$0\.00, in flight \$0\.001\d+,/);
      expect(upstream.requests.length).toBe(before);
      release();
      expect((await slow).status).toBe(200);
      // settled: a's $0.000255 is spent (the ledger), nothing is in flight, and one more call fits again
      await until(() => store.getSpend("user", "u-flight", "") >= 0.000255 - 1e-12);
      await pollsPassed(2, a, b);
      expect((await call(lb.lease, lb.key)).status).toBe(200);
    } finally {
      await a.close();
      await b.close();
    }
    // a closed gateway leaves no entry behind
    expect(store.getSetting(INFLIGHT_SETTING)).toBeUndefined();
  });

  it("caps a trial at the smallest of config, task and job, and an agent over its cap is told so, not stopped", async () => {
    const gw = gateway({ user: "u-cap", trial_cap_usd: 5 });
    expect(gw.trialCap()).toBe(5);
    expect(gw.trialCap(2, undefined)).toBe(2);
    expect(gw.trialCap(undefined, 0.5)).toBe(0.5);
    expect(gateway({ user: "u-cap" }).trialCap()).toBeUndefined();
    const { lease, key } = await leased(gw, 0.0001);
    try {
      const r = await call(lease, key);
      expect(r.status).toBe(429);
      expect(lease.capReached()).toMatch(/^trial: trial T\d+ budget of \$0\.0001 would be exceeded/);
      expect(lease.budgetRefusal()).toBeUndefined();
    } finally {
      await gw.close();
    }
  });

  it("books a job's spend per lane in the ledger over every attempt of a trial, where the trial's totals keep the last", async () => {
    const gw = gateway({ user: "u-job" });
    try {
      let spent = 0;
      let last = 0;
      for (let attempt = 1; attempt <= 2; attempt++) {
        // an infrastructure retry runs the same trial id again under a new lease
        const lease = await gw.lease({ trialId: "T-retried", jobId: "J-ledger" });
        const key = lease.agentEnv("http://evolve-gateway:4000", 60_000).ANTHROPIC_API_KEY;
        expect((await call(lease, key)).status).toBe(200);
        last = (await lease.end()).agent.spentUsd;
        lease.forget();
        spent += last;
      }
      expect(last).toBeGreaterThan(0);
      expect(store.getSpend("job", "J-ledger", "agent")).toBeCloseTo(spent, 12);
      expect(store.getSpend("job", "J-ledger", "agent")).toBeCloseTo(store.getSpend("user", "u-job", ""), 12);
      expect(store.getSpend("job", "J-ledger", "judge")).toBe(0);
    } finally {
      await gw.close();
    }
  });

  it("warns once per unpriced model for the life of the process, however many calls and names it has", async () => {
    const warnings: string[] = [];
    const upstreams = buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-ant-real" } } }, {});
    const gw = new ModelGateway({ home, store, upstreams, budget: { user: "u-warn" }, warn: (m) => warnings.push(m) });
    const a = await leased(gw);
    const b = await leased(gw);
    try {
      for (const l of [a, a, b]) expect((await call(l.lease, l.key, false, "claude-unpriced-9")).status).toBe(200);
      expect(warnings).toEqual(['no price for model "anthropic/claude-unpriced-9": metered in tokens, cost unknown']);
    } finally {
      await gw.close();
    }
  });

  it("ends a lease: its keys are refused and its socket is gone", async () => {
    const gw = gateway({ user: "u-end" });
    const { lease, key } = await leased(gw);
    const judge = lease.judgeEnv(["anthropic"], "http://evolve-gateway:4000", 60_000);
    expect(judge.ANTHROPIC_API_KEY).toMatch(/^evk-/);
    expect(judge.ANTHROPIC_API_KEY).not.toBe(key);
    lease.endAgent();
    expect((await call(lease, key)).status).toBe(401);
    expect((await call(lease, judge.ANTHROPIC_API_KEY)).status).toBe(200);
    await lease.end();
    expect(existsSync(lease.socketDir)).toBe(false);
    expect(gw.credentials.authenticate(judge.ANTHROPIC_API_KEY)).toBeUndefined();
    await gw.close();
  });

  it("binds each key to its own trial's socket: a key that leaked from one box buys nothing through another trial's relay", async () => {
    const gw = gateway({ user: "u-bind" });
    const a = await leased(gw);
    const b = await leased(gw);
    const judgeA = a.lease.judgeEnv(["anthropic"], "http://evolve-gateway:4000", 60_000).ANTHROPIC_API_KEY;
    upstream.reset();
    for (const key of [a.key, judgeA]) {
      const r = await call(b.lease, key);
      expect(r.status).toBe(401);
      // the same answer as a key that never was
      expect(r.body.error.message).toBe("invalid or revoked gateway key");
    }
    expect(upstream.requests).toHaveLength(0);
    expect(a.lease.totals().agent.calls + a.lease.totals().judge.calls + b.lease.totals().agent.calls).toBe(0);
    // each key still works through its own trial's socket, metered to its own trial
    expect((await call(a.lease, a.key)).status).toBe(200);
    expect((await call(b.lease, b.key)).status).toBe(200);
    expect(a.lease.totals().agent.calls).toBe(1);
    expect(b.lease.totals().agent.calls).toBe(1);
    await gw.close();
  });
});
