/**
 * The verify phase of one step: the verifier runs in the agent's box (shared mode) or in a fresh box of its own
 * (separate mode, the agent's box of a single-step task retired first), with the judge's credential when the
 * rubric asks for one, and scores the step through the one verifier path every run shares (recorder.ts
 * runVerifier). buildVerifierImage is shared with the regrade's build phase (regrade.ts).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Engine } from "../../driver/types.ts";
import { verifierMode, type TaskConfig } from "../../task/model.ts";
import { ensureEnvImage, requireRunningAfter } from "../box.ts";
import { keepChangedFiles } from "../changes.ts";
import { judgeFamily, resolveVerifierEnv, withJudgeEnv } from "../env.ts";
import { BOX_ROOT, restoreArtifactCommand, trialPaths } from "../../box/layout.ts";
import type { StepPlan } from "../plan.ts";
import { emptyBoxDir } from "../sweep.ts";
import { now } from "../recorder.ts";
import type { StepResult } from "../result.ts";
import type { TrialRequest } from "../types.ts";
import { stepArtifactSources } from "./artifacts.ts";
import { agentSystemChanges, describeSystemChanges, takeSystemBaseline } from "../verifier-guard.ts";
import type { ExceptionRecord } from "../result.ts";
import { EXCEPTIONS, type TrialStatus } from "../../outcome.ts";
import type { TrialRoom } from "./room.ts";

/**
 * Runs the verifier of step `plan` and records its scores (or its exception) and its clock on `step`. Not ok: the
 * trial settles `status` (SCORING_ERROR unless said).
 */
export async function verifyStep(room: TrialRoom, plan: StepPlan, step: StepResult): Promise<{ ok: boolean; status?: TrialStatus }> {
  const started = now();
  try {
    const { cfg, req } = room;
    const separate = verifierMode(cfg.verifier) === "separate";
    if (separate && room.stepPlans().length === 1) await retireAgentBox(room);
    else await room.net!.enter(room.agentBox, "verify");
    // nothing of the agent runs any more (endAgentProcesses): what it left in the verifier's folder goes, and
    // only the verifier writes there from now on
    await emptyBoxDir(trialPaths(room.path).verifier);
    if (!separate) {
      const changed = await sharedVerifierChanges(room, plan);
      if (changed) {
        step.exception = changed;
        return { ok: false, status: EXCEPTIONS.VerifierEnvironmentChangedError.status };
      }
    }
    const box = separate ? await separateVerifierBox(room, plan) : room.agentBox;
    const resolved = resolveVerifierEnv({ ...cfg.verifier.env, ...plan.verifierEnv });
    let env = resolved.env;
    if (resolved.judge.length > 0 && room.lease) {
      const vars = room.lease.judgeEnv(resolved.judge.map((j) => judgeFamily(j.name)), room.gatewayUrl(), plan.verifierTimeoutSec * 1000 + 60_000);
      env = withJudgeEnv(env, resolved.judge, vars);
      room.log(`judge credential for ${resolved.judge.map((j) => j.key).join(", ")} issued through the gateway`);
    }
    // --ve REWARDKIT_JUDGE / REWARDKIT_MODEL: the job's override of the rubric's judge
    env = { ...env, ...(req.verifierEnv ?? {}) };
    const v = await room.runVerifier(box, {
      guard: (fn) => room.guard(box, fn),
      testsDirs: plan.testsDirs,
      workdir: room.workdir,
      env: { ...room.literals, ...(separate ? {} : room.net!.execEnv("verify")), ...env },
      timeoutSec: plan.verifierTimeoutSec,
      // the agent's box was probed at boot; a separate verifier's fresh box is probed by runVerifier
      scripts: separate ? undefined : room.agentScripts,
    });
    if ("exception" in v) {
      // a verifier cut off because the agent's box died gives no verdict of its own: the entrypoint's exit is why
      if (!separate) await requireRunningAfter(room.engine, box, v.exitCode ?? 0, "during the verify phase");
      step.exception = v.exception;
      return { ok: false };
    }
    step.rewards = v.rewards;
    step.reward = v.primary;
    // what this verifier installed (uv in /root/.local, pytest in /usr/local) is not the next step's agent's doing
    if (!separate && plan.name !== room.stepPlans().at(-1)?.name) await rebaseline(room);
    return { ok: true };
  } finally {
    room.lease?.endJudge();
    step.verifier = { started_at: started, finished_at: now() };
  }
}

/**
 * Whether the shared verifier of step `plan` may run in the agent's box: undefined when the agent changed none of
 * the verifier's system paths beyond what the task allows, else the VerifierEnvironmentChangedError that settles the
 * trial INDETERMINATE, the paths listed (message: the first few; traceback and trial.log: all). A box whose changes
 * the engine cannot list cannot be vouched for either.
 */
