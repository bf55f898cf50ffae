/**
 * The trial lifecycle against a real engine (podman here, through engine/driver): every fixture under
 * fixtures/tasks/trials/ ends in its expected status and reward, leaves exactly the expected trial tree, records
 * its phases in order, and never writes an attached secret anywhere. Trials run 4 at a time and reuse images
 * across runs (tags are per task digest).
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL_TRIAL, type Engine } from "../engine/driver/types.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import { taskImageTag } from "../engine/trial/box.ts";
import type { Phase, TrialEvent } from "../engine/trial/types.ts";
import { startOutside, type Outside } from "./support/outside.ts";

const FIXTURES = join(__dirname, "..", "fixtures", "tasks", "trials");
const SECRET = "s3cret-token-9f8e7d"; // env-and-user's tests/token.sha is its sha256
const BASE_TAG = "localhost/evolve-trials-base:1";
const PROBE = "evolve-net-probe";

interface Ran {
  rec: TrialRecord;
  phases: Phase[];
  files: string[];
  result: Record<string, any>;
}

let home: string;
let engine: Engine;
let store: Store;
let outside: Outside;
let probeUrl: string;
const ran = new Map<string, Ran>();

/** Runs one trial of a fixture folder and collects what a user would look at afterwards. */
async function trial(dir: string, opts: { secrets?: Record<string, string>; agent?: string; multiplier?: number; signal?: AbortSignal; onPhase?: (p: Phase) => void } = {}): Promise<Ran> {
  const id = newId();
  const phases: Phase[] = [];
  const onEvent = (e: TrialEvent) => {
    if (e.kind === "phase") {
      phases.push(e.phase);
      opts.onPhase?.(e.phase);
    }
  };
  const name = dir.split("/").pop()!;
  const rec = await runTrial(
    {
      trialId: id,
      jobId: "JOB-TRIAL-TEST",
      home,
      task: { dir, digest: await taskDigest(dir), name },
      agent: { name: opts.agent ?? "oracle" },
      timeoutMultiplier: opts.multiplier ?? 1,
      secrets: opts.secrets ?? {},
    },
    { engine, store, signal: opts.signal, onEvent },
  );
  const tdir = join(home, "trials", id);
  // the kept tree (fs/, fs-changes.json) is what the run changed in the box: tests/trial-files.test.ts covers it
  const files = listFiles(tdir).map((f) => relative(tdir, f)).filter((f) => f !== "fs-changes.json" && !f.startsWith("fs/")).sort();
  return { rec, phases, files, result: JSON.parse(readFileSync(join(tdir, "result.json"), "utf8")) };
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? listFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

/** Runs `jobs` at most `limit` at a time. */
async function pool<T>(jobs: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]();
      }
    }),
  );
  return out;
}

/** A copy of a network fixture whose probe targets the test's own HTTP server (off the host: tests/support/outside.ts). */
function withProbe(name: string): string {
  const dir = join(mkdtempSync(join(tmpdir(), "evolve-netfx-")), name);
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  writeFileSync(join(dir, "tests", "url.txt"), probeUrl + "\n");
  return dir;
}

/**
 * Fixtures run by their own suites: tests/trial-network.engine.test.ts (servers reached by name, its own host mapping) and
 * tests/trial-gateway.engine.test.ts (a model agent or judge, its own scripted upstream).
 */
const NETWORK_TEST_FIXTURES = new Set(["allowlist", "network-phases", "network-phases-allowlist", "gateway-agent", "gateway-judge", "host-guard"]);

const HAS_GPU = ["/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia.json", "/var/run/cdi/nvidia.yaml", "/var/run/cdi/nvidia.json"].some((p) => existsSync(p));
const BASE = ["config.json", "evolve.json", "result.json", "trial.log"];
/** A trial that went through its build phase: the setup stream (the build's output, or why none ran) is kept. */
const BUILT = [...BASE, "setup.log"];
/** A trial whose agent box started: its own output (the ENTRYPOINT's) is kept as box.log, even when empty. */
const BOOTED = [...BUILT, "box.log"];
/** A trial whose oracle and verifier ran: both streams are kept, even when they printed nothing. */
const RAN = [...BOOTED, "agent/oracle.txt", "verifier/test-stdout.txt"];
const ALL_PHASES: Phase[] = ["prepare", "build", "boot", "install", "agent", "verify", "persist"];

