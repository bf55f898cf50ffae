/**
 * Network policies of real trials (engine/trial/network.ts): the allowlist's egress proxy, `[agent]` phase overrides
 * that switch a running box's networks, and the host guard (engine/driver/hostguard.ts) that keeps public boxes and
 * builds off the host's services and private ranges. Every verdict is a real HTTP answer (or its absence): from "the
 * internet", a server in a network namespace off the host (tests/support/outside.ts), reached by names mapped to it
 * through the trial's extraHosts; and from a server this test runs on the host's 0.0.0.0, which nothing may reach.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { lookup } from "node:dns/promises";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../engine/config.ts";
import { remoteAdds } from "../engine/driver/build.ts";
import { guardNames, removeGuard, standsFirst } from "../engine/driver/hostguard.ts";
import { ping } from "../engine/driver/rest.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { unixPath } from "../engine/driver/socket.ts";
import { EvolveError } from "../engine/errors.ts";
import { LABEL_TRIAL, type Engine, type EngineKind } from "../engine/driver/types.ts";
import { gc } from "../engine/gc.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import { startOutside, type Outside } from "./support/outside.ts";

const FIXTURES = join(__dirname, "..", "fixtures", "tasks", "trials");
const NAMES = ["allowed.evolve.test", "denied.evolve.test", "a.wild.evolve.test", "wild.evolve.test"];

let home: string;
let engine: Engine;
let store: Store;
const dockerSocket = unixPath(process.env.DOCKER_HOST);
/** Podman always; Docker too where DOCKER_HOST answers (CI's Docker leg: scripts/ci/docker.sh). */
const kinds: EngineKind[] = dockerSocket && (await ping(dockerSocket, 1000)) ? ["podman", "docker"] : ["podman"];

/** The host's own service, on 0.0.0.0: reachable from no box and no build. */
let server: Server;
let port: number;
let hostIp: string;
/** Requests the host's service got, by path: a refused fetch must not have reached it at all. */
const hostHits: string[] = [];
let outside: Outside;
const ran = new Map<string, { rec: TrialRecord; log: string; probes: string }>();
const copies: string[] = [];

function hostAddress(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal && !a.address.startsWith("10.88.")) return a.address;
  }
  throw new Error("no external IPv4 address on this host");
}

/** GETs each URL argument directly; one `probe <url> -> <status> <body>` or `-> ERR <reason>` line each. */
const PROBE = String.raw`
import sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for url in sys.argv[1:]:
    try:
        out = "200 " + opener.open(url, timeout=3).read().decode().strip()
    except urllib.error.HTTPError as e:
        out = "%d %s" % (e.code, e.read().decode().strip())
    except Exception as e:
        out = "ERR " + str(getattr(e, "reason", e))
    print("probe %s -> %s" % (url, out), flush=True)
`;

/** Private and link-local destinations a guarded box must not reach: "No route to host" at once, from the guard. */
const PRIVATE = ["http://10.1.2.3/", "http://172.16.5.5/", "http://192.168.7.7/", "http://169.254.169.254/latest/meta-data/", "http://100.64.1.1/"];

/** What the host-guard fixture probes: the outside server, every address of the host, and the private ranges. */
function targets(): [string, string][] {
  const host: [string, string][] = [];
  for (const [name, list] of Object.entries(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) host.push([`host-${name}`, `http://${a.address}:${port}/`]);
  }
  return [["outside", outside.url], ...host, ...PRIVATE.map((u, i): [string, string] => [`private-${i}`, u])];
}

