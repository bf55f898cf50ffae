/**
 * A remote trial's model calls reach the COORDINATOR's gateway (issue 24 §1): the worker's lease opens the trial's
 * unix socket on its node (what the box's relay holds), forwards to the coordinator's TCP gateway with the key the
 * coordinator minted, and the coordinator meters the call into its own store's ledger; its `gateway stop` refuses
 * the next call, and the worker's lease hears of the refusal. No container engine: the socket is driven as the
 * relay would, against the scripted upstream.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedUpstream } from "../../fixtures/upstream/server.ts";
import { buildUpstreams } from "../../gateway/upstreams.ts";
import type { Engine } from "../driver/types.ts";
import { ModelGateway, STOP_SETTING, type TrialGatewayLease } from "../gateway-host/model-gateway.ts";
import { createJob, runJob, type JobConfig } from "../job/job.ts";
import { openStore, type Store } from "../store/index.ts";
import { Coordinator } from "./coordinator.ts";
import { RemoteGateway } from "./remote-gateway.ts";
import type { WorkerBatch, WorkerLauncher } from "./types.ts";
import { caller, gatewayApi } from "./worker.ts";

const upstream = new ScriptedUpstream();
let home: string;
let store: Store;

const config: JobConfig = {
  agent: { name: "oracle" },
  attempts: 1,
  concurrency: 1,
  timeout_multiplier: 1,
  secret_names: [],
  force_build: false,
  max_retries: 0,
  source: { kind: "path", path: "/x" },
  tasks: [{ name: "t", digest: `sha256:${"c".repeat(64)}` }],
};

class FakeLauncher implements WorkerLauncher {
  readonly kind = "fake";
  private resolveSubmit: (b: WorkerBatch) => void = () => {};
  readonly submitted = new Promise<WorkerBatch>((r) => (this.resolveSubmit = r));
  async submit(b: WorkerBatch) {
    this.resolveSubmit(b);
    return "7";
  }
  async status() {
    return [];
  }
  async cancel() {}
  async logs() {
    return "";
  }
  async dryRun() {
    return [];
  }
}

/** One Messages call over the trial's socket on the worker's node, as the box's relay forwards it. */
function viaRelay(lease: TrialGatewayLease, key: string): Promise<{ status: number; body: any }> {
  const body = JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "hi" }] });
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: join(lease.socketDir, "gateway.sock"), agent: false, path: "/v1/messages", method: "POST", headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function until(what: string, cond: () => boolean): Promise<void> {
  for (const t0 = Date.now(); !cond() && Date.now() - t0 < 10_000; ) await new Promise((r) => setTimeout(r, 20));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-remote-gw-"));
  store = openStore(home);
  await upstream.start();
});

afterAll(async () => {
  await upstream.close();
  await store.close();
  rmSync(home, { recursive: true, force: true });
});

describe("a remote trial's gateway", () => {
  it("is the coordinator's: its call is metered there, and the coordinator's `gateway stop` refuses the next", async () => {
    const upstreams = buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-ant-real" } } }, {});
    let polled = () => {};
    const gw = new ModelGateway({ home, store, upstreams, budget: { user: "u-remote" }, pollMs: 50, onPoll: () => polled() });
    const job = createJob(store, config);
    const launcher = new FakeLauncher();
    const coord = new Coordinator({ store, home, launcher, leaseSeconds: 30 });
    // the job's own gateway reaches the coordinator with each trial, as `evolve run` hands it
    const running = runJob(job.id, { store, engine: {} as Engine, home, runTrial: coord.runTrial, secrets: {}, executor: coord, gateway: gw });
    try {
      const b = await launcher.submitted;
      const call = caller({ url: b.coordinatorUrl, token: b.token, leaseSeconds: 30 });
      const claimed = (await call("POST", "/claim", { worker: "w1" })) as { lease: { trial: string; key: string } };
      const { trial, key } = claimed.lease;

      const lease = await new RemoteGateway(gatewayApi(call, trial, key)).lease({ trialId: trial, jobId: job.id });
      const agentKey = lease.agentEnv("http://evolve-gateway:4000", 60_000).ANTHROPIC_API_KEY!;
      expect(agentKey).toMatch(/\S{16,}/);
      expect(lease.secretValues()).toContain(agentKey);

      const before = upstream.requests.length;
      const ok = await viaRelay(lease, agentKey);
      expect(ok.status).toBe(200);
      expect(upstream.requests.length).toBe(before + 1);
      // metered by the coordinator: its store's ledger has the job's and the user's spend
      await until("the coordinator's ledger", () => store.getSpend("job", job.id, "agent") > 0);
      expect(store.getSpend("user", "u-remote", "")).toBeGreaterThan(0);

      // `evolve gateway stop` on the coordinator's store: the remote trial's next call is refused there
      store.putSetting(STOP_SETTING, "maintenance window");
      await new Promise<void>((r) => (polled = r));
      const refused = await viaRelay(lease, agentKey);
      expect(refused.status).toBe(429);
      expect(refused.body.error.message).toBe("other: maintenance window");
      expect(upstream.requests.length).toBe(before + 1);
      expect(lease.budgetRefusal()?.scope).toBe("other");

      // the agent's phase ends: its key is dead at the worker's socket at once
      lease.endAgent();
      expect((await viaRelay(lease, agentKey)).status).toBe(401);

      const totals = await lease.end();
      expect(totals.agent.calls).toBeGreaterThanOrEqual(1);
      expect(totals.agent.spentUsd).toBeGreaterThan(0);
      expect(totals.events.length).toBeGreaterThanOrEqual(1);
      // the coordinator ended its side too: the key no longer opens its gateway, even straight at its listener
      const { url } = await gw.serveRemote({ host: "127.0.0.1" });
      const direct = await fetch(`${url}/v1/messages`, { method: "POST", headers: { "x-api-key": agentKey, "content-type": "application/json", "anthropic-version": "2023-06-01" }, body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }) });
      expect(direct.status).toBe(401);
      const rec = store.getTrial(trial)!;
      const at = new Date().toISOString();
      await call("POST", "/result", { trial, key, record: { ...rec, status: "SCORED", rewards: { reward: 1 }, reward: 1, exception: null, finished_at: at, attempts: [{ n: 1, started_at: at, ended_at: at, status: "SCORED", ended_because: "scored" }] }, tree: [] });
      const trials = await running;
      expect(trials.map((t) => t.status)).toEqual(["SCORED"]);
    } finally {
      store.putSetting(STOP_SETTING, undefined);
      await gw.close();
    }
  });
});
