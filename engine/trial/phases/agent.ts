/**
 * The agent phase of one step: the step's workdir and setup.sh, the harness's run in the agent's box with a fresh
 * gateway credential, and the sweep that ends every process the agent left before anything reads its work; at
 * persist, the records its harness names (its home, its trajectory), which the trial writes, not the harness.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { firstLine } from "../../errors.ts";
import { formatDuration } from "../../duration.ts";
import type { Harness, HarnessRecords, HarnessSettle } from "../../harness/types.ts";
import { BOX } from "../../box/layout.ts";
import { captureAgentHome } from "../agent-home.ts";
import { requireRunningAfter } from "../box.ts";
import { TrialFailure } from "../../outcome.ts";
import { toRunning } from "../lifecycle.ts";
import type { StepPlan } from "../plan.ts";
import { killNewProcs, snapshotProcs, type KilledProc, type ProcSnapshot } from "../procs.ts";
import { setupScript } from "../../box/scripts.ts";
import { now } from "../recorder.ts";
import type { StepResult } from "../result.ts";
import type { TrialRoom } from "./room.ts";
import { writeTrajectory } from "../trajectory-out.ts";

/**
 * Runs the agent of step `plan` in the agent's box and records on `step` how it went: its clock, and the
 * exception of an agent that timed out, hit the spend cap or exited non-zero (the verifier still runs after it).
 * An agent whose every model call the gateway could not serve ends the trial ModelUnavailableError: no verdict.
 */
export async function agentStep(room: TrialRoom, plan: StepPlan, step: StepResult): Promise<void> {
  room.update(toRunning());
  const started = now();
  const { engine, harness } = room;
  const box = room.agentBox;
  await room.net!.enter(box, "agent");
  if (plan.name !== null && existsSync(join(plan.dir, "workdir"))) {
    await engine.copyIn(box, join(plan.dir, "workdir"), room.workdir!);
  }
  // only the step's own setup.sh: one an earlier step copied into the same workdir has run already
  const setup = setupScript(room.req.task.dir, plan.dir);
  if (plan.name !== null && existsSync(setup.host)) {
    const r = await room.exec(box, ["sh", "-c", room.scriptCommand(setup, `${room.workdir}/setup.sh`)], {
      user: room.agentUser(),
      workdir: room.workdir,
      env: { ...room.agentEnv, ...room.net!.execEnv("agent") },
      timeoutMs: plan.agentTimeoutSec * 1000,
    });
    if (r.exitCode !== 0) room.log(`step ${plan.name}: workdir/setup.sh exited ${r.exitCode}`);
  }
  let gatewayEnv: Record<string, string> = {};
  if (room.lease && harness.usesModel) {
    // a fresh credential per agent phase, alive a minute past the phase's timeout at most
    gatewayEnv = room.lease.agentEnv(room.gatewayUrl(), plan.agentTimeoutSec * 1000 + 60_000);
  }
  const ctx = room.context(plan, { ...room.net!.execEnv("agent"), ...gatewayEnv });
  if (room.lease && harness.usesModel) {
    // one key behind every variable agentEnv sets: a CLI harness puts it under the name its CLI reads
    ctx.gatewayEnv = gatewayEnv;
    ctx.gatewayKey = gatewayEnv.ANTHROPIC_API_KEY ?? gatewayEnv.OPENAI_API_KEY;
    ctx.gatewayUrl = room.gatewayUrl();
  }
  // what runs in the box now is the image's (its ENTRYPOINT's services) and the task's own setup: it stays
  const before = await room.guard(box, () => snapshotProcs(engine, box, { state: room.agentBoxState?.id === box ? room.agentBoxState : undefined }));
  // the agent's time ends at its timeout: the sweep runs then, not after the exec's kill and its grace period
  let atTimeout: Promise<KilledProc[]> | undefined;
  ctx.onTimeout = async () => {
    atTimeout ??= killNewProcs(engine, box, before).then((r) => r.killed, () => []);
    await atTimeout;
  };
  let out: Awaited<ReturnType<Harness["run"]>>;
  try {
    // a harness's engine call that fails because the entrypoint died is that death, not an engine error
    out = await room.guard(box, () => harness.run(ctx));
  } finally {
    // revoked the moment the phase ends: nothing the agent left running spends during the verifier
    room.lease?.endAgent();
  }
  room.update({ agent_exit: { exit_code: out.timedOut ? null : out.exitCode, timed_out: out.timedOut } });
  room.checkCancelled();
  // an agent cut off because the box's entrypoint died (its exec killed with the box) did not fail: the box did
  await requireRunningAfter(engine, box, out.timedOut ? 0 : out.exitCode, "during the agent phase");
  await endAgentProcesses(room, box, before, atTimeout ? await atTimeout : []);
  if (harness.afterAgent) {
    try {
      await room.guard(box, () => harness.afterAgent!(ctx, out));
    } catch (e) {
      room.checkCancelled();
      room.log(`${harness.name}: reading the agent's output failed: ${firstLine(e)}`);
    }
  }
  // the gateway's own calls are the evidence: an agent that never met its model did not fail, evolve's setup did
  const unavailable = room.lease && harness.usesModel ? room.lease.modelUnavailable() : undefined;
  if (unavailable) {
    step.agent_execution = { started_at: started, finished_at: now() };
    throw new TrialFailure("ModelUnavailableError", unavailable);
  }
  if (out.timedOut) {
    step.exception = room.exc("AgentTimeoutError", `the agent ran past its ${formatDuration(plan.agentTimeoutSec * 1000)} timeout${plan.name ? ` in step ${plan.name}` : ""}`);
  } else if (room.lease?.capReached()) {
    step.exception = room.exc("AgentSpendCapError", `the agent reached the trial's spend cap: ${room.lease.capReached()}`);
  } else if (out.exitCode !== 0) {
    step.exception = room.exc("NonZeroAgentExitCodeError", `the agent exited with code ${out.exitCode}${plan.name ? ` in step ${plan.name}` : ""}`);
  }
  if (step.exception) {
    room.log(`${step.exception.type}: ${step.exception.message}; the verifier still runs`);
    room.agentException ??= step.exception;
  }
  step.agent_execution = { started_at: started, finished_at: now() };
}

