/**
 * A hostile agent (and a hostile task author) against real podman trials: the reference solution of each
 * fixtures/tasks/hostile/ task plays the attacker. A score comes only from the verifier of the attempt that earned
 * it; nothing the agent started outlives its phase; nothing a box planted makes evolve read or write a host file
 * outside the trial's folders; the trial tree is inert on the host.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import { LABEL_HOME, LABEL_MANAGED, LABEL_TRIAL, type Engine } from "../engine/driver/types.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { killNewProcs, snapshotProcs } from "../engine/trial/procs.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import type { HarnessContext } from "../engine/harness/index.ts";

const root = join(__dirname, "..");
const FIXTURES = join(root, "fixtures", "tasks", "hostile");
const TOKEN = "hostile-token-5b1e0c";
const bun = join(root, "node_modules/.bin/bun");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;

let home: string;
let engine: Engine;
let store: Store;
let target: string;
const ran = new Map<string, { rec: TrialRecord; dir: string; log: string }>();

/** What a trial asked of its engine for its boxes, in order, with the trial's status then. */
type BoxOp = { op: "create" | "halt" | "remove"; box: string; role?: string; status?: string; running?: boolean };
const boxOps = new Map<string, BoxOp[]>();

async function trial(name: string, opts: { id?: string; secrets?: Record<string, string> } = {}) {
  const dir = join(FIXTURES, name);
  const id = opts.id ?? newId();
  const ops: BoxOp[] = [];
  boxOps.set(name, ops);
  // the halted box's state is read back at once: "halted" must mean no process of it runs, not only a kill sent
  const watched: Engine = Object.assign(Object.create(engine), {
    create: async (spec: Parameters<Engine["create"]>[0]) => {
      const box = await engine.create(spec);
      ops.push({ op: "create", box, role: spec.labels["dev.evolve.role"], status: store.getTrial(id)?.status });
      return box;
    },
    halt: async (box: string) => {
      await engine.halt(box);
      ops.push({ op: "halt", box, status: store.getTrial(id)?.status, running: (await engine.inspect(box))?.running });
    },
    remove: (box: string) => (ops.push({ op: "remove", box, status: store.getTrial(id)?.status }), engine.remove(box)),
  });
  const rec = await runTrial(
    { trialId: id, jobId: "JOB-HOSTILE", home, task: { dir, digest: await taskDigest(dir), name }, agent: { name: "oracle" }, timeoutMultiplier: 1, secrets: opts.secrets ?? {} },
    { engine: watched, store },
  );
  const tdir = join(home, "trials", id);
  return { rec, dir: tdir, log: readFileSync(join(tdir, "trial.log"), "utf8") };
}

