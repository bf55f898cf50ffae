/**
 * BUDGET in the job layer (platform-trials.md): a trial a budget stopped is never retried on its own, and
 * `job resume` runs it again once the user has raised the budget. The trial runner is injected, so this checks
 * the scheduler's choice alone; tests/trial-gateway.engine.test.ts covers how a real trial comes to settle BUDGET.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Engine } from "../driver/types.ts";
import { createJob, runJob, type JobConfig } from "./job.ts";
import { openStore, type Store, type TrialRecord } from "../store/index.ts";
import type { TrialRequest } from "../trial/types.ts";

let home: string;
let store: Store;

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-job-budget-"));
  store = openStore(home);
});

afterAll(async () => {
  await store.close();
  rmSync(home, { recursive: true, force: true });
});

it("a BUDGET trial is not retried by the run that stopped it, and resume runs it again", async () => {
  const config: JobConfig = {
    agent: { name: "sdk-probe" }, attempts: 1, concurrency: 2, timeout_multiplier: 1, secret_names: [], force_build: false,
    max_retries: 3, source: { kind: "path", path: "/tasks" }, tasks: [{ name: "a", digest: "sha256:aa" }, { name: "b", digest: "sha256:bb" }],
    max_spend_usd: 0.5, verifier_env: { REWARDKIT_MODEL: "claude-haiku-4-5" },
  };
  const job = createJob(store, config);
  const calls: TrialRequest[] = [];
  let budgetLeft = false;
  const runTrial = async (req: TrialRequest): Promise<TrialRecord> => {
    calls.push(req);
    const rec = store.getTrial(req.trialId)!;
    const at = new Date().toISOString();
    const stopped = !budgetLeft && req.task.name === "b";
    const settled: TrialRecord = stopped
      ? { ...rec, status: "BUDGET", exception: { type: "ApiUsageLimitError", message: "user: credits spent", traceback: "", occurred_at: at }, updated_at: at }
      : { ...rec, status: "SCORED", rewards: { reward: 1 }, reward: 1, updated_at: at };
    store.putTrial(settled);
    return settled;
  };
  const deps = { store, engine: {} as Engine, home, runTrial, secrets: {}, retryDelayMs: 1 };
  const first = await runJob(job.id, deps);
  expect(first.map((t) => t.status).sort()).toEqual(["BUDGET", "SCORED"]);
  expect(calls).toHaveLength(2);
  // the job's cap and judge override reach every trial
  for (const c of calls) expect(c).toMatchObject({ maxSpendUsd: 0.5, verifierEnv: { REWARDKIT_MODEL: "claude-haiku-4-5" } });

  budgetLeft = true;
  const resumed = await runJob(job.id, deps);
  expect(calls).toHaveLength(3);
  expect(calls[2].task.name).toBe("b");
  expect(resumed.map((t) => t.status)).toEqual(["SCORED", "SCORED"]);
});
