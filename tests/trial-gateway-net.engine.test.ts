/**
 * The gateway relay (engine/trial/network.ts): every box of a gateway trial reaches the host's per-trial gateway
 * socket as `http://evolve-gateway:4000`, whatever its policy and through phase switches, and a no-network box
 * reaches that and nothing else. Real containers on the real engine, boxes started with the calls run.ts makes; every
 * verdict is a real HTTP answer (or its absence) from servers this test runs: the "gateway" on a unix socket, a plain
 * HTTP server on the host's external address that no box may reach (the host guard keeps even a public box and the
 * egress proxy off it), and "the internet", a server in a network namespace off the host (tests/support/outside.ts).
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ping } from "../engine/driver/rest.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { unixPath } from "../engine/driver/socket.ts";
import { LABEL_HOME, LABEL_TRIAL, type EngineKind, type Engine } from "../engine/driver/types.ts";
import { gc } from "../engine/gc.ts";
import { serveFetch, type HttpListener } from "../engine/runtime.ts";
import { newId, openStore, type Store } from "../engine/store/index.ts";
import type { EnvironmentConfig } from "../engine/task/model.ts";
import { boxSpec } from "../engine/trial/box.ts";
import { GATEWAY_HOST, GATEWAY_RELAY_PORT, proxyImage, TrialNetwork, type NetPolicy, type TrialPolicies } from "../engine/trial/network.ts";
import { startOutside, type Outside } from "./support/outside.ts";

const IMAGE = "debian:bookworm-slim";
const ALLOWED = "allowed.evolve.test";
const PUBLIC: NetPolicy = { mode: "public", hosts: [] };
const SEALED: NetPolicy = { mode: "no-network", hosts: [] };
/** An allowed name that points at the host itself: the proxy must not reach it either. */
const HOSTNAME = "host.evolve.test";
const ALLOW: NetPolicy = { mode: "allowlist", hosts: [ALLOWED, HOSTNAME] };

/** Each spec is "env URL" (the box's proxy variables apply) or "direct URL" (no proxy); one line per spec back. */
const PROBE = String.raw`
import sys, urllib.request, urllib.error
for spec in sys.argv[1:]:
    kind, url = spec.split(" ", 1)
    opener = urllib.request.build_opener() if kind == "env" else urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=3) as r:
            print("%s %s -> %d %s" % (kind, url, r.status, r.read().decode().strip()))
    except urllib.error.HTTPError as e:
        print("%s %s -> %d %s" % (kind, url, e.code, e.read().decode().strip()))
    except Exception as e:
        print("%s %s -> ERR %s" % (kind, url, e))
`;

function hostAddress(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal && !a.address.startsWith("10.88.")) return a.address;
  }
  throw new Error("no external IPv4 address on this host");
}

const dockerSocket = unixPath(process.env.DOCKER_HOST);
const dockerUp = dockerSocket ? await ping(dockerSocket, 1000) : false;
const kinds: EngineKind[] = dockerUp ? ["podman", "docker"] : ["podman"];

let root: string;
let socketDir: string;
let gateway: HttpListener;
let hostServer: Server;
let hostUrl: string;
let outside: Outside;
const GW = `http://${GATEWAY_HOST}:${GATEWAY_RELAY_PORT}/v1/models`;
const OUTSIDE = "http://1.1.1.1:80/";

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "evolve-gwnet-"));
  socketDir = join(root, "gw");
  mkdirSync(socketDir);
  // the answer names the path and the Host header the relay passed on unchanged
  gateway = await serveFetch(async (req) => {
    const path = new URL(req.url).pathname;
    if (req.method === "POST") {
      // a model call: the body arrives whole and the answer streams back in pieces sent apart in time
      const n = (await req.text()).length;
      const enc = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          for (const piece of [`event: got ${n}\n\n`, "event: one\n\n", "event: two\n\n"]) {
            c.enqueue(enc.encode(piece));
            await new Promise((r) => setTimeout(r, 50));
          }
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    }
    return Response.json({ object: "list", data: [{ id: "evolve-test-model" }], via: `${path} ${req.headers.get("host")}` });
  }, { path: join(socketDir, "gateway.sock") });
  hostServer = createServer((req, res) => res.end(`host-probe ${String(req.headers.host ?? "").replace(/:\d+$/, "")}`));
  await new Promise<void>((r) => hostServer.listen(0, "0.0.0.0", r));
  hostUrl = `http://${hostAddress()}:${(hostServer.address() as { port: number }).port}/`;
  outside = await startOutside("outside-probe");
});

