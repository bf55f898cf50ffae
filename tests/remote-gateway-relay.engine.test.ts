/**
 * A remote trial's box reaches the COORDINATOR's gateway through the same relay a local trial's box uses (issue 24
 * §1): the worker's lease opens the trial's unix socket on its node, the relay (engine/trial/network.ts) holds that
 * socket in a no-network box's gw network, and the socket forwards to the coordinator's TCP gateway. A model call
 * made in the box is answered and metered in the coordinator's store; the coordinator's `gateway stop` refuses the
 * next. Real podman boxes, the scripted upstream, the coordinator and the worker's gateway in this process.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { buildUpstreams } from "../gateway/upstreams.ts";
import { LABEL_HOME, type Engine } from "../engine/driver/types.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { Coordinator } from "../engine/executor/coordinator.ts";
import { RemoteGateway } from "../engine/executor/remote-gateway.ts";
import type { WorkerBatch, WorkerLauncher } from "../engine/executor/types.ts";
import { caller, gatewayApi } from "../engine/executor/worker.ts";
import { ModelGateway, STOP_SETTING } from "../engine/gateway-host/model-gateway.ts";
import { gc } from "../engine/gc.ts";
import { createJob, runJob } from "../engine/job/job.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import type { EnvironmentConfig } from "../engine/task/model.ts";
import { boxSpec } from "../engine/trial/box.ts";
import { GATEWAY_HOST, GATEWAY_RELAY_PORT, proxyImage, TrialNetwork, type NetPolicy } from "../engine/trial/network.ts";

const IMAGE = "debian:bookworm-slim";
const SEALED: NetPolicy = { mode: "no-network", hosts: [] };
const hasPodman = spawnSync("podman", ["image", "exists", IMAGE]).status === 0 && spawnSync("podman", ["image", "exists", proxyImage()]).status === 0;

/** A Messages call from inside the box, as an agent's client makes it: status and the answer's text or error. */
const CALL = String.raw`
import json, sys, urllib.request, urllib.error
req = urllib.request.Request("http://${GATEWAY_HOST}:${GATEWAY_RELAY_PORT}/v1/messages", method="POST",
  data=json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}).encode(),
  headers={"x-api-key": sys.argv[1], "content-type": "application/json", "anthropic-version": "2023-06-01"})
try:
    with urllib.request.urlopen(req, timeout=20) as r:
        print(r.status, json.loads(r.read())["content"][0]["text"])
except urllib.error.HTTPError as e:
    print(e.code, json.loads(e.read())["error"]["message"])
`;

