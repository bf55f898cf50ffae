/**
 * The coordinator without a cluster or an engine (issue 24 §1): the job runner hands it trials, "workers" here are
 * plain HTTP calls to its API, and the store is real. A result is accepted once and settles the trial; a lease that
 * expires puts the trial back (QUEUED) and the late result of its old holder is refused with a stable code; a wrong
 * token is refused; cancel withdraws the trials and cancels the submission.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Engine } from "../driver/types.ts";
import { requestStop } from "../job/actions.ts";
import { createJob, runJob, type JobConfig } from "../job/job.ts";
import { openStore, type Store, type TrialRecord } from "../store/index.ts";
import { Coordinator } from "./coordinator.ts";
import type { WorkerBatch, WorkerLauncher } from "./types.ts";

const DIGEST = `sha256:${"b".repeat(64)}`;
let home: string;
let store: Store;

function config(attempts: number): JobConfig {
  return {
    agent: { name: "oracle" },
    attempts,
    concurrency: 2,
    timeout_multiplier: 1,
    secret_names: [],
    force_build: false,
    max_retries: 0,
    source: { kind: "path", path: "/x" },
    tasks: [{ name: "t", digest: DIGEST }],
  };
}

class FakeLauncher implements WorkerLauncher {
  readonly kind = "fake";
  batch: WorkerBatch | undefined;
  cancelled: string[] = [];
  private resolveSubmit: (b: WorkerBatch) => void = () => {};
  readonly submitted: Promise<WorkerBatch>;
  constructor() {
    this.submitted = new Promise((r) => (this.resolveSubmit = r));
  }
  async submit(b: WorkerBatch) {
    this.batch = b;
    this.resolveSubmit(b);
    return "42";
  }
  async status() {
    return [];
  }
  async cancel(id: string) {
    this.cancelled.push(id);
  }
  async logs() {
    return "";
  }
  async dryRun() {
    return [];
  }
}

async function call(b: WorkerBatch, path: string, body: unknown, token = b.token): Promise<{ status: number; json: any }> {
  const res = await fetch(`${b.coordinatorUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

/** What a worker's runner would report: the trial scored with `reward`, one attempt. */
function scored(t: TrialRecord, reward: number): TrialRecord {
  const at = new Date().toISOString();
  return { ...t, status: "SCORED", rewards: { reward }, reward, exception: null, finished_at: at, attempts: [{ n: 1, started_at: at, ended_at: at, status: "SCORED", ended_because: "scored" }] };
}

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-coord-"));
  store = openStore(home);
});
afterEach(async () => {
  await store.close();
});