describe.skipIf(!hasPodman)("hostile agents and task authors", () => {
  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), "evolve-hostile-"));
    engine = await openEngine({ home });
    store = openStore(home);
    // a root-owned host file the agent links to: evolve must neither print it nor write into it
    target = join(home, "host-target.txt");
    writeFileSync(target, `original host content ${TOKEN}\n`);
    chmodSync(target, 0o600);
    const names = ["forge-reward-json", "escape-and-hang", "separate-watch", "plant-links", "verifier-links", "verifier-fifo"];
    await Promise.all(
      names.map(async (n) => ran.set(n, await trial(n, { secrets: n === "plant-links" ? { HOSTILE_TOKEN: TOKEN, HOST_TARGET: target } : {} }))),
    );
  }, 300_000);

  afterAll(async () => {
    await settleRemovals();
    store?.close();
    await engine?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it("a reward.json the agent wrote into /logs/verifier is not the verdict: the verifier's 0 is", () => {
    const { rec } = ran.get("forge-reward-json")!;
    expect(rec.status).toBe("SCORED");
    expect(rec.rewards).toEqual({ reward: 0 });
  });

  it("a setsid env -i child of an agent that hangs past its timeout is killed before the verifier; the ENTRYPOINT's service lives", () => {
    const { rec, log } = ran.get("escape-and-hang")!;
    expect(rec.exception?.type).toBe("AgentTimeoutError");
    expect(rec.status).toBe("SCORED");
    // the forger never overwrote the verifier's reward.json, never wrote /app/forged.txt after the agent phase, and
    // the service the image's ENTRYPOINT started before the agent was not touched
    expect(rec.rewards).toEqual({ reward: 0, service_alive: 1, forger_alive: 0 });
    expect(log).toMatch(/agent phase ended: killed [1-9]\d* process\(es\) the agent left running .*bash/);
  });

  it("a separate verifier starts after the agent's box is halted (no process of it left), and the agent's box never sees /logs/verifier", () => {
    const { rec, dir, log } = ran.get("separate-watch")!;
    expect(rec.status).toBe("SCORED");
    expect(rec.rewards).toEqual({ reward: 0 });
    expect(readFileSync(join(dir, "agent", "saw-verifier-dir.txt"), "utf8")).toMatch(/No such file/);
    expect(log).toMatch(/agent box \w+ halted \(no process left\) before the separate verifier starts/);
    expect(log.indexOf("halted (no process left) before the separate verifier")).toBeLessThan(log.indexOf("verifier box"));
  });

  it("the agent's box is halted (not running) before the separate verifier's box is created, and removed only after the trial settled", () => {
    const ops = boxOps.get("separate-watch")!;
    const agentBox = ops.find((o) => o.op === "create" && o.role === "agent")!.box;
    const verifierAt = ops.findIndex((o) => o.op === "create" && o.role === "verifier");
    const haltAt = ops.findIndex((o) => o.op === "halt" && o.box === agentBox);
    expect(verifierAt).toBeGreaterThan(0);
    expect(haltAt).toBeGreaterThanOrEqual(0);
    expect(haltAt).toBeLessThan(verifierAt);
    expect(ops[haltAt].running).toBe(false);
    // removal (the storage torn down) is off the critical path: nothing removes the agent's box before the verdict
    const removals = ops.filter((o) => o.op === "remove" && o.box === agentBox);
    expect(removals.length).toBeGreaterThan(0);
    for (const r of removals) expect(r.status).toBe("SCORED");
  });

  it("links, FIFOs, devices and set-id files the agent planted reach nothing on the host", () => {
    const { rec, dir } = ran.get("plant-links")!;
    expect(rec.status).toBe("SCORED");
    // the host file behind a planted link is neither written nor redacted through the link
    expect(readFileSync(target, "utf8")).toBe(`original host content ${TOKEN}\n`);
    // the agent's own file is redacted; the link, whose target is a secret (HOST_TARGET), is removed unfollowed
    expect(readFileSync(join(dir, "agent", "said.txt"), "utf8")).toBe("token=[redacted]\n");
    expect(() => lstatSync(join(dir, "agent", "target.txt"))).toThrow(/ENOENT/);
    // a setuid-root shell comes out without its set-id bit; a device node and a FIFO are removed
    expect(statSync(join(dir, "artifacts", "rootsh")).mode & 0o6000).toBe(0);
    expect(existsSync(join(dir, "artifacts", "null"))).toBe(false);
    expect(existsSync(join(dir, "agent", "fifo"))).toBe(false);
    // the trial folder is the owner's alone and no folder in it is world-writable
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const d of ["agent", "verifier", "artifacts"]) if (existsSync(join(dir, d))) expect(statSync(join(dir, d)).mode & 0o002).toBe(0);
  });

  it.skipIf(process.env.EVOLVE_ENGINE === "docker")("boxes mount the trial folders nosuid,nodev and get a pids cap when the task sets none", () => {
    const { dir } = ran.get("plant-links")!;
    expect(readFileSync(join(dir, "agent", "mountinfo.txt"), "utf8")).toMatch(/nosuid,nodev/);
    expect(readFileSync(join(dir, "agent", "pids-max.txt"), "utf8").trim()).toBe("4096");
  });

  it("`trial logs` refuses an agent stream the box replaced with a link to evolve's own environ, naming the file", () => {
    const { rec } = ran.get("plant-links")!;
    const r = spawnSync(bun, [join(root, "main.ts"), "trial", "logs", rec.id, "--stream", "agent"], {
      encoding: "utf8",
      env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", EVOLVE_CANARY_KEY: "canary-value-73a9" },
      timeout: 30_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^error\[stream_refused\]: refusing to read .*oracle\.txt: it is a symbolic link/m);
    expect(r.stdout + r.stderr).not.toContain("canary-value-73a9");
  });

  it("a verifier whose reward.json links to /dev/zero, or is a FIFO, is a prompt scoring error, never a hang or an OOM", () => {
    for (const name of ["verifier-links", "verifier-fifo"]) {
      const { rec } = ran.get(name)!;
      expect(rec.status).toBe("SCORING_ERROR");
      expect(rec.exception?.type).toBe("VerifierOutputParseError");
      expect(rec.exception?.traceback).toMatch(/reward\.json: a (symbolic link|FIFO), not a regular file; refused/);
      const verify = rec.phase_timings.verify!;
      expect(Date.parse(verify.finished_at!) - Date.parse(verify.started_at)).toBeLessThan(20_000);
    }
  });

  it("a new attempt starts from empty folders and no box of the killed attempt: a stale reward.txt never scores", async () => {
    const id = newId();
    const tdir = join(home, "trials", id);
    // what a SIGKILLed attempt leaves: the verifier's reward file and a box still running with the trial's labels
    mkdirSync(join(tdir, "verifier"), { recursive: true });
    writeFileSync(join(tdir, "verifier", "reward.txt"), "1\n");
    const left = execFileSync(engine.kind, ["run", "-d", "--label", `${LABEL_MANAGED}=true`, "--label", `${LABEL_TRIAL}=${id}`, "--label", `${LABEL_HOME}=${home}`, "debian:bookworm-slim", "sleep", "600"], { encoding: "utf8" }).trim();
    const { rec, log } = await trial("no-reward", { id });
    expect(rec.status).toBe("SCORING_ERROR");
    expect(rec.exception?.type).toBe("RewardFileNotFoundError");
    expect(log).toMatch(/attempt 1 starts: first attempt; removed 1 box\(es\) and 0 network\(s\) an earlier attempt left; cleared verifier/);
    expect(spawnSync(engine.kind, ["container", "exists", left]).status).not.toBe(0);
  }, 120_000);
});

