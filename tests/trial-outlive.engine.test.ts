/**
 * Nothing the agent started outlives its phase (issue 20 §1), on real podman trials: the scripts in
 * fixtures/tasks/hostile/outlive-phase/attacks/ each play solve.sh under the oracle with a 3 s agent timeout and try
 * to write the answer (or a reward of 1) after it, from nested user/PID/mount/network namespaces, a fork bomb under
 * the box's pids cap, a SIGTERM-deaf loop and a pid-hopping self-re-exec. Each scores the task's honest 0, the
 * service the image's ENTRYPOINT started is still alive for the verifier, nothing of the agent's runs when the
 * verifier does or after the trial; the honest solution of the same task scores 1.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import { LABEL_HOME, LABEL_MANAGED, type Engine } from "../engine/driver/types.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { killNewProcs, snapshotProcs } from "../engine/trial/procs.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";

const FIXTURE = join(__dirname, "..", "fixtures", "tasks", "hostile", "outlive-phase");
const ATTACKS = ["nested-namespaces", "reward-loop", "fork-bomb", "ignore-term", "re-exec"] as const;
const engineKind = process.env.EVOLVE_ENGINE ?? "podman";
const hasEngine = spawnSync(engineKind, ["image", "exists", "debian:bookworm-slim"]).status === 0;
// the attackers' command lines carry this marker
const MARKER = "hostile-survivor";

/** Host processes whose command line holds the marker (`ps` reads every pid namespace from here). */
function survivorsOnHost(): string[] {
  return execFileSync("ps", ["-eo", "pid,args"], { encoding: "utf8", maxBuffer: 256 << 20 })
    .split("\n")
    .filter((l) => l.includes(MARKER));
}

describe.skipIf(!hasEngine)("nothing the agent started outlives its phase", () => {
  let home: string;
  let engine: Engine;
  let store: Store;
  const ran = new Map<string, { rec: TrialRecord; log: string }>();

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), "evolve-outlive-"));
    // a small pids cap the fork bomb fills, and one CPU so it does not take the machine
    writeFileSync(join(home, "config.toml"), "[box]\npids_limit = 256\ncpus = 1\n");
    engine = await openEngine({ home });
    store = openStore(home);
    const run = async (name: string) => {
      const dir = join(home, "tasks", name);
      cpSync(FIXTURE, dir, { recursive: true });
      rmSync(join(dir, "attacks"), { recursive: true });
      if (name !== "honest") cpSync(join(FIXTURE, "attacks", `${name}.sh`), join(dir, "solution", "solve.sh"));
      const id = newId();
      const rec = await runTrial(
        { trialId: id, jobId: "JOB-OUTLIVE", home, task: { dir, digest: await taskDigest(dir), name: `outlive-${name}` }, agent: { name: "oracle" }, timeoutMultiplier: 1, secrets: {} },
        { engine, store },
      );
      ran.set(name, { rec, log: readFileSync(join(home, "trials", id, "trial.log"), "utf8") });
    };
    await Promise.all(["honest", ...ATTACKS].map(run));
    await settleRemovals();
  }, 400_000);

  afterAll(async () => {
    spawnSync(engineKind, ["rm", "-f", "-t", "0", "--filter", `label=${LABEL_HOME}=${home}`]);
    store?.close();
    await engine?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it("the honest solution of the task scores 1 with the ENTRYPOINT's service alive", () => {
    const { rec } = ran.get("honest")!;
    expect(rec.status).toBe("SCORED");
    expect(rec.rewards).toEqual({ reward: 1, service_alive: 1, answer: 1, survivors: 0 });
  });

  for (const attack of ATTACKS) {
    it(`${attack}: killed at the agent's timeout, before the verifier; the task's honest 0; the service lives`, () => {
      const { rec, log } = ran.get(attack)!;
      expect(rec.exception?.type).toBe("AgentTimeoutError");
      expect(rec.status).toBe("SCORED");
      expect(rec.rewards).toEqual({ reward: 0, service_alive: 1, answer: 0, survivors: 0 });
      expect(log).toMatch(/agent phase ended: killed [1-9]\d* process\(es\) the agent left running \(cgroup sweep\)/);
    });
  }

  it("nothing any attacker started runs on the host after its trial", () => {
    expect(survivorsOnHost()).toEqual([]);
  });
});

describe.skipIf(!hasEngine)("the cgroup sweep on a bare box", () => {
  let e: Engine;
  let h: string;
  beforeAll(async () => {
    h = mkdtempSync(join(tmpdir(), "evolve-sweep-cg-"));
    e = await openEngine({ home: h });
  });
  afterAll(async () => {
    await e?.close();
    rmSync(h, { recursive: true, force: true });
  });

  // the freezer the host offers first (v2's cgroup.freeze here), and the legacy v1 freezer where the host has one
  for (const freezer of ["first", "v1"] as const) {
    it(`takes a nested PID namespace's processes, leaves the services from before, and thaws the box (${freezer} freezer)`, async () => {
      const id = await e.create({ image: "debian:bookworm-slim", cmd: ["sh", "-c", "(while :; do sleep 0.05; done) & exec sleep infinity"], labels: { [LABEL_MANAGED]: "true", [LABEL_HOME]: h }, network: "none" });
      try {
        await e.start(id);
        const before = await snapshotProcs(e, id);
        expect(before.via).toBe("cgroup");
        if (freezer === "v1") {
          const line = readFileSync(`/proc/${before.hostPid}/cgroup`, "utf8").split("\n").find((l) => l.split(":")[1]?.split(",").includes("freezer"));
          const dir = line && join("/sys/fs/cgroup/freezer", line.split(":")[2]!);
          if (!dir || !existsSync(join(dir, "freezer.state"))) return; // no v1 freezer on this host
          before.cgroup = { dir, freezer: "v1" };
        }
        await e.exec(id, ["bash", "-c", `setsid env -i unshare --user --map-root-user --pid --fork bash -c 'while :; do sleep 0.05; done # ${MARKER}' </dev/null >/dev/null 2>&1 & disown -a; exit 0`], { user: "0" });
        await new Promise((r) => setTimeout(r, 300));
        expect(survivorsOnHost().length).toBeGreaterThan(0);
        const r = await killNewProcs(e, id, before);
        expect(r.left).toEqual([]);
        expect(survivorsOnHost()).toEqual([]);
        // the service loop still forks: the box was thawed
        const ps = await e.exec(id, ["sh", "-c", "cat /proc/[0-9]*/stat"], { user: "0", timeoutMs: 10_000 });
        expect(ps.exitCode).toBe(0);
        expect(ps.stdout).toMatch(/^1 \(sleep\)/m);
        expect(ps.stdout).toMatch(/\(sh\)/);
      } finally {
        await e.remove(id);
      }
    }, 60_000);
  }
});