describe("coordinator", () => {
  it("leases each trial once, accepts each result once, requeues an expired lease and refuses its late result", async () => {
    const job = createJob(store, config(2));
    const launcher = new FakeLauncher();
    const coord = new Coordinator({ store, home, launcher, leaseSeconds: 0.6 });
    const running = runJob(job.id, { store, engine: {} as Engine, home, runTrial: coord.runTrial, secrets: {}, executor: coord });
    const b = await launcher.submitted;
    expect(b.workers).toBe(2);

    expect((await call(b, "/claim", { worker: "w" }, "wrong")).status).toBe(401);
    const first = (await call(b, "/claim", { worker: "w1" })).json;
    const second = (await call(b, "/claim", { worker: "w2" })).json;
    expect(first.lease.trial).not.toBe(second.lease.trial);
    expect(store.getTrial(first.lease.trial)!.status).toBe("RUNNING");
    expect((await call(b, "/claim", { worker: "w3" })).json).toMatchObject({ lease: null, wait_ms: expect.any(Number) });

    // w1 goes silent: its lease expires and the trial is queued again, for w3
    await new Promise((r) => setTimeout(r, 1000));
    expect((await call(b, "/heartbeat", { trial: second.lease.trial, key: second.lease.key })).status).toBe(409);
    const again = (await call(b, "/claim", { worker: "w3" })).json;
    expect([first.lease.trial, second.lease.trial]).toContain(again.lease.trial);
    const late = await call(b, "/result", { trial: first.lease.trial, key: first.lease.key, record: scored(first.trial, 0), tree: [] });
    expect(late).toEqual({ status: 409, json: { code: "lease_expired" } });

    const third = (await call(b, "/claim", { worker: "w4" })).json;
    const tree = [{ path: "result.json", kind: "file", mode: 0o644, data: Buffer.from("{}").toString("base64") }];
    expect((await call(b, "/result", { trial: again.lease.trial, key: again.lease.key, record: scored(again.trial, 1), tree })).status).toBe(200);
    // the same result again (a retried POST, a duplicate worker) counts nothing
    const dup = await call(b, "/result", { trial: again.lease.trial, key: again.lease.key, record: scored(again.trial, 1), tree: [] });
    expect(dup).toEqual({ status: 409, json: { code: "lease_moved" } });
    expect((await call(b, "/result", { trial: third.lease.trial, key: third.lease.key, record: scored(third.trial, 1), tree })).status).toBe(200);
    const trials = await running;
    expect(trials.map((t) => [t.status, t.reward])).toEqual([
      ["SCORED", 1],
      ["SCORED", 1],
    ]);
    expect(store.getJob(job.id)!.status).toBe("COMPLETED");
    expect(launcher.cancelled).toEqual(["42"]);
    // the lost lease is in the history: the attempt it held was closed as lost, the next one scored
    const histories = trials.map((t) => t.attempts!.map((a) => a.status));
    expect(histories).toContainEqual(["INTERRUPTED", "SCORED"]);
  });

  it("a cancelled job withdraws its trials: they settle CANCELLED and a worker's result is refused", async () => {
    const job = createJob(store, config(1));
    const launcher = new FakeLauncher();
    const coord = new Coordinator({ store, home, launcher, leaseSeconds: 30 });
    const stop = new AbortController();
    const running = runJob(job.id, { store, engine: {} as Engine, home, runTrial: coord.runTrial, secrets: {}, executor: coord, signal: stop.signal });
    const b = await launcher.submitted;
    const l = (await call(b, "/claim", { worker: "w1" })).json;
    stop.abort();
    const trials = await running;
    expect(trials[0].status).toBe("CANCELLED");
    expect(launcher.cancelled).toEqual(["42"]);
    expect(store.getJob(job.id)!.status).toBe("CANCELLED");
    expect(l.lease.trial).toBe(trials[0].id);
  });

  it("`trial stop` reaches a remote trial: a leased one is withdrawn (its worker refused), a queued one is never leased", async () => {
    const job = createJob(store, config(2));
    const launcher = new FakeLauncher();
    const coord = new Coordinator({ store, home, launcher, leaseSeconds: 30 });
    const running = runJob(job.id, { store, engine: {} as Engine, home, runTrial: coord.runTrial, secrets: {}, executor: coord });
    const b = await launcher.submitted;
    const l = (await call(b, "/claim", { worker: "w1" })).json;
    const queued = store.listTrials(job.id).find((t) => t.id !== l.lease.trial)!;
    expect(requestStop(store, [l.lease.trial, queued.id]).map((o) => o.action)).toEqual(["requested", "cancelled"]);
    expect((await call(b, "/claim", { worker: "w2" })).json).toMatchObject({ lease: null });
    const trials = await running;
    expect(trials.map((t) => [t.status, t.exception?.type])).toEqual(trials.map(() => ["CANCELLED", "CancelledError"]));
    expect(store.getJob(job.id)!.status).toBe("COMPLETED");
  });

  it("a submission the cluster refuses leaves the job resumable (INTERRUPTED), its trials QUEUED, nothing run", async () => {
    const job = createJob(store, config(2));
    const launcher = new FakeLauncher();
    launcher.submit = async () => {
      throw new Error("sbatch: error: invalid partition specified: nope");
    };
    const coord = new Coordinator({ store, home, launcher, leaseSeconds: 30 });
    await expect(runJob(job.id, { store, engine: {} as Engine, home, runTrial: coord.runTrial, secrets: {}, executor: coord })).rejects.toThrow(/invalid partition/);
    expect(store.getJob(job.id)!.status).toBe("INTERRUPTED");
    expect(store.listTrials(job.id).map((t) => t.status)).toEqual(["QUEUED", "QUEUED"]);
  });
});