/** fixture → what the run must end in. `files` is the exact trial tree. */
const EXPECT: Record<string, { status: string; rewards?: Record<string, number> | null; reward?: number | null; exception?: string; files: string[]; message?: RegExp }> = {
  "oracle-ok": { status: "SCORED", rewards: { reward: 1 }, reward: 1, files: [...RAN, "verifier/reward.txt"] },
  "reward-json": { status: "SCORED", rewards: { reward: 0.5, accuracy: 1, style: 0 }, reward: 0.5, files: [...RAN, "verifier/reward.json", "verifier/reward.txt"] },
  "metrics-only": { status: "SCORED", rewards: { accuracy: 1, style: 0.25 }, reward: null, files: [...RAN, "verifier/reward.json"] },
  "reward-zero": { status: "SCORED", rewards: { reward: 0 }, reward: 0, files: [...RAN, "verifier/reward.txt"] },
  "reward-out-of-range": {
    status: "SCORING_ERROR", rewards: null, exception: "RewardOutOfRangeError", message: /the verifier says 1\.5/,
    files: [...RAN, "exception.txt", "verifier/reward.txt"],
  },
  "no-reward-file": {
    status: "SCORING_ERROR", rewards: null, exception: "RewardFileNotFoundError", message: /verifier crashed before writing a reward/,
    files: [...RAN, "exception.txt"],
  },
  "verifier-timeout": {
    status: "SCORING_ERROR", rewards: null, exception: "VerifierTimeoutError", message: /verifier starting a long check/,
    files: [...RAN, "exception.txt"],
  },
  "agent-timeout": { status: "SCORED", rewards: { reward: 1 }, exception: "AgentTimeoutError", files: [...RAN, "exception.txt", "verifier/reward.txt"] },
  "entrypoint-service": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] },
  "entrypoint-dies": {
    status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "EnvironmentStartError",
    message: /^the box's entrypoint exited with code 3 (before the agent started|during the \w+ phase|while evolve probed the box): service failed to start\n/, files: [...BOOTED, "exception.txt"],
  },
  // the service dies 3 s into the agent's 10 s: the box's death is the reason, not the agent's killed exec
  "entrypoint-dies-later": {
    status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "EnvironmentStartError",
    message: /^the box's entrypoint exited with code 3 during the agent phase: service crashed: lost its database connection\nthe last lines of box\.log \(its own output\):\nservice listening on :8080\nservice crashed: lost its database connection$/,
    files: [...BOOTED, "agent/oracle.txt", "exception.txt"],
  },
  "build-fails": {
    status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "EnvironmentBuildError",
    message: /^building evolve-env:[0-9a-f]{24} failed \(exit 127\): RUN pip3 install requests: \/bin\/sh: 1: pip3: not found\n/, files: [...BUILT, "exception.txt"],
  },
  "healthcheck-slow": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] },
  "healthcheck-never": { status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "HealthcheckError", files: [...BOOTED, "exception.txt"] },
  "agent-user-missing": { status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "AgentUserNotFoundError", message: /ghost/, files: [...BOOTED, "exception.txt"] },
  "env-and-user": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] },
  "multi-step-gate": {
    status: "SCORED", rewards: { reward: 0.625 }, reward: 0.625,
    // each step's outputs apart, as Harbor keeps them: steps/<name>/{agent,verifier,artifacts}/
    files: [...BOOTED, ...["01-write", "02-extend"].flatMap((n) => [`steps/${n}/agent/oracle.txt`, `steps/${n}/artifacts/app/notes.txt`, `steps/${n}/verifier/reward.txt`, `steps/${n}/verifier/test-stdout.txt`])],
  },
  "separate-verifier": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "artifacts/app/out.txt", "verifier/reward.txt"] },
  "pre-artifacts": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "artifacts/model.patch", "verifier/reward.txt"] },
  "docker-image": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] },
  "docker-image-missing": {
    status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "ImageNotFoundError", message: /localhost\/evolve-trials-absent:1/, files: [...BASE, "exception.txt"],
  },
  resources: { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] },
  gpu: HAS_GPU
    ? { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] }
    : { status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "GpuUnavailableError", message: /needs 1 GPU/, files: [...BASE, "exception.txt"] },
  "no-network": { status: "SCORED", rewards: { reward: 0 }, files: [...RAN, "verifier/reward.txt"] },
  "public-network": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] },
  // a no-network compose task: the verifier gets the `web` sidecar's answer by service name, nothing else
  "compose-sidecar": { status: "SCORED", rewards: { reward: 1 }, files: [...RAN, "verifier/reward.txt"] },
  // a box with no /etc/passwd and no bash: evolve execs as uid 0, and the #!/bin/bash scripts run with sh
  "busybox-minimal": { status: "SCORED", rewards: { reward: 1 }, reward: 1, files: [...RAN, "verifier/reward.txt"] },
  "interpreter-missing": {
    status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "ScriptInterpreterNotFoundError",
    message: /^tests\/test\.sh starts with #!\/usr\/bin\/python3, and the box has no \/usr\/bin\/python3 to run it/, files: [...BOOTED, "exception.txt"],
  },
  "no-solution": {
    status: "INFRASTRUCTURE_ERROR", rewards: null, exception: "SolutionNotFoundError", message: /^no reference solution: the task has no solution\/solve\.sh/,
    files: [...BASE, "exception.txt"],
  },
};

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-trial-run-"));
  engine = await openEngine({ home });
  store = openStore(home);
  // docker_image must already be local: give the fixture's pinned tag to the local Debian base
  execFileSync(engine.kind, ["tag", "debian:bookworm-slim", BASE_TAG]);
  // off the host: public boxes reach the internet, never the host's own services (engine/driver/hostguard.ts)
  outside = await startOutside(PROBE, "198.18", { echoHost: false });
  probeUrl = outside.url;

  const names = readdirSync(FIXTURES).filter((n) => !NETWORK_TEST_FIXTURES.has(n)).sort();
  const jobs = names.map((name) => async () => {
    const dir = name.endsWith("network") ? withProbe(name) : join(FIXTURES, name);
    ran.set(name, await trial(dir, { secrets: name === "env-and-user" ? { API_TOKEN: SECRET } : {} }));
  });
  await pool(jobs, 4);
}, 240_000);

