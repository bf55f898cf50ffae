/** The two built-in agents: `oracle` (the task's reference solution) and `nop` (does nothing). */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { BOX } from "../trial/layout.ts";
import type { AgentOutcome, Harness, HarnessContext } from "./types.ts";

/**
 * Runs `solution/solve.sh` (the step's own `solution/` on a multi-step task) in the working directory with
 * `[solution].env`, as the agent user. Its output is the agent stream `agent/oracle.txt`, written from inside the
 * box so `trial logs --follow` sees it live.
 */
export const oracle: Harness = {
  name: "oracle",
  async run(ctx: HarnessContext): Promise<AgentOutcome> {
    const solution = join(ctx.stepDir, "solution");
    if (!existsSync(join(solution, "solve.sh"))) {
      ctx.log("oracle: the task has no solution/solve.sh");
      return { exitCode: 127, timedOut: false };
    }
    // a fresh copy per step, so a step never runs the previous step's leftover files
    // (checked with a HEAD first: an exec costs a runtime process, and a fresh box has no /solution)
    if (await ctx.engine.pathExists(ctx.containerId, BOX.solution)) await ctx.engine.exec(ctx.containerId, ["sh", "-c", `rm -rf ${BOX.solution}`], { user: "root" });
    await ctx.engine.copyIn(ctx.containerId, solution, BOX.solution);
    const r = await ctx.engine.exec(ctx.containerId, ["bash", "-c", `bash ${BOX.solution}/solve.sh >> ${BOX.agentLogs}/oracle.txt 2>&1`], {
      user: ctx.user,
      workdir: ctx.workdir,
      env: { ...ctx.env, ...ctx.solutionEnv },
      timeoutMs: ctx.timeoutMs,
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