/** Runs PROBE over `urls` in a box of the local Debian image on `network`. */
async function probeFrom(e: Engine, network: string, urls: string[]): Promise<string> {
  const id = await e.create({ image: "debian:bookworm-slim", cmd: ["sleep", "60"], labels: { "dev.evolve.test": "guard" }, network });
  try {
    await e.start(id);
    const r = await e.exec(id, ["python3", "-c", PROBE, ...urls], { timeoutMs: 30_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    return r.stdout;
  } finally {
    await e.remove(id);
  }
}

/** Runs iptables (waiting for the lock); `ok` is false on a non-zero exit. */
function iptables(args: string[]): { ok: boolean; out: string } {
  try {
    return { ok: true, out: execFileSync("iptables", ["-w", ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) };
  } catch {
    return { ok: false, out: "" };
  }
}

/** A copy of a fixture whose probe scripts know the test server's port. */
function withPort(name: string): string {
  const parent = mkdtempSync(join(tmpdir(), "evolve-netfx-"));
  copies.push(parent);
  const dir = join(parent, name);
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  for (const sub of ["tests", "solution"]) writeFileSync(join(dir, sub, "port.txt"), `${outside.port}\n`);
  writeFileSync(join(dir, "tests", "targets.txt"), targets().map(([l, u]) => `${l} ${u}`).join("\n") + "\n");
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
      extraHosts: NAMES.map((n) => `${n}:${outside.ip}`),
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
  server = createServer((req, res) => {
    hostHits.push(String(req.url));
    res.end(`host-service ${String(req.headers.host ?? "").replace(/:\d+$/, "")}`);
  });
  await new Promise<void>((r) => server.listen(0, "0.0.0.0", r));
  port = (server.address() as { port: number }).port;
  hostIp = hostAddress();
  outside = await startOutside("evolve-net-probe");
  await Promise.all(["allowlist", "network-phases", "network-phases-allowlist", "host-guard"].map((n) => trial(n)));
}, 180_000);

afterAll(async () => {
  await settleRemovals();
  server?.close();
  outside?.close();
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

describe("host guard", () => {
  const refused = /-> ERR .*No route to host/;

  it("a public box reaches the outside server, and not the host's 0.0.0.0 service on any of its addresses nor a private or link-local range", () => {
    const { rec, probes } = ran.get("host-guard")!;
    expect(probes).toMatch(new RegExp(`^outside \\S+ -> 200 evolve-net-probe ${outside.ip.replace(/\./g, "\\.")}$`, "m"));
    const lines = probes.trim().split("\n");
    const host = lines.filter((l) => l.startsWith("host-"));
    // the LAN address, the veth end towards the outside server, other bridges, and the box's own gateway
    expect(host.length).toBeGreaterThanOrEqual(3);
    expect(host.some((l) => l.startsWith("host-gateway "))).toBe(true);
    for (const l of host) expect(l).toMatch(refused);
    const priv = lines.filter((l) => l.startsWith("private-"));
    expect(priv).toHaveLength(PRIVATE.length);
    for (const l of priv) expect(l).toMatch(refused);
    expect(rec.rewards).toEqual({ reward: 1 });
  });

  it("the allowlist's proxy is guarded too: the test's names went to the outside server, and no request of any trial reached the host's service", () => {
    expect(ran.get("allowlist")!.probes).toContain("proxy allowed.evolve.test -> 200 evolve-net-probe allowed.evolve.test");
    expect(hostHits).toEqual([]);
  });
});

describe.each(kinds)("host guard on %s: boxes and builds", (kind) => {
  let eng: Engine;

  beforeAll(async () => {
    eng = kind === engine.kind ? engine : await openEngine({ kind, home });
  });

  afterAll(async () => {
    if (eng && eng !== engine) await eng.close();
  });

  /** A build context whose Dockerfile is `lines`, with probe.py beside it; the image is removed after the test. */
  function context(lines: string[]): string {
    const dir = mkdtempSync(join(tmpdir(), "evolve-guard-build-"));
    copies.push(dir);
    writeFileSync(join(dir, "probe.py"), PROBE);
    writeFileSync(join(dir, "Dockerfile"), ["FROM debian:bookworm-slim", "COPY probe.py /probe.py", ...lines].join("\n") + "\n");
    return dir;
  }

  it("a public box on the egress network reaches the outside server, and not the host's service nor the private ranges", async () => {
    const before = hostHits.length;
    const hosts = targets().filter(([l]) => l.startsWith("host-")).map(([, u]) => u);
    const out = (await probeFrom(eng, await eng.egressNetwork(), [outside.url, ...hosts, ...PRIVATE])).trim().split("\n");
    expect(out).toContain(`probe ${outside.url} -> 200 evolve-net-probe ${outside.ip}`);
    expect(out).toHaveLength(1 + hosts.length + PRIVATE.length);
    for (const l of out.slice(1)) expect(l).toMatch(/-> ERR .*No route to host/);
    expect(hostHits.length).toBe(before);
  });

  it("a public box resolves names through the host's resolvers, even one in a private range (the guard lets DNS through)", async (ctx) => {
    // the Debian archive is the one outside name these machines resolve; where the host cannot, there is nothing to compare
    const name = "deb.debian.org";
    const host = await lookup(name).catch(() => undefined);
    if (!host) ctx.skip();
    const id = await eng.create({ image: "debian:bookworm-slim", cmd: ["sleep", "60"], labels: { "dev.evolve.test": "guard" }, network: await eng.egressNetwork() });
    try {
      await eng.start(id);
      const r = await eng.exec(id, ["getent", "hosts", name], { timeoutMs: 15_000 });
      expect(r.stdout, r.stderr).toMatch(new RegExp(`\\s${name.replace(/\./g, "\\.")}`));
    } finally {
      await eng.remove(id);
    }
  });

  it("RUN steps reach the outside server and are refused the host's service and the private ranges", async () => {
    const before = hostHits.length;
    const dir = context([`RUN python3 /probe.py ${outside.url} http://${hostIp}:${port}/ http://${outside.hostIp}:${port}/ ${PRIVATE.join(" ")}`]);
    const tag = `localhost/evolve-guard-build:${newId().toLowerCase()}`;
    const log: string[] = [];
    try {
      await eng.build({ context: dir, tag, labels: {}, timeoutMs: 120_000, log: (l) => log.push(l) });
    } finally {
      await eng.removeImage?.(tag);
    }
    const out = log.filter((l) => l.startsWith("probe "));
    expect(out).toContain(`probe ${outside.url} -> 200 evolve-net-probe ${outside.ip}`);
    expect(out.filter((l) => !l.includes(outside.url))).toHaveLength(2 + PRIVATE.length);
    for (const l of out.filter((l) => !l.includes(outside.url))) expect(l).toMatch(/-> ERR .*No route to host/);
    expect(hostHits.length).toBe(before);
  });

  it("fetches a Dockerfile's ADD URLs on the guarded network: the outside file arrives as ADD gives it, the host's addresses do not answer", async () => {
    const before = hostHits.length;
    const ok = context([`ADD --chown=0:0 ${outside.url}dir/file.txt \\`, "    /opt/", "RUN stat -c 'mode %a' /opt/file.txt && cat /opt/file.txt && echo"]);
    const tag = `localhost/evolve-guard-add:${newId().toLowerCase()}`;
    const log: string[] = [];
    try {
      await eng.build({ context: ok, tag, labels: {}, timeoutMs: 120_000, log: (l) => log.push(l) });
    } finally {
      await eng.removeImage?.(tag);
    }
    expect(log).toContain("mode 600");
    expect(log).toContain(`evolve-net-probe ${outside.ip}`);
    for (const url of [`http://127.0.0.1:${port}/secret`, `http://${hostIp}:${port}/secret`]) {
      const dir = context([`ADD ${url} /opt/secret`]);
      const err = await eng.build({ context: dir, tag, labels: {}, timeoutMs: 60_000 }).then(() => undefined, (e: unknown) => e);
      expect((err as EvolveError).code).toBe("build_failed");
      expect((err as EvolveError).message).toMatch(/Dockerfile line 3: ADD of a URL is fetched on the build's guarded network \(no host services, no private ranges\), and that failed: http:\/\/\S+secret: .*(Connection refused|No route to host)/);
      expect(await eng.imageExists(tag)).toBe(false);
    }
    expect(hostHits.length).toBe(before);
  });

  it("refuses a git remote in ADD (no COPY can stand for it) before anything runs", async () => {
    const dir = context(["ADD git@github.com:o/r.git /src"]);
    const err = await eng.build({ context: dir, tag: `localhost/evolve-guard-add:${newId().toLowerCase()}`, labels: {}, timeoutMs: 60_000 }).then(() => undefined, (e: unknown) => e);
    expect((err as EvolveError).code).toBe("build_failed");
    expect((err as EvolveError).message).toMatch(/Dockerfile line 3: ADD git@github\.com:o\/r\.git: a git or non-HTTP source would be fetched by the builder on this host/);
  });
});

describe("host guard: builds", () => {
  it("a no-network task's ADD http://127.0.0.1:… fails the build with the file, line and reason, and the host's loopback serves nothing", async () => {
    const before = hostHits.length;
    const dir = withPort("no-network");
    const dockerfile = join(dir, "environment", "Dockerfile");
    const text = readFileSync(dockerfile, "utf8");
    writeFileSync(dockerfile, text + `ADD --chown=root \\\n    http://127.0.0.1:${port}/secret /opt/secret\n`);
    const id = newId();
    const t0 = performance.now();
    const rec = await runTrial(
      {
        trialId: id, jobId: "JOB-NET-TEST", home, task: { dir, digest: await taskDigest(dir), name: "no-network-add" },
        agent: { name: "oracle" }, timeoutMultiplier: 1, secrets: {},
      },
      { engine, store },
    );
    expect(performance.now() - t0).toBeLessThan(30_000);
    expect(rec.exception?.type).toBe("EnvironmentBuildError");
    expect(rec.exception?.message).toMatch(new RegExp(`Dockerfile line \\d+: ADD of a URL is fetched on the build's guarded network .*, and that failed: http://127\\.0\\.0\\.1:${port}/secret: .*Connection refused`));
    expect(hostHits.length).toBe(before);
  });
});

describe("host guard: the user's config", () => {
  const opened: { engine: Engine; bridge: string; network: string }[] = [];

  afterAll(async () => {
    for (const o of opened) {
      await o.engine.removeNetwork(o.network).catch(() => {});
      await removeGuard(o.bridge);
      await o.engine.close();
    }
  });

  /** An engine whose home's config.toml is `toml`, and the guarded network it gives public boxes. */
  async function engineWith(toml: string): Promise<{ engine: Engine; network: string }> {
    const h = mkdtempSync(join(tmpdir(), "evolve-guard-home-"));
    copies.push(h);
    writeFileSync(join(h, "config.toml"), toml);
    const e = await openEngine({ home: h });
    const network = await e.egressNetwork();
    opened.push({ engine: e, network, bridge: guardNames(e.kind, { allowHost: loadConfig(h).network.allow_host, allowRanges: loadConfig(h).network.allow_ranges }).bridge });
    return { engine: e, network };
  }

  it("allow_host and allow_ranges open exactly the host and those ranges, on a network of their own", async () => {
    const lan = await startOutside("lan-probe", "100.64");
    try {
      const closed = await engine.egressNetwork();
      const open = await engineWith(`[network]\nallow_host = true\nallow_ranges = ["100.64.0.0/10"]\n`);
      expect(open.network).not.toBe(closed);
      const urls = [lan.url, `http://${hostIp}:${port}/`, "http://169.254.169.254/"];
      const before = await probeFrom(engine, closed, urls);
      expect(before).toMatch(/100\.64\S+ -> ERR .*No route to host/);
      expect(before).toMatch(new RegExp(`${hostIp.replace(/\./g, "\\.")}\\S+ -> ERR .*No route to host`));
      const after = await probeFrom(open.engine, open.network, urls);
      expect(after).toContain(`${lan.url} -> 200 lan-probe ${lan.ip}`);
      expect(after).toContain(`http://${hostIp}:${port}/ -> 200 host-service ${hostIp}`);
      expect(after).toMatch(/169\.254\.169\.254\S+ -> ERR .*No route to host/);
    } finally {
      lan.close();
    }
  });

  it("opening everything installs no rules: public boxes use the engine's default network", async () => {
    const all = await engineWith(`[network]\nallow_host = true\nallow_ranges = ["0.0.0.0/0"]\n`);
    expect(all.network).toBe(all.engine.kind === "podman" ? "podman" : "bridge");
  });

  it("without iptables the guarded network is refused with host_guard_unavailable (exit 2), and a later call with iptables succeeds", async () => {
    const h = mkdtempSync(join(tmpdir(), "evolve-guard-home-"));
    copies.push(h);
    writeFileSync(join(h, "config.toml"), `[network]\nallow_ranges = ["100.127.0.0/16"]\n`);
    const e = await openEngine({ home: h });
    const path = process.env.PATH;
    process.env.PATH = mkdtempSync(join(tmpdir(), "evolve-nopath-"));
    copies.push(process.env.PATH);
    let err: unknown;
    try {
      await e.egressNetwork();
    } catch (x) {
      err = x;
    } finally {
      process.env.PATH = path;
    }
    expect(err).toBeInstanceOf(EvolveError);
    expect((err as EvolveError).code).toBe("host_guard_unavailable");
    expect((err as EvolveError).exit).toBe(2);
    expect((err as EvolveError).message).not.toContain("\n");
    expect((err as EvolveError).message).toMatch(/iptables-restore is not installed/);
    const network = await e.egressNetwork();
    opened.push({ engine: e, network, bridge: guardNames(e.kind, { allowHost: false, allowRanges: ["100.127.0.0/16"] }).bridge });
    expect(network).toMatch(/^evolve-egress-/);
  });

  it("a rule inserted above the guard's jump is outranked again: by the same engine before its next box, and by a new engine", async () => {
    // a policy of this test's own: its bridge is nobody else's, so the ACCEPT below opens no other trial's box
    const h = mkdtempSync(join(tmpdir(), "evolve-guard-home-"));
    copies.push(h);
    writeFileSync(join(h, "config.toml"), `[network]\nallow_ranges = ["100.125.0.0/16"]\n`);
    const e = await openEngine({ home: h });
    const network = await e.egressNetwork();
    const { bridge } = guardNames(e.kind, { allowHost: false, allowRanges: ["100.125.0.0/16"] });
    opened.push({ engine: e, network, bridge });
    const chain = e.kind === "docker" && iptables(["-S", "DOCKER-USER"]).ok ? "DOCKER-USER" : "FORWARD";
    const jump = `-A ${chain} -i ${bridge} -j EVOLVE-FWD-${bridge}`;
    // what CNI's CNI-FORWARD jump or Docker's ACCEPTs do when inserted later: let the bridge's traffic through first
    const bypass = ["-i", bridge, "-m", "comment", "--comment", `evolve-test-bypass-${bridge}`, "-j", "ACCEPT"];
    const rules = () => iptables(["-S", chain]).out.split("\n").filter((l) => l.startsWith(`-A ${chain} `));
    const lan = await startOutside("bypass-probe", "100.64");
    try {
      iptables(["-I", chain, "1", ...bypass]);
      expect(rules()[0]).toContain("evolve-test-bypass");
      expect(standsFirst(rules(), jump)).toBe(false);
      // the bypass is real: a box the guard does not see first reaches the private range
      const id = await e.create({ image: "debian:bookworm-slim", cmd: ["sleep", "60"], labels: { "dev.evolve.test": "guard" }, network });
      try {
        await e.start(id);
        const r = await e.exec(id, ["python3", "-c", PROBE, lan.url], { timeoutMs: 30_000 });
        expect(r.stdout).toContain(`${lan.url} -> 200 bypass-probe ${lan.ip}`);
      } finally {
        await e.remove(id);
      }
      // the same engine's next box
      expect(await probeFrom(e, await e.egressNetwork(), [lan.url])).toMatch(/100\.64\S+ -> ERR .*No route to host/);
      expect(standsFirst(rules(), jump), rules().join("\n")).toBe(true);
      expect(rules().filter((l) => l === jump)).toHaveLength(1);
      // again: already first is left as it is
      await e.egressNetwork();
      expect(rules().filter((l) => l === jump)).toHaveLength(1);
      // a new engine (a new process) finds the network made and the jump there, but not first
      iptables(["-I", chain, "1", ...bypass]);
      const fresh = await openEngine({ home: h });
      try {
        expect(await probeFrom(fresh, await fresh.egressNetwork(), [lan.url])).toMatch(/100\.64\S+ -> ERR .*No route to host/);
      } finally {
        await fresh.close();
      }
      expect(standsFirst(rules(), jump), rules().join("\n")).toBe(true);
      expect(rules().filter((l) => l === jump)).toHaveLength(1);
    } finally {
      while (iptables(["-D", chain, ...bypass]).ok);
      lan.close();
    }
  });

  it("a malformed [network] is config_invalid", () => {
    const h = mkdtempSync(join(tmpdir(), "evolve-guard-home-"));
    copies.push(h);
    writeFileSync(join(h, "config.toml"), `[network]\nallow_ranges = ["10.0.0.0/33"]\n`);
    expect(() => loadConfig(h)).toThrow(/network\.allow_ranges\.0: expected an IPv4 CIDR/);
  });
});

describe("remoteAdds", () => {
  it("finds URL and git sources of ADD across continuations, flags and the JSON form, and nothing in COPY or RUN", () => {
    const df = [
      "FROM x",
      "RUN curl http://example.com/a",
      "COPY http://not-a-url /b",
      "add https://example.com/c.tar.gz /opt/",
      "ADD --chown=1:1 --checksum=sha256:00 \\",
      "  # a comment inside",
      "  http://127.0.0.1:9/d /d",
      'ADD ["local", "git@github.com:o/r.git", "/src"]',
      "ADD local.txt /e",
    ].join("\n");
    expect(remoteAdds(df)).toEqual([
      { line: 4, source: "https://example.com/c.tar.gz" },
      { line: 5, source: "http://127.0.0.1:9/d" },
      { line: 8, source: "git@github.com:o/r.git" },
    ]);
  });
});
