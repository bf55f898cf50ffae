/**
 * Network policies of real trials (engine/trial/network.ts): the allowlist's egress proxy, and `[agent]` phase
 * overrides that switch a running box's networks. Every verdict is a real HTTP answer (or its absence) from a server
 * this test started on the host, reached by names mapped to the host's address through the trial's extraHosts.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/driver/select.ts";
import { LABEL_TRIAL, type Engine } from "../engine/driver/types.ts";
import { gc } from "../engine/gc.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";

const FIXTURES = join(__dirname, "..", "fixtures", "tasks", "trials");
const NAMES = ["allowed.evolve.test", "denied.evolve.test", "a.wild.evolve.test", "wild.evolve.test"];

let home: string;
let engine: Engine;
let store: Store;
let server: Server;
let port: number;
let hostIp: string;
const ran = new Map<string, { rec: TrialRecord; log: string; probes: string }>();
const copies: string[] = [];

function hostAddress(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal && !a.address.startsWith("10.88.")) return a.address;
  }
  throw new Error("no external IPv4 address on this host");
}

/** A copy of a fixture whose probe scripts know the test server's port. */
function withPort(name: string): string {
  const parent = mkdtempSync(join(tmpdir(), "evolve-netfx-"));
  copies.push(parent);
  const dir = join(parent, name);
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  for (const sub of ["tests", "solution"]) writeFileSync(join(dir, sub, "port.txt"), `${port}\n`);
  return dir;
}

async function trial(name: string): Promise<void> {
  const dir = withPort(name);
  const id = newId();
  const rec = await runTrial(
    {
      trialId: id,
      jobId: "JOB-NET-TEST",
      home,
      // the fixture's own digest: the copy differs only in port.txt, which must not cost an image build per run
      task: { dir, digest: await taskDigest(join(FIXTURES, name)), name },
      agent: { name: "oracle" },
      timeoutMultiplier: 1,
      secrets: {},
      extraHosts: NAMES.map((n) => `${n}:${hostIp}`),
    },
    { engine, store },
  );
  const tdir = join(home, "trials", id);
  const read = (p: string) => {
    try {
      return readFileSync(join(tdir, p), "utf8");
    } catch {
      return "";
    }
  };
  ran.set(name, { rec, log: read("trial.log"), probes: read("verifier/probes.txt") });
  if (process.env.EVOLVE_TEST_DEBUG) console.log(name, read("trial.log"), read("verifier/probes.txt"));
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-trial-net-"));
  engine = await openEngine({ home });
  store = openStore(home);
  // the answer names the host it was asked for, so a reply proves which name got through
  server = createServer((req, res) => res.end(`evolve-net-probe ${String(req.headers.host ?? "").replace(/:\d+$/, "")}`));
  await new Promise<void>((r) => server.listen(0, "0.0.0.0", r));
  port = (server.address() as { port: number }).port;
  hostIp = hostAddress();
  await Promise.all(["allowlist", "network-phases", "network-phases-allowlist"].map((n) => trial(n)));
}, 180_000);

afterAll(async () => {
  await settleRemovals();
  server?.close();
  await store?.close();
  await engine?.close();
  if (home) rmSync(home, { recursive: true, force: true });
  for (const c of copies) rmSync(c, { recursive: true, force: true });
});

describe("allowlist", () => {
  it("answers allowed names through the proxy (plain HTTP and CONNECT), refuses others with 403, and has no direct route", () => {
    const { rec, probes } = ran.get("allowlist")!;
    expect(probes).toContain(`proxy allowed.evolve.test -> 200 evolve-net-probe allowed.evolve.test`);
    expect(probes).toContain(`connect allowed.evolve.test -> 200 evolve-net-probe allowed.evolve.test`);
    expect(probes).toContain(`proxy a.wild.evolve.test -> 200 evolve-net-probe a.wild.evolve.test`);
    // `*.wild.evolve.test` does not match the apex
    expect(probes).toMatch(/proxy wild\.evolve\.test -> 403 evolve egress proxy: wild\.evolve\.test is not in allowed_hosts/);
    expect(probes).toMatch(/proxy denied\.evolve\.test -> 403 evolve egress proxy: denied\.evolve\.test is not in allowed_hosts/);
    expect(probes).toMatch(/direct allowed\.evolve\.test -> ERR .*(unreachable|timed out)/i);
    expect(rec.status).toBe("SCORED");
    expect(rec.rewards).toEqual({ reward: 1 });
  });
});

describe("phase overrides", () => {
  it("public baseline, no-network agent: the agent gets no answer, the verifier does, and both switches are logged", () => {
    const { rec, probes, log } = ran.get("network-phases")!;
    expect(probes).toMatch(/agent: proxy allowed\.evolve\.test -> ERR /);
    expect(probes).toContain("verifier: proxy allowed.evolve.test -> 200 evolve-net-probe allowed.evolve.test");
    expect(rec.rewards).toEqual({ reward: 1 });
    expect(log).toMatch(/network: agent phase: public → no-network/);
    expect(log).toMatch(/network: verify phase: no-network → public/);
  });

  it("no-network baseline, allowlist agent: the agent reaches the allowed host only through the proxy; the verifier reaches nothing", () => {
    const { rec, probes, log } = ran.get("network-phases-allowlist")!;
    expect(probes).toContain("agent: proxy allowed.evolve.test -> 200 evolve-net-probe allowed.evolve.test");
    expect(probes).toMatch(/agent: proxy denied\.evolve\.test -> 403 /);
    expect(probes).toMatch(/agent: direct allowed\.evolve\.test -> ERR /);
    expect(probes).toMatch(/verifier: proxy allowed\.evolve\.test -> ERR /);
    expect(rec.rewards).toEqual({ reward: 1 });
    expect(log).toMatch(/network: agent phase: no-network → allowlist \[allowed\.evolve\.test\]/);
    expect(log).toMatch(/network: verify phase: allowlist \[allowed\.evolve\.test\] → no-network/);
  });
});

describe("cleanup", () => {
  it("removes every box, the proxy and the trial's networks when the trial ends", async () => {
    await settleRemovals();
    for (const { rec } of ran.values()) {
      expect(await engine.list({ [LABEL_TRIAL]: rec.id }), rec.id).toEqual([]);
      expect(await engine.listNetworks({ [LABEL_TRIAL]: rec.id }), rec.id).toEqual([]);
    }
  });
});
