/**
 * `evolve doctor` on this machine's podman, and `gc` removing what no live trial owns while keeping what a
 * RUNNING trial still uses.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL_JOB, LABEL_MANAGED, LABEL_TRIAL, type Engine } from "../engine/driver/index.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { runDoctor } from "../engine/doctor.ts";
import { gc } from "../engine/gc.ts";
import { openStore, type Store, type TrialRecord } from "../engine/store/index.ts";

const RUN = `doc${process.pid}${Date.now().toString(36)}`;
let home: string;
let engine: Engine;
let store: Store;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-doctor-test-"));
  engine = await openEngine({ kind: "podman", home });
  store = openStore(home);
});

afterAll(async () => {
  await Promise.all((await engine.list({ "dev.evolve.test": RUN })).map((c) => engine.remove(c.id)));
  for (const n of await engine.listNetworks({ "dev.evolve.test": RUN })) await engine.removeNetwork(n.name);
  await engine.close();
  await store.close();
  rmSync(home, { recursive: true, force: true });
});

describe("doctor", () => {
  it("finds every check ok on this machine and leaves nothing behind", async () => {
    const report = await runDoctor({ kind: "podman", home });
    const failed = report.checks.filter((c) => !c.ok);
    expect(failed).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.checks.map((c) => c.name)).toEqual([
      "engine binary",
      "engine service",
      "base image",
      "build",
      "run + exec",
      "copy in",
      "podman drop-in",
      "network isolation",
      "box user namespace",
      "box workdir",
      "cleanup",
    ]);
    // Harbor's hello-world shape: a WORKDIR the image never created, written by box root in the user namespace
    expect(report.checks.find((c) => c.name === "box workdir")?.detail).toContain("box root writes a WORKDIR the image never created (/doctor-workdir), in the user namespace");
    expect(await engine.list({ "dev.evolve.doctor": "" })).toEqual([]);
  });

  it("checks the WORKDIR shape without a user namespace too when [box] userns = false", async () => {
    const off = mkdtempSync(join(tmpdir(), "evolve-doctor-off-"));
    try {
      writeFileSync(join(off, "config.toml"), "[box]\nuserns = false\n");
      const report = await runDoctor({ kind: "podman", home: off });
      const check = report.checks.find((c) => c.name === "box workdir");
      expect(check?.ok, check?.detail).toBe(true);
      expect(check?.detail).toContain("without a user namespace");
    } finally {
      rmSync(off, { recursive: true, force: true });
    }
  });

  it("names the dockerd command when docker has no daemon", async () => {
    const saved = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = `unix://${join(home, "none.sock")}`;
    try {
      const report = await runDoctor({ kind: "docker", home });
      expect(report.ok).toBe(false);
      const service = report.checks.find((c) => c.name === "engine service");
      expect(service?.ok).toBe(false);
      expect(service?.fix).toContain("dockerd -H unix://");
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
  });
});

describe("gc", () => {
  const now = () => new Date().toISOString();
  const trial = (id: string, status: TrialRecord["status"]) =>
    store.putTrial({ id, job_id: `${RUN}-job`, task_digest: `sha256:${"0".repeat(64)}`, agent: "nop", status, phase_timings: {}, created_at: now(), updated_at: now() });

  // Scoped to this file's objects: other test files run their own trials on the same engine at the same time.
  const scope = { "dev.evolve.test": RUN };

  const job = (id: string, pid: number) =>
    store.putJob({ id, created_at: now(), status: "RUNNING", config: {}, runner: { pid, host: hostname(), started_at: now() } });

  it("removes boxes and networks of settled or unknown trials, keeps those of a RUNNING one", async () => {
    job(`${RUN}-job`, process.pid);
    trial(`${RUN}-live`, "RUNNING");
    trial(`${RUN}-done`, "SCORED");
    const mk = async (t: string) => {
      const labels = { [LABEL_MANAGED]: "1", [LABEL_TRIAL]: t, [LABEL_JOB]: `${RUN}-job`, "dev.evolve.test": RUN };
      const id = await engine.create({ image: "busybox:latest", cmd: ["sleep", "300"], labels, network: "none" });
      await engine.start(id);
      return id;
    };
    const [live, done, ghost] = await Promise.all([mk(`${RUN}-live`), mk(`${RUN}-done`), mk(`${RUN}-ghost`)]);
    await engine.createNetwork(`${RUN}-live-net`, { internal: true, labels: { [LABEL_MANAGED]: "1", [LABEL_TRIAL]: `${RUN}-live`, "dev.evolve.test": RUN } });
    await engine.createNetwork(`${RUN}-done-net`, { internal: true, labels: { [LABEL_MANAGED]: "1", [LABEL_TRIAL]: `${RUN}-done`, "dev.evolve.test": RUN } });

    const dry = await gc(engine, store, { dryRun: true, scope });
    expect(dry.containers.map((c) => c.id)).toEqual(expect.arrayContaining([done, ghost]));
    expect(await engine.inspect(done)).toBeDefined();

    const removed = await gc(engine, store, { scope });
    const ids = removed.containers.map((c) => c.id);
    expect(ids).toEqual(expect.arrayContaining([done, ghost]));
    expect(ids).not.toContain(live);
    expect(removed.networks.map((n) => n.name)).toContain(`${RUN}-done-net`);
    expect(await engine.inspect(done)).toBeUndefined();
    expect(await engine.inspect(ghost)).toBeUndefined();
    expect((await engine.inspect(live))?.running).toBe(true);
    expect((await engine.listNetworks({ "dev.evolve.test": RUN })).map((n) => n.name)).toEqual([`${RUN}-live-net`]);

    // Once the trial settles, its box is no longer owned.
    trial(`${RUN}-live`, "SCORED");
    expect((await gc(engine, store, { scope })).containers.map((c) => c.id)).toContain(live);
  });

  it("removes the box of a trial left RUNNING by a runner that was killed", async () => {
    const dead = spawnSync("true").pid!; // a process that has already exited
    job(`${RUN}-crashed`, dead);
    store.putTrial({ id: `${RUN}-orphan`, job_id: `${RUN}-crashed`, task_digest: `sha256:${"0".repeat(64)}`, agent: "nop", status: "RUNNING", phase_timings: {}, created_at: now(), updated_at: now() });
    const labels = { [LABEL_MANAGED]: "1", [LABEL_TRIAL]: `${RUN}-orphan`, [LABEL_JOB]: `${RUN}-crashed`, "dev.evolve.test": RUN };
    const id = await engine.create({ image: "busybox:latest", cmd: ["sleep", "300"], labels, network: "none" });
    await engine.start(id);
    expect((await gc(engine, store, { scope })).containers.map((c) => c.id)).toContain(id);
    expect(await engine.inspect(id)).toBeUndefined();
  });
});
