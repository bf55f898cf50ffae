/** What a trial plans from its task.toml (engine/trial/plan.ts): steps, their timeouts, config.json. No engine. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseTaskToml } from "../task/model.ts";
import { stepPlans, trialConfigFile } from "./plan.ts";
import type { TrialRequest } from "./types.ts";

const FIX = join(__dirname, "../..", "fixtures", "tasks", "trials");
const cfgOf = (name: string) => parseTaskToml(readFileSync(join(FIX, name, "task.toml"), "utf8"));
const req = (over: Partial<TrialRequest> = {}): TrialRequest => ({
  trialId: "T1", jobId: "J1", home: "/h", task: { dir: "/tasks/t", digest: "sha256:ab", name: "org/t" }, agent: { name: "oracle" },
  timeoutMultiplier: 2, secrets: { B: "x", A: "y" }, ...over,
});

describe("stepPlans", () => {
  it("a single-step task is one unnamed step at the task root, timeouts multiplied", () => {
    expect(stepPlans(cfgOf("oracle-ok"), "/tasks/t", 2)).toEqual([
      { name: null, dir: "/tasks/t", testsDirs: ["/tasks/t/tests"], agentTimeoutSec: 120, verifierTimeoutSec: 120, verifierEnv: {}, artifacts: [] },
    ]);
  });
  it("a step's own timeout beats the task's, each under its own folder with its min_reward", () => {
    const plans = stepPlans(cfgOf("multi-step-gate"), "/tasks/t", 1);
    expect(plans.map((p) => [p.name, p.dir, p.agentTimeoutSec, p.minReward])).toEqual([
      ["01-write", "/tasks/t/steps/01-write", 60, 0.5],
      ["02-extend", "/tasks/t/steps/02-extend", 30, { reward: 0.5 }],
      ["03-never", "/tasks/t/steps/03-never", 60, undefined],
    ]);
    // the step's own tests/ is laid over the task's shared one
    expect(plans[0].testsDirs).toEqual(["/tasks/t/tests", "/tasks/t/steps/01-write/tests"]);
  });
});

describe("trialConfigFile", () => {
  it("names the attached secrets (sorted), never their values", () => {
    const c = trialConfigFile(req(), cfgOf("oracle-ok"));
    expect(c.secret_names).toEqual(["A", "B"]);
    expect(JSON.stringify(c)).not.toMatch(/"x"|"y"/);
    expect(c.timeouts.agent_sec).toBe(120);
  });
  it("without a readable task, the task's own settings are empty rather than guessed", () => {
    const c = trialConfigFile(req());
    expect(c.timeouts).toEqual({ agent_sec: 0, verifier_sec: 0, build_sec: 0 });
    expect(c.environment.network_mode).toBe("");
  });
});