describe.skipIf(!hasPodman)("job resume after a SIGKILL", () => {
  let h: string;
  beforeAll(() => {
    h = mkdtempSync(join(tmpdir(), "evolve-kill-"));
  });
  afterAll(() => {
    spawnSync(process.env.EVOLVE_ENGINE ?? "podman", ["rm", "-f", "--filter", `label=${LABEL_HOME}=${h}`]);
    rmSync(h, { recursive: true, force: true });
  });
  const cli = (args: string[]) =>
    spawnSync(bun, [join(root, "main.ts"), ...args], { cwd: h, encoding: "utf8", env: { ...process.env, EVOLVE_HOME: h, NO_COLOR: "1" }, timeout: 180_000 });
  const boxesOf = () =>
    execFileSync("podman", ["ps", "-aq", "--filter", `label=${LABEL_HOME}=${h}`], { encoding: "utf8" }).trim().split("\n").filter(Boolean);

  it.skipIf(process.env.EVOLVE_ENGINE === "docker")("removes the boxes the killed run left before it runs the trial again, which starts afresh", async () => {
    const { spawn } = await import("node:child_process");
    const child = spawn(bun, [join(root, "main.ts"), "run", "-p", join(FIXTURES, "escape-and-hang"), "-a", "oracle"], {
      cwd: h,
      env: { ...process.env, EVOLVE_HOME: h, NO_COLOR: "1" },
      stdio: "ignore",
    });
    // kill it in the agent phase: its box is up and the agent is running
    const deadline = Date.now() + 120_000;
    while (boxesOf().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    await new Promise((r) => setTimeout(r, 1000));
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const left = boxesOf();
    expect(left.length).toBeGreaterThan(0);
    const jobs = JSON.parse(cli(["job", "list", "--json"]).stdout);
    expect(jobs).toHaveLength(1);
    const r = cli(["job", "resume", jobs[0].id]);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/removed \d+ box\(es\) and \d+ network\(s\) the interrupted run left/);
    for (const id of left) expect(boxesOf().some((b) => id.startsWith(b) || b.startsWith(id))).toBe(false);
    const show = JSON.parse(cli(["job", "show", jobs[0].id, "--json"]).stdout);
    const t = show.trials[0];
    expect(t.status).toBe("SCORED");
    const log = readFileSync(join(h, "trials", t.id, "trial.log"), "utf8");
    expect(log).toMatch(/attempt 1 starts: first attempt/);
    expect(log).toMatch(/attempt 1 starts: the previous attempt was interrupted in phase agent/);
  }, 240_000);
});