/**
 * Kills every process the agent started (procs.ts: the box's cgroup frozen from the host, nested namespaces
 * included) before anything reads what it left: what survives would keep writing during the verifier, or read the
 * judge's credential from its environment. A box whose processes cannot all be ended gives no verdict.
 */
export async function endAgentProcesses(room: TrialRoom, box: string, before: ProcSnapshot, killedAtTimeout: KilledProc[] = []): Promise<void> {
  const swept = await room.guard(box, () => killNewProcs(room.engine, box, before));
  const r = { ...swept, killed: [...killedAtTimeout, ...swept.killed] };
  if (r.killed.length > 0) {
    const shownProcs = r.killed.slice(0, 20).map((p) => `${p.name}(${p.pid})`).join(", ");
    room.log(`agent phase ended: killed ${r.killed.length} process(es) the agent left running (${before.via} sweep): ${shownProcs}${r.killed.length > 20 ? ", …" : ""}`);
  }
  if (r.left.length > 0) {
    const names = r.left.slice(0, 10).map((p) => `${p.name}(${p.pid})`).join(", ");
    throw new TrialFailure("AgentProcessesSurvivedError", `${r.left.length} process(es) the agent started were still alive after the sweep (${names}); no verifier runs beside them`);
  }
}

/**
 * Keeps what the harness `agent`'s settle named (persist: every box gone, the tree redacted), through `st`'s fresh
 * files: its home folder as `agent/agent-home.json`, then the stored trace as `agent/trajectory.json`. The trial
 * writes its tree; the harness only says what belongs in it. A failed capture is logged, never thrown.
 */
export async function persistAgentRecords(st: HarnessSettle, agent: string, records: HarnessRecords): Promise<void> {
  if (records.home) {
    try {
      const home = await captureAgentHome(st.agentDir, BOX.agentLogs, records.home.box, records.home.leaveOut);
      await st.writeAgentFile("agent-home.json", JSON.stringify(home, null, 2) + "\n");
    } catch (e) {
      st.log(`${agent}: agent home not captured: ${firstLine(e)}`);
    }
  }
  if (records.trajectory) await writeTrajectory(st, records.trajectory);
}