class FakeLauncher implements WorkerLauncher {
  readonly kind = "fake";
  private resolveSubmit: (b: WorkerBatch) => void = () => {};
  readonly submitted = new Promise<WorkerBatch>((r) => (this.resolveSubmit = r));
  async submit(b: WorkerBatch) {
    this.resolveSubmit(b);
    return "9";
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

const upstream = new ScriptedUpstream();
let home: string;
let store: Store;
let engine: Engine;

beforeAll(async () => {
  if (!hasPodman) return;
  home = mkdtempSync(join(tmpdir(), "evolve-remote-relay-"));
  store = openStore(home);
  engine = await openEngine({ kind: "podman", home });
  await upstream.start();
});

afterAll(async () => {
  if (!hasPodman) return;
  await upstream.close();
  await gc(engine, store, { scope: { [LABEL_HOME]: home } });
  await store.close();
  await engine.close();
  rmSync(home, { recursive: true, force: true });
});

describe.skipIf(!hasPodman)("a remote trial's box and the coordinator's gateway", () => {
  it("a no-network box's model call goes through the relay and the worker's socket to the coordinator's gateway, metered there; its stop refuses the next", async () => {
    const upstreams = buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-ant-real" } } }, {});
    let polled = () => {};
    const gw = new ModelGateway({ home, store, upstreams, budget: { user: "u-relay" }, pollMs: 50, onPoll: () => polled() });
    const job = createJob(store, {
      agent: { name: "oracle" }, attempts: 1, concurrency: 1, timeout_multiplier: 1, secret_names: [], force_build: false, max_retries: 0,
      source: { kind: "path", path: "/x" }, tasks: [{ name: "t", digest: `sha256:${"d".repeat(64)}` }],
    });
    const launcher = new FakeLauncher();
    const coord = new Coordinator({ store, home, launcher, leaseSeconds: 60 });
    const stop = new AbortController();
    const running = runJob(job.id, { store, engine, home, runTrial: coord.runTrial, secrets: {}, executor: coord, gateway: gw, signal: stop.signal });
    let net: TrialNetwork | undefined;
    const boxes: string[] = [];
    try {
      const b = await launcher.submitted;
      const call = caller({ url: b.coordinatorUrl, token: b.token, leaseSeconds: 60 });
      const { lease: held } = (await call("POST", "/claim", { worker: "w1" })) as { lease: { trial: string; key: string } };
      const lease = await new RemoteGateway(gatewayApi(call, held.trial, held.key)).lease({ trialId: held.trial, jobId: job.id });

      // the trial's network as the worker's runner builds it, around the worker's forwarding socket
      net = new TrialNetwork(engine, {
        trialId: held.trial, jobId: job.id, home, policies: { baseline: SEALED, agent: SEALED }, compose: false,
        log: () => {}, track: (id) => boxes.push(id), gateway: { socketDir: lease.socketDir },
      });
      const n = await net.boxNetworking("agent", SEALED);
      const trialPath = join(home, "trials", held.trial);
      for (const d of ["agent", "verifier", "artifacts"]) mkdirSync(join(trialPath, d), { recursive: true });
      const box = await engine.create(
        boxSpec({ image: IMAGE, trialId: held.trial, jobId: job.id, trialPath, network: n.network, env: {} as EnvironmentConfig, literals: {}, role: "agent", home, extraHosts: n.extraHosts, netEnv: n.env, aliases: n.aliases }),
      );
      boxes.push(box);
      await engine.start(box);
      net.created(box, SEALED, n.network, "agent");
      await net.attach(box, SEALED, "agent box boot");

      const key = lease.agentEnv(net.gatewayUrl()!, 60_000).ANTHROPIC_API_KEY!;
      upstream.push({ text: "answered upstream" });
      const before = upstream.requests.length;
      const ok = await engine.exec(box, ["python3", "-c", CALL, key], { timeoutMs: 30_000 });
      expect(ok.stdout.trim(), ok.stderr).toBe("200 answered upstream");
      expect(upstream.requests.length).toBe(before + 1);
      // the real provider key was added by the coordinator's gateway, never seen in the box
      expect(upstream.requests.at(-1)!.headers["x-api-key"]).toBe("sk-ant-real");
      for (const t0 = Date.now(); store.getSpend("user", "u-relay", "") === 0 && Date.now() - t0 < 10_000; ) await new Promise((r) => setTimeout(r, 20));
      expect(store.getSpend("user", "u-relay", "")).toBeGreaterThan(0);
      expect(store.getSpend("job", job.id, "agent")).toBeGreaterThan(0);

      store.putSetting(STOP_SETTING, "maintenance window");
      await new Promise<void>((r) => (polled = r));
      const refused = await engine.exec(box, ["python3", "-c", CALL, key], { timeoutMs: 30_000 });
      expect(refused.stdout.trim(), refused.stderr).toBe("429 other: maintenance window");
      expect(upstream.requests.length).toBe(before + 1);
      expect(lease.budgetRefusal()?.scope).toBe("other");
      await lease.end();
    } finally {
      store.putSetting(STOP_SETTING, undefined);
      stop.abort();
      await running.catch(() => {});
      await Promise.all(boxes.map((c) => engine.remove(c)));
      await net?.removeNetworks();
      await gw.close();
    }
  });
});