describe.skipIf(!hasPodman)("the harness hook after the agent phase", () => {
  let h: string;
  let e: Engine;
  let st: Store;
  const seen: { alive: string; out: string; exitCode: number }[] = [];
  beforeAll(async () => {
    h = mkdtempSync(join(tmpdir(), "evolve-after-"));
    e = await openEngine({ home: h });
    st = openStore(h);
    const { registerHarness } = await import("../engine/harness/index.ts");
    const run = async (ctx: HarnessContext) => {
      const r = await ctx.engine.exec(ctx.containerId, ["sh", "-c", "(setsid sleep 300 &) ; echo parsed-me > /logs/agent/out.txt; exit 3"], { user: "0" });
      return { exitCode: r.exitCode, timedOut: false };
    };
    registerHarness({
      name: "after-probe",
      run,
      async afterAgent(ctx, outcome) {
        const ps = await ctx.engine.exec(ctx.containerId, ["sh", "-c", "for d in /proc/[0-9]*; do read -r l < $d/stat && echo \"$l\"; done | grep -v '^1 ' | grep -c '(sleep) [^ZX]' || true"], { user: "0" });
        const out = await ctx.engine.exec(ctx.containerId, ["cat", "/logs/agent/out.txt"], { user: "0" });
        seen.push({ alive: ps.stdout.trim(), out: out.stdout.trim(), exitCode: outcome.exitCode });
      },
    });
    registerHarness({ name: "after-broken", run, afterAgent: async () => Promise.reject(new Error("parser fell over")) });
  });
  afterAll(async () => {
    await settleRemovals();
    st?.close();
    await e?.close();
    rmSync(h, { recursive: true, force: true });
  });
  const go = async (agent: string) => {
    const dir = join(FIXTURES, "forge-reward-json");
    const id = newId();
    const rec = await runTrial(
      { trialId: id, jobId: "JOB-AFTER", home: h, task: { dir, digest: await taskDigest(dir), name: "after" }, agent: { name: agent }, timeoutMultiplier: 1, secrets: {} },
      { engine: e, store: st },
    );
    return { rec, log: readFileSync(join(h, "trials", id, "trial.log"), "utf8") };
  };

  it("sees the agent's output and outcome with none of its processes left (the box's own sleep is PID 1), before the verifier", async () => {
    const { rec } = await go("after-probe");
    expect(seen).toEqual([{ alive: "0", out: "parsed-me", exitCode: 3 }]);
    expect(rec.status).toBe("SCORED");
    expect(rec.exception?.type).toBe("NonZeroAgentExitCodeError");
  }, 120_000);

  it("a hook that fails is logged and leaves the verdict alone", async () => {
    const { rec, log } = await go("after-broken");
    expect(rec.status).toBe("SCORED");
    expect(rec.rewards).toEqual({ reward: 0 });
    expect(log).toMatch(/after-broken: reading the agent's output failed: parser fell over/);
  }, 120_000);
});

const isRoot = process.getuid?.() === 0;

describe.skipIf(!hasPodman || !isRoot)("a full disk under the trial folders", () => {
  let h: string;
  let e: Engine;
  let st: Store;
  beforeAll(async () => {
    h = mkdtempSync(join(tmpdir(), "evolve-full-"));
    mkdirSync(join(h, "trials"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", join(h, "trials")]);
    e = await openEngine({ home: h });
    st = openStore(h);
  });
  afterAll(async () => {
    await settleRemovals();
    st?.close();
    await e?.close();
    spawnSync("umount", [join(h, "trials")]);
    rmSync(h, { recursive: true, force: true });
  });

  it("settles a deterministic DiskFullError naming the trial folder, not a score or a retried infrastructure error", async () => {
    const dir = join(FIXTURES, "fill-disk");
    const id = newId();
    const rec = await runTrial(
      { trialId: id, jobId: "JOB-FULL", home: h, task: { dir, digest: await taskDigest(dir), name: "fill-disk" }, agent: { name: "oracle" }, timeoutMultiplier: 1, secrets: {} },
      { engine: e, store: st },
    );
    expect(rec.status).toBe("INFRASTRUCTURE_ERROR");
    expect(rec.exception?.type).toBe("DiskFullError");
    expect(rec.exception?.message).toContain(join(h, "trials", id));
    expect(rec.reward).toBeNull();
    const { DETERMINISTIC_EXCEPTIONS } = await import("../engine/outcome.ts");
    expect(DETERMINISTIC_EXCEPTIONS.has("DiskFullError")).toBe(true);
  }, 120_000);
});

describe.skipIf(!hasPodman)("the agent-process sweep", () => {
  let e: Engine;
  let h: string;
  beforeAll(async () => {
    h = mkdtempSync(join(tmpdir(), "evolve-sweep-"));
    e = await openEngine({ home: h });
  });
  afterAll(async () => {
    await e?.close();
    rmSync(h, { recursive: true, force: true });
  });

  for (const via of ["cgroup", "box"] as const) {
    it(`kills every process started after the snapshot and nothing from before (${via} sweep)`, async () => {
      const id = await e.create({ image: "debian:bookworm-slim", cmd: ["sh", "-c", "sleep 1000 & (while :; do sleep 0.05; done) & exec sleep infinity"], labels: { [LABEL_MANAGED]: "true" }, network: "none" });
      try {
        await e.start(id);
        const before = await snapshotProcs(e, id, via === "box" ? { via: "box" } : {});
        expect(before.via).toBe(via);
        // a double-forked, session-leading, environment-less child and a fork loop
        await e.exec(id, ["bash", "-c", "setsid env -i sh -c 'sleep 900' </dev/null >/dev/null 2>&1 & (while :; do sleep 0.01 & sleep 0.05; done) </dev/null >/dev/null 2>&1 & disown -a; exit 0"], { user: "0" });
        const r = await killNewProcs(e, id, before);
        expect(r.left).toEqual([]);
        expect(r.killed.length).toBeGreaterThanOrEqual(2);
        const ps = await e.exec(id, ["sh", "-c", "for d in /proc/[0-9]*; do read -r l < $d/stat && echo \"$l\"; done"], { user: "0" });
        const alive = ps.stdout.split("\n").filter((l) => l && !/\) [ZX] /.test(l));
        // what was there before stays: PID 1, its `sleep 1000` and the service loop that keeps forking new sleeps
        expect(alive.some((l) => /^1 \(sleep\)/.test(l))).toBe(true);
        expect(alive.filter((l) => /\(sleep\) S \d+/.test(l) && !/sleep 900/.test(l)).length).toBeGreaterThanOrEqual(2);
        expect(alive.filter((l) => /^\d+ \(sh\)/.test(l)).length).toBeGreaterThanOrEqual(2);
      } finally {
        await e.remove(id);
      }
    }, 60_000);
  }

  it("a state read earlier saves the snapshot's inspect; a pid that is not the box's main process falls back to listing in the box", async () => {
    const id = await e.create({ image: "debian:bookworm-slim", cmd: ["sleep", "infinity"], labels: { [LABEL_MANAGED]: "true" }, network: "none" });
    try {
      await e.start(id);
      const state = (await e.inspect(id))!;
      let inspects = 0;
      const counted: Engine = Object.assign(Object.create(e), { inspect: (box: string) => (inspects++, e.inspect(box)) });
      const known = await snapshotProcs(counted, id, { state });
      expect(known.via).toBe("cgroup");
      expect(inspects).toBe(0);
      // evolve's own pid is in no cgroup of the box: the state is not trusted, the box is asked
      const stale = await snapshotProcs(counted, id, { state: { ...state, pid: process.pid } });
      expect(stale.via).toBe("box");
    } finally {
      await e.remove(id);
    }
  }, 60_000);
});