afterAll(async () => {
  await settleRemovals();
  outside?.close();
  await store?.close();
  await engine?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("trial outcomes", () => {
  it("has an expectation for every fixture", () => {
    expect([...ran.keys()].sort()).toEqual(Object.keys(EXPECT).sort());
  });

  for (const [name, want] of Object.entries(EXPECT)) {
    it(`${name}: ${want.status}${want.rewards ? ` ${JSON.stringify(want.rewards)}` : ""}${want.exception ? ` (${want.exception})` : ""}`, () => {
      const { rec, files, result } = ran.get(name)!;
      expect(rec.status).toBe(want.status);
      expect(rec.rewards ?? null).toEqual(want.rewards ?? null);
      if (want.reward !== undefined) expect(rec.reward).toBe(want.reward);
      expect(rec.exception?.type).toBe(want.exception);
      if (want.message) expect(rec.exception?.message).toMatch(want.message);
      expect(files).toEqual([...want.files].sort());
      // the store and result.json agree
      expect(store.getTrial(rec.id)).toEqual(rec);
      expect(result.status).toBe(want.status);
      expect(result.verifier_result).toEqual(want.rewards ? { rewards: want.rewards } : null);
      expect(result.exception_info?.exception_type).toBe(want.exception);
      expect(result.task_name).toBe(name);
      expect(rec.attempt_phase).toBe("persist");
    });
  }
});

describe("trial records", () => {
  it("walks the phases in order, repeating agent and verify per step", () => {
    expect(ran.get("oracle-ok")!.phases).toEqual(ALL_PHASES);
    expect(ran.get("multi-step-gate")!.phases).toEqual(["prepare", "build", "boot", "install", "agent", "verify", "agent", "verify", "persist"]);
    // a box that never became healthy stops before any agent work
    expect(ran.get("healthcheck-never")!.phases).toEqual(["prepare", "build", "boot", "persist"]);
    expect(ran.get("agent-user-missing")!.phases).toEqual(["prepare", "build", "boot", "install", "persist"]);
    const t = ran.get("oracle-ok")!.rec.phase_timings;
    for (const p of ALL_PHASES) expect(t[p]?.finished_at, p).toBeDefined();
    for (let i = 1; i < ALL_PHASES.length; i++) expect(t[ALL_PHASES[i]]!.started_at >= t[ALL_PHASES[i - 1]]!.finished_at!).toBe(true);
  });

  it("refuses a GPU task on a host without GPUs before building anything", () => {
    if (HAS_GPU) return;
    expect(ran.get("gpu")!.phases).toEqual(["prepare", "persist"]);
  });

  it("applies memory_mb (the verifier reads the cgroup limit) and warns that storage_mb is not enforced", () => {
    const { rec } = ran.get("resources")!;
    expect(rec.rewards).toEqual({ reward: 1 });
    expect(readFileSync(join(home, "trials", rec.id, "trial.log"), "utf8")).toMatch(/warning: storage_mb = 2048 is not enforced/);
  });

  it("fills Harbor's TrialResult fields in result.json", () => {
    const r = ran.get("oracle-ok")!.result;
    for (const k of ["id", "task_name", "trial_name", "trial_uri", "task_id", "source", "task_checksum", "config", "agent_info", "agent_result",
      "verifier_result", "exception_info", "started_at", "finished_at", "environment_setup", "agent_setup", "agent_execution", "verifier", "step_results"]) {
      expect(r, k).toHaveProperty(k);
    }
    expect(r.task_checksum).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(r.agent_execution.started_at <= r.agent_execution.finished_at).toBe(true);
  });

  it("records each executed step and stops at a min_reward it misses", () => {
    const { rec, result } = ran.get("multi-step-gate")!;
    expect(rec.step_results?.map((s) => [s.name, s.rewards])).toEqual([
      ["01-write", { reward: 1 }],
      ["02-extend", { reward: 0.25 }],
    ]);
    expect(result.step_results.map((s: any) => s.step_name)).toEqual(["01-write", "02-extend"]);
  });

  it("fails a task the box cannot run, or the oracle cannot solve, before any agent or verifier work", () => {
    // no reference solution: refused before anything is built; a retry would not help
    expect(ran.get("no-solution")!.phases).toEqual(["prepare", "persist"]);
    // the box is up and probed once: nothing can run test.sh, so no agent starts
    expect(ran.get("interpreter-missing")!.phases).toEqual(["prepare", "build", "boot", "persist"]);
    const { rec } = ran.get("busybox-minimal")!;
    expect(readFileSync(join(home, "trials", rec.id, "trial.log"), "utf8")).toMatch(/task scripts: the box has no bash: solution\/solve\.sh with sh, tests\/test\.sh with sh/);
  });

  it("keeps the verifier running after an agent timeout and records the timeout", () => {
    const { rec, phases } = ran.get("agent-timeout")!;
    expect(phases).toContain("verify");
    expect(rec.exception?.message).toMatch(/2\.0s timeout/);
  });
});

describe("what a failed trial tells", () => {
  const tree = (name: string) => join(home, "trials", ran.get(name)!.rec.id);

  it("records the phase each unscored trial failed in, and none for a scored one", () => {
    const failed = (name: string) => [ran.get(name)!.rec.failed_phase, ran.get(name)!.result.failed_phase];
    expect(failed("build-fails")).toEqual(["build", "build"]);
    expect(failed("docker-image-missing")).toEqual(["build", "build"]);
    expect(failed("healthcheck-never")).toEqual(["boot", "boot"]);
    expect(failed("agent-user-missing")).toEqual(["install", "install"]);
    expect(failed("entrypoint-dies-later")).toEqual(["agent", "agent"]);
    expect(failed("no-reward-file")).toEqual(["verify", "verify"]);
    if (!HAS_GPU) expect(failed("gpu")).toEqual(["prepare", "prepare"]);
    expect(failed("oracle-ok")).toEqual([undefined, null]);
    // an agent failure the verifier still scored is no failed phase
    expect(failed("agent-timeout")).toEqual([undefined, null]);
  });

  it("a failed build: one first line that says why, the tail once, and the whole build output as the setup stream", () => {
    const { rec } = ran.get("build-fails")!;
    const lines = rec.exception!.message.split("\n");
    // no doubled `building … failed` line, no tail repeated as a traceback
    expect(rec.exception!.message.match(/failed \(exit 127\)/g)).toHaveLength(1);
    expect(rec.exception!.traceback).toBe("");
    expect(lines.at(-1)).toBe('Error: building at STEP "RUN pip3 install requests": while running runtime: exit status 127');
    const exc = readFileSync(join(tree("build-fails"), "exception.txt"), "utf8");
    expect(exc.split("\n")[0]).toBe(`EnvironmentBuildError: ${lines[0]}`);
    expect(exc.match(/pip3: not found/g)).toHaveLength(2); // the first line and the tail, once each
    const setup = readFileSync(join(tree("build-fails"), "setup.log"), "utf8");
    expect(setup).toMatch(/^STEP 1\/\d+: FROM debian:bookworm-slim\n/);
    expect(setup).toContain("STEP 4/");
    expect(setup).toContain("/bin/sh: 1: pip3: not found\n");
    expect(setup.trimEnd().split("\n").at(-1)).toBe(lines.at(-1));
  });

  it("keeps the box's own output as box.log: the entrypoint's lines, empty for a quiet one", () => {
    expect(readFileSync(join(tree("entrypoint-dies-later"), "box.log"), "utf8")).toBe("service listening on :8080\nservice crashed: lost its database connection\n");
    expect(readFileSync(join(tree("entrypoint-dies"), "box.log"), "utf8")).toBe("service failed to start\n");
    expect(readFileSync(join(tree("oracle-ok"), "box.log"), "utf8")).toBe("");
    // the agent's own stream was cut by the box's death, and no agent failure is claimed for it
    expect(readFileSync(join(tree("entrypoint-dies-later"), "trial.log"), "utf8")).not.toMatch(/NonZeroAgentExitCodeError/);
  });

  it("an entrypoint that dies while the verifier runs is the reason, not the missing reward", async () => {
    // a copy whose service lives 6 s (past the box's boot on a loaded host) and whose verifier takes 20 s
    const dir = join(mkdtempSync(join(tmpdir(), "evolve-dies-verify-")), "entrypoint-dies-later");
    cpSync(join(FIXTURES, "entrypoint-dies-later"), dir, { recursive: true });
    const start = join(dir, "environment", "start.sh");
    writeFileSync(start, readFileSync(start, "utf8").replace("sleep 3", "sleep 6"));
    const test = join(dir, "tests", "test.sh");
    writeFileSync(test, readFileSync(test, "utf8").replace("set -uo pipefail\n", "set -uo pipefail\nsleep 20\n"));
    const r = await trial(dir, { agent: "nop" });
    expect(r.rec).toMatchObject({ status: "INFRASTRUCTURE_ERROR", failed_phase: "verify", exception: { type: "EnvironmentStartError" } });
    expect(r.rec.exception!.message.split("\n")[0]).toBe("the box's entrypoint exited with code 3 during the verify phase: service crashed: lost its database connection");
  }, 120_000);

  it("a cached image's setup stream says no build ran; a docker_image task's says there was nothing to build", () => {
    expect(readFileSync(join(tree("docker-image"), "setup.log"), "utf8")).toMatch(/^evolve: the task runs docker_image localhost\/evolve-trials-base:1; nothing to build\n$/);
  });

  it("keeps each step's artifacts apart, under steps/<name>/artifacts/", () => {
    const at = (step: string) => readFileSync(join(tree("multi-step-gate"), "steps", step, "artifacts", "app", "notes.txt"), "utf8");
    expect(at("01-write")).not.toContain("two");
    expect(at("02-extend")).toBe(`${at("01-write")}two\n`);
    expect(existsSync(join(tree("multi-step-gate"), "artifacts"))).toBe(false);
  });

  it("writes the setup stream while the build runs, not after it", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "evolve-live-build-")), "live-build");
    cpSync(join(FIXTURES, "oracle-ok"), dir, { recursive: true });
    const marker = `evolve-live-build-${newId()}`;
    // a fresh RUN (the marker keeps it out of the cache) that prints, then keeps the build going a while
    writeFileSync(join(dir, "environment", "Dockerfile"), `${readFileSync(join(dir, "environment", "Dockerfile"), "utf8")}RUN echo ${marker} && sleep 6\n`);
    const id = newId();
    const seen = runTrial(
      { trialId: id, jobId: "JOB-TRIAL-TEST", home, task: { dir, digest: await taskDigest(dir), name: "live-build" }, agent: { name: "oracle" }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );
    const setup = join(home, "trials", id, "setup.log");
    const deadline = Date.now() + 120_000;
    let during = "";
    while (Date.now() < deadline) {
      const t = store.getTrial(id);
      if (t && t.attempt_phase !== "prepare" && t.attempt_phase !== "build") break;
      if (existsSync(setup) && readFileSync(setup, "utf8").includes(`${marker}\n`)) {
        during = store.getTrial(id)!.attempt_phase!;
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const rec = await seen;
    await engine.removeImage?.(taskImageTag(await taskDigest(dir))).catch(() => {});
    expect(during).toBe("build");
    expect(rec.status).toBe("SCORED");
  }, 180_000);
});

describe("built-in agents", () => {
  it("nop does nothing: a real 0 from the verifier, and no agent stream in the tree", async () => {
    const r = await trial(join(FIXTURES, "oracle-ok"), { agent: "nop" });
    expect(r.rec).toMatchObject({ status: "SCORED", rewards: { reward: 0 }, reward: 0, agent: "nop" });
    expect(r.files).toEqual([...BOOTED, "verifier/reward.txt", "verifier/test-stdout.txt"].sort());
    expect(r.result.agent_result).toMatchObject({ n_input_tokens: 0, cost_usd: 0 });
  });

  it("an unknown agent fails the trial without starting a box", async () => {
    const r = await trial(join(FIXTURES, "oracle-ok"), { agent: "no-such-agent" });
    expect(r.rec.status).toBe("INFRASTRUCTURE_ERROR");
    expect(r.rec.exception?.type).toBe("UnknownAgentError");
    expect(r.rec.exception?.message).toBe("no agent named no-such-agent (known agents: oracle, nop, claude-code, codex, gemini-cli, qwen-code, opencode, droid, kimi-code, conductor)");
    expect(r.phases).toEqual(["prepare", "persist"]);
  });
});

describe("secrets", () => {
  it("reach the agent (the verifier checks its hash) but no file under the trial home, nor the store", () => {
    expect(ran.get("env-and-user")!.rec.status).toBe("SCORED");
    const hits: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        const p = join(d, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.isFile() && statSync(p).size < 64 * 1024 * 1024 && readFileSync(p).includes(SECRET)) hits.push(p);
      }
    };
    walk(home);
    expect(hits).toEqual([]);
    const log = readFileSync(join(home, "trials", ran.get("env-and-user")!.rec.id, "agent", "oracle.txt"), "utf8");
    expect(log).toContain("token=[redacted]");
  });

  it("a template no attached secret answers ends the trial with secret_not_attached before any box starts", async () => {
    const r = await trial(join(FIXTURES, "env-and-user"));
    expect(r.rec.status).toBe("INFRASTRUCTURE_ERROR");
    expect(r.rec.exception?.type).toBe("SecretNotAttached");
    expect(r.rec.exception?.message).toMatch(/secret_not_attached.*--secret API_TOKEN/);
    expect(r.phases).toEqual(["prepare", "persist"]);
  });
});

describe("cancellation", () => {
  it("an abort during the agent settles CANCELLED and removes the container", async () => {
    const ac = new AbortController();
    const started = Date.now();
    const r = await trial(join(FIXTURES, "agent-timeout"), {
      multiplier: 30,
      signal: ac.signal,
      onPhase: (p) => {
        if (p === "agent") setTimeout(() => ac.abort(), 300);
      },
    });
    expect(r.rec.status).toBe("CANCELLED");
    expect(r.rec.exception?.type).toBe("CancelledError");
    expect(r.phases).not.toContain("verify");
    expect(Date.now() - started).toBeLessThan(25_000);
    await settleRemovals();
    expect(await engine.list({ [LABEL_TRIAL]: r.rec.id })).toEqual([]);
  }, 40_000);

  it("leaves no container of any finished trial behind", async () => {
    await settleRemovals();
    for (const { rec } of ran.values()) {
      expect(await engine.list({ [LABEL_TRIAL]: rec.id }), rec.id).toEqual([]);
      // compose trials make a service network; it goes with them
      expect(await engine.listNetworks({ [LABEL_TRIAL]: rec.id }), rec.id).toEqual([]);
    }
  });
});