async function sharedVerifierChanges(room: TrialRoom, plan: StepPlan): Promise<ExceptionRecord | undefined> {
  const stepVerifier = room.cfg.steps?.find((s) => s.name === plan.name)?.verifier;
  const allowed = [...(room.cfg.verifier.allowed_system_changes ?? []), ...(stepVerifier?.allowed_system_changes ?? [])];
  const how = "declare the paths the agent may change in [verifier] allowed_system_changes, or verify in a separate box (environment_mode = \"separate\")";
  let changes;
  try {
    if (!room.systemBaseline) throw new Error("no baseline of the box was taken before the agent ran");
    changes = await agentSystemChanges(room.engine, room.agentBox, { baseline: room.systemBaseline, allowed, workdir: room.workdir });
  } catch (e) {
    const msg = `the shared verifier's programs cannot be vouched for: the engine could not list the box's changes (${(e as Error).message.split("\n")[0]})`;
    room.log(msg);
    return room.exc("VerifierEnvironmentChangedError", msg);
  }
  if (changes.length === 0) return undefined;
  const all = changes.map((c) => `${c.kind} ${c.path}`).join("\n");
  room.log(`the agent changed ${changes.length} path(s) the shared verifier runs from; no verdict:\n${all}`);
  const msg = `the agent changed ${changes.length} path(s) the shared verifier runs from, not declared by the task: ${describeSystemChanges(changes)}; ${how}`;
  return room.exc("VerifierEnvironmentChangedError", msg, all);
}

/** Takes the shared verifier's baseline again, after a step's verifier ran and before the next step's agent. */
async function rebaseline(room: TrialRoom): Promise<void> {
  try {
    room.systemBaseline = await takeSystemBaseline(room.engine, room.agentBox, room.workdir);
  } catch (e) {
    room.systemBaseline = undefined;
    room.log(`could not list the box's changes after the verifier ran: ${(e as Error).message.split("\n")[0]}`);
  }
}

/**
 * A separate verifier of a single-step task never runs beside the agent's box: the kept tree is taken and the
 * box halted first, every process of it killed (the task's other services stay: they hold no trial folder); its
 * removal (the storage torn down) waits until the trial has settled, off the critical path. A multi-step task's
 * box lives on for its next step; it has no /logs/verifier mount and none of the agent's processes left.
 */
export async function retireAgentBox(room: TrialRoom): Promise<void> {
  const box = room.agentBox;
  if (!box) return;
  await keepChangedFiles(room.engine, box, room.path, (l) => room.log(l));
  room.keptTaken = true;
  await room.keepBoxLog(box);
  await room.haltBox(box);
  room.agentBox = "";
  room.log(`agent box ${box.slice(0, 12)} halted (no process left) before the separate verifier starts; it is removed after the trial settles`);
}

/** A fresh box for a separate verifier: tests/Dockerfile when present (and no docker_image), else the task image. */
export async function separateVerifierBox(room: TrialRoom, plan: StepPlan): Promise<string> {
  const { cfg, req } = room;
  const built = await buildVerifierImage(room.engine, req, cfg, { force: !!req.forceBuild, log: (line) => room.buildLog(line) });
  const image = built ?? room.image;
  const venv = cfg.verifier.environment ?? cfg.environment;
  const box = await room.startBox(image, room.policies.separateVerifier ?? room.policies.baseline, venv, "verifier");
  // the verifier sees /logs/artifacts (mounted) and each listed artifact back at its source path
  for (const src of stepArtifactSources(cfg, plan)) {
    await room.exec(box, ["sh", "-c", restoreArtifactCommand(src)], { user: BOX_ROOT });
  }
  return box;
}

/**
 * The separate verifier's own image, built (or found cached) from the task's tests/Dockerfile; undefined when the
 * task has none, or names a docker_image, and the verifier runs the task image.
 */
export async function buildVerifierImage(
  engine: Engine,
  req: TrialRequest,
  cfg: TaskConfig,
  o: { force: boolean; log: (line: string) => void },
): Promise<string | undefined> {
  if (cfg.environment.docker_image || !existsSync(join(req.task.dir, "tests", "Dockerfile"))) return undefined;
  const r = await ensureEnvImage(engine, {
    taskDigest: req.task.digest,
    taskDir: req.task.dir,
    context: join(req.task.dir, "tests"),
    home: req.home,
    force: o.force,
    job: req.jobId,
    timeoutMs: cfg.environment.build_timeout_sec * 1000,
    log: o.log,
  });
  return r.tag;
}
