/** The two built-in agents: `oracle` (the task's reference solution) and `nop` (does nothing). */
import { existsSync } from "node:fs";
import { join, relative } from "node:path";
import { BOX, BOX_ROOT } from "../box/layout.ts";
import { TrialFailure } from "../outcome.ts";
import type { TaskScript } from "../box/scripts.ts";
import type { AgentOutcome, Harness, HarnessContext, HarnessStep } from "./types.ts";

/**
 * The reference solution of each step (`solution/solve.sh`, a multi-step task's `steps/<name>/solution/solve.sh`);
 * a task that lacks one for any step is refused before anything is built (Harbor's oracle refuses it too): running
 * on would only let the verifier score an untouched box and call the task unsolvable.
 */
function solveScripts(task: { dir: string; steps: readonly HarnessStep[] }): TaskScript[] {
  const scripts = task.steps.map((s) => ({ name: relative(task.dir, join(s.dir, "solution", "solve.sh")), host: join(s.dir, "solution", "solve.sh") }));
  const missing = scripts.filter((s) => !existsSync(s.host)).map((s) => s.name);
  if (missing.length > 0) {
    throw new TrialFailure("SolutionNotFoundError", `no reference solution: the task has no ${missing.join(", ")}, which the oracle agent runs`);
  }
  return scripts;
}

/**
 * Runs `solution/solve.sh` (the step's own `solution/` on a multi-step task) in the working directory with
 * `[solution].env`, as the agent user. Its output is the agent stream `agent/oracle.txt`, written from inside the
 * box so `trial logs --follow` sees it live.
 */
export const oracle: Harness = {
  name: "oracle",
  prepare(task) {
    return { scripts: solveScripts(task) };
  },
  async run(ctx: HarnessContext): Promise<AgentOutcome> {
    const [script] = solveScripts({ dir: ctx.taskDir, steps: [{ name: null, dir: ctx.stepDir }] });
    // a fresh copy per step, so a step never runs the previous step's leftover files
    // (checked with a HEAD first: an exec costs a runtime process, and a fresh box has no /solution)
    if (await ctx.engine.pathExists(ctx.containerId, BOX.solution)) await ctx.engine.exec(ctx.containerId, ["sh", "-c", `rm -rf ${BOX.solution}`], { user: BOX_ROOT });
    await ctx.engine.copyIn(ctx.containerId, join(ctx.stepDir, "solution"), BOX.solution);
    const solve = ctx.scriptCommand(script, `${BOX.solution}/solve.sh`);
    const r = await ctx.engine.exec(ctx.containerId, ["sh", "-c", `${solve} >> ${BOX.agentLogs}/oracle.txt 2>&1`], {
      user: ctx.user,
      workdir: ctx.workdir,
      env: { ...ctx.env, ...ctx.solutionEnv },
      timeoutMs: ctx.timeoutMs,
      onTimeout: ctx.onTimeout,
    });
    return { exitCode: r.exitCode, timedOut: r.timedOut };
  },
};

/** Does nothing: measures the platform's own overhead and the verifier on an untouched box. */
export const nop: Harness = {
  name: "nop",
  async run(): Promise<AgentOutcome> {
    return { exitCode: 0, timedOut: false };
  },
};