afterAll(async () => {
  await gateway?.close();
  hostServer?.close();
  outside?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.each(kinds)("gateway relay on %s", (kind) => {
  let home: string;
  let engine: Engine;
  let store: Store;
  const trials: { id: string; net: TrialNetwork; containers: string[]; log: string[] }[] = [];

  /** A trial's network as run.ts builds it, with a gateway socket folder (the test's gateway unless told). */
  function trialNet(policies: TrialPolicies, gw: string | null = socketDir) {
    const t = { id: newId(), net: undefined as unknown as TrialNetwork, containers: [] as string[], log: [] as string[] };
    t.net = new TrialNetwork(engine, {
      trialId: t.id,
      jobId: "JOB-GWNET-TEST",
      home,
      policies,
      compose: false,
      extraHosts: [`${ALLOWED}:${outside.ip}`, `${HOSTNAME}:${hostAddress()}`],
      log: (l) => t.log.push(l),
      track: (id) => t.containers.push(id),
      ...(gw ? { gateway: { socketDir: gw } } : {}),
    });
    trials.push(t);
    return t;
  }

  /** run.ts's startBox: networking, create, start, created, attach. */
  async function startBox(t: (typeof trials)[number], role: "agent" | "verifier", policy: NetPolicy): Promise<string> {
    const n = await t.net.boxNetworking(role, policy);
    const trialPath = join(home, "trials", t.id);
    for (const d of ["agent", "verifier", "artifacts"]) mkdirSync(join(trialPath, d), { recursive: true });
    const id = await engine.create(
      boxSpec({
        image: IMAGE, trialId: t.id, jobId: "JOB-GWNET-TEST", trialPath, network: n.network, env: {} as EnvironmentConfig, literals: {}, role, home,
        extraHosts: n.extraHosts, netEnv: n.env, aliases: n.aliases,
      }),
    );
    t.containers.push(id);
    await engine.start(id);
    t.net.created(id, policy, n.network, role);
    await t.net.attach(id, policy, `${role} box boot`);
    return id;
  }

  async function probe(box: string, specs: string[], env: Record<string, string> = {}): Promise<string> {
    const r = await engine.exec(box, ["python3", "-c", PROBE, ...specs], { env, timeoutMs: 30_000 });
    if (process.env.EVOLVE_TEST_DEBUG) console.log(kind, r.stdout, r.stderr);
    expect(r.exitCode, r.stderr).toBe(0);
    return r.stdout;
  }

  /**
   * An internal network keeps the host's own addresses out of reach too, on both engines (Docker's bridges are made
   * without a host address for that: see createNetwork in engine/driver/engine.ts).
   */
  const sealedHost = /direct http:\/\/\d+\S+ -> ERR .*(unreachable|timed out|no route)/i;

  const gwAnswer = `-> 200 {"object":"list","data":[{"id":"evolve-test-model"}],"via":"/v1/models ${GATEWAY_HOST}:${GATEWAY_RELAY_PORT}"}`;

  beforeAll(async () => {
    home = mkdtempSync(join(root, `home-${kind}-`));
    engine = await openEngine({ kind, home });
    store = openStore(home);
    if (!(await engine.imageExists(IMAGE)) || !(await engine.imageExists(proxyImage()))) throw new Error(`${IMAGE} is not present on ${kind}`);
  });

  afterAll(async () => {
    for (const t of trials) {
      await Promise.all(t.containers.map((c) => engine.remove(c)));
      await t.net.removeNetworks();
    }
    // a backstop for a test that failed half-way: nothing of this home may outlive the run
    if (store) await gc(engine, store, { scope: { [LABEL_HOME]: home } });
    await store?.close();
    await engine?.close();
  });

  it("public agent box and no-network separate verifier: both reach the gateway; only the public box reaches anything else", async () => {
    const t = trialNet({ baseline: PUBLIC, agent: PUBLIC, separateVerifier: SEALED });
    expect(t.net.gatewayUrl()).toBe(`http://${GATEWAY_HOST}:${GATEWAY_RELAY_PORT}`);
    const t0 = performance.now();
    const agent = await startBox(t, "agent", PUBLIC);
    const firstBox = performance.now() - t0;
    const t1 = performance.now();
    const verifier = await startBox(t, "verifier", SEALED);
    const secondBox = performance.now() - t1;
    // the relay's start is what the first box pays beyond the second
    if (process.env.EVOLVE_TEST_DEBUG) console.log(`${kind}: first box ${firstBox.toFixed(0)} ms, second ${secondBox.toFixed(0)} ms`);

    const pub = await probe(agent, [`env ${GW}`, `direct ${outside.url}`, `direct ${hostUrl}`]);
    expect(pub).toContain(`env ${GW} ${gwAnswer}`);
    // the outside destination the sealed box is denied is reachable in principle: the checks below can fail
    expect(pub).toContain(`direct ${outside.url} -> 200 outside-probe ${outside.ip}`);
    // public means the internet: the host's own service stays out of reach (the host guard)
    expect(pub).toMatch(new RegExp(`direct ${hostUrl.replace(/[.]/g, "\\.")} -> ERR .*No route to host`));

    const started = performance.now();
    const sealed = await probe(verifier, [`env ${GW}`, `direct ${hostUrl}`, `direct ${OUTSIDE}`, `direct ${outside.url}`]);
    expect(sealed).toMatch(/direct http:\/\/198\.18\S+ -> ERR .*(unreachable|timed out|no route)/i);
    expect(sealed).toContain(`env ${GW} ${gwAnswer}`);
    expect(sealed).toMatch(sealedHost);
    expect(sealed).toMatch(/direct http:\/\/1\.1\.1\.1:80\/ -> ERR .*(unreachable|timed out|no route)/i);
    // no route is a fast failure, not a wait for a timeout (podman: unreachable; Docker's address-less bridge: no route)
    expect(sealed).toMatch(/1\.1\.1\.1.*(unreachable|no route)/i);
    if (process.env.EVOLVE_TEST_DEBUG) console.log(`${kind}: sealed probes ${(performance.now() - started).toFixed(0)} ms`);

    // the relay holds the socket and has no network but the trial's internal gw networks: the agent's and the
    // separate verifier's own
    const gwNet = `evolve-${t.id.toLowerCase()}-gw`;
    const relays = (await engine.list({ [LABEL_TRIAL]: t.id, "dev.evolve.role": "gateway-relay" }));
    expect(relays).toHaveLength(1);
    const relay = await engine.inspect(relays[0].id);
    expect(Object.keys(relay?.networks ?? {}).sort()).toEqual([gwNet, `${gwNet}v`]);
    const sealedNets = await engine.inspect(verifier);
    expect(Object.keys(sealedNets?.networks ?? {})).toEqual([`${gwNet}v`]);
    expect(Object.keys((await engine.inspect(agent))?.networks ?? {})).toContain(gwNet);
    expect(t.log.some((l) => l.startsWith("gateway relay "))).toBe(true);

    // the boxes share no network through the relay: a server the agent left running on its gw address answers the
    // agent itself, and not the verifier
    const agentIp = (await engine.inspect(agent))?.networks?.[gwNet]?.ip;
    expect(agentIp).toBeTruthy();
    const serve = await engine.exec(agent, ["sh", "-c", "python3 -m http.server 8123 --bind 0.0.0.0 >/dev/null 2>&1 & sleep 0.5"], { timeoutMs: 15_000 });
    expect(serve.exitCode, serve.stderr).toBe(0);
    const left = `http://${agentIp}:8123/`;
    expect(await probe(agent, [`direct ${left}`])).toMatch(/-> 200 /);
    expect(await probe(verifier, [`direct ${left}`])).toMatch(/-> ERR .*(unreachable|timed out|no route)/i);
  });

  it("no-network baseline with an allowlist agent: the gateway stays reachable through every phase switch, direct past the proxy", async () => {
    const t = trialNet({ baseline: SEALED, agent: ALLOW, separateVerifier: ALLOW });
    const box = await startBox(t, "agent", SEALED);
    const boot = await probe(box, [`env ${GW}`, `direct ${hostUrl}`, `direct ${OUTSIDE}`], t.net.execEnv("verify"));
    expect(boot).toContain(`env ${GW} ${gwAnswer}`);
    expect(boot).toMatch(sealedHost);
    expect(boot).toMatch(/direct http:\/\/1\.1\.1\.1:80\/ -> ERR /);

    await t.net.enter(box, "agent");
    const agentEnv = t.net.execEnv("agent");
    expect(agentEnv.NO_PROXY.split(",")).toContain(GATEWAY_HOST);
    const agent = await probe(box, [`env ${GW}`, `env http://${ALLOWED}:${outside.port}/`, `env http://${HOSTNAME}:${new URL(hostUrl).port}/`, `direct ${hostUrl}`], agentEnv);
    expect(agent).toContain(`env ${GW} ${gwAnswer}`);
    expect(agent).toContain(`-> 200 outside-probe ${ALLOWED}`);
    // allowed by name, but the proxy sits behind the host guard: the host's own service is out of its reach
    expect(agent).toMatch(new RegExp(`env http://${HOSTNAME.replace(/[.]/g, "\\.")}:\\d+/ -> 502 evolve egress proxy: cannot reach .*Errno 113\\]`)); // EHOSTUNREACH: the guard
    expect(agent).toMatch(sealedHost);

    await t.net.enter(box, "verify");
    const back = await probe(box, [`env ${GW}`, `direct ${hostUrl}`], t.net.execEnv("verify"));
    expect(back).toContain(`env ${GW} ${gwAnswer}`);
    expect(back).toMatch(sealedHost);
    expect(t.log.join("\n")).toMatch(/network: agent phase: no-network → allowlist \[allowed\.evolve\.test, host\.evolve\.test\] \(.*\)/);

    // an allowlist box created on the proxy network gets the gw network beside it and goes to the relay directly
    const verifier = await startBox(t, "verifier", ALLOW);
    const v = await probe(verifier, [`env ${GW}`, `env http://${ALLOWED}:${outside.port}/`, `env http://denied.evolve.test/`]);
    expect(v).toContain(`env ${GW} ${gwAnswer}`);
    expect(v).toContain(`-> 200 outside-probe ${ALLOWED}`);
    expect(v).toMatch(/denied\.evolve\.test\/ -> 403 /);
  });

  it("carries a model call's body and its streamed answer; answers 502 with a reason once the gateway socket is gone", async () => {
    const live = trialNet({ baseline: SEALED, agent: SEALED });
    const box = await startBox(live, "agent", SEALED);
    const post = String.raw`
import urllib.request
req = urllib.request.Request("${GW.replace("/v1/models", "/v1/messages")}", data=b"x" * 200000, method="POST", headers={"content-type": "application/json"})
with urllib.request.urlopen(req, timeout=10) as r:
    print(r.status, r.read().decode().split())
`;
    const r = await engine.exec(box, ["python3", "-c", post], { timeoutMs: 30_000 });
    expect(r.stdout.trim(), r.stderr).toBe("200 ['event:', 'got', '200000', 'event:', 'one', 'event:', 'two']");

    const gone = mkdtempSync(join(root, "gone-"));
    const t = trialNet({ baseline: SEALED, agent: SEALED }, gone);
    const orphan = await startBox(t, "agent", SEALED);
    expect(await probe(orphan, [`env ${GW}`])).toMatch(/-> 502 evolve gateway relay: the trial's gateway is not listening/);
  });

  it("a trial without a gateway makes no gw network and no relay", async () => {
    const t = trialNet({ baseline: PUBLIC, agent: PUBLIC }, null);
    expect(t.net.gatewayUrl()).toBeUndefined();
    const n = await t.net.boxNetworking("agent", PUBLIC);
    expect(n.network).toBe(await engine.egressNetwork());
    expect(n.extraHosts.some((h) => h.startsWith(`${GATEWAY_HOST}:`))).toBe(false);
    expect(await engine.listNetworks({ [LABEL_TRIAL]: t.id })).toEqual([]);
    expect(await engine.list({ [LABEL_TRIAL]: t.id })).toEqual([]);
  });

  it("removes the relay and the gw network with the trial", async () => {
    for (const t of trials) {
      await Promise.all(t.containers.splice(0).map((c) => engine.remove(c)));
      await t.net.removeNetworks();
      expect(await engine.list({ [LABEL_TRIAL]: t.id })).toEqual([]);
      expect(await engine.listNetworks({ [LABEL_TRIAL]: t.id })).toEqual([]);
    }
  });
});
