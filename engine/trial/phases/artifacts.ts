/**
 * What the agent's work leaves for the verifier and the trial tree: after the agent, the task's pre_artifacts.sh
 * or its listed artifact paths are collected into /logs/artifacts; after each step of a multi-step task, that
 * step's outputs (agent, verifier, artifacts) are archived under steps/<name>/.
 */
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TaskConfig } from "../../task/model.ts";
import { artifactSources, BOX, BOX_ROOT, collectArtifactCommand, TRIAL, trialPaths } from "../../box/layout.ts";
import type { StepPlan } from "../plan.ts";
import { preArtifactsScript } from "../../box/scripts.ts";
import type { TrialRoom } from "./room.ts";

/** Absolute container paths of the task's (and the step's) `artifacts` entries. */
export function stepArtifactSources(cfg: TaskConfig, plan: StepPlan): string[] {
  return artifactSources([...cfg.artifacts, ...plan.artifacts]);
}

/** After the agent: pre_artifacts.sh (uncommitted work committed first), else the listed artifact paths. */
export async function collectArtifacts(room: TrialRoom, plan: StepPlan): Promise<void> {
  const box = room.agentBox;
  const script = preArtifactsScript(room.req.task.dir);
  const pre = script.host;
  if (existsSync(pre)) {
    const tmp = await mkdtemp(join(tmpdir(), "evolve-pre-"));
    try {
      await copyFile(pre, join(tmp, "pre_artifacts.sh"));
      await room.engine.copyIn(box, tmp, BOX.scratch);
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    const commit =
      "if git -c safe.directory='*' rev-parse --is-inside-work-tree >/dev/null 2>&1; then " +
      "git -c safe.directory='*' add -A && (git -c safe.directory='*' diff --cached --quiet || " +
      "git -c safe.directory='*' -c user.name=evolve -c user.email=evolve@localhost commit -q -m 'agent work'); fi";
    const run = room.scriptCommand(script, `${BOX.scratch}/pre_artifacts.sh`);
    const r = await room.exec(box, ["sh", "-c", `${commit}; mkdir -p ${BOX.artifacts}; ${run}`], {
      user: BOX_ROOT,
      workdir: room.workdir,
      env: room.literals,
      timeoutMs: plan.verifierTimeoutSec * 1000,
    });
    room.log(`pre_artifacts.sh exited ${r.exitCode}${r.timedOut ? " (timed out)" : ""}`);
    return;
  }
  for (const src of stepArtifactSources(room.cfg, plan)) {
    const r = await room.exec(box, ["sh", "-c", collectArtifactCommand(src)], {
      user: BOX_ROOT,
    });
    if (r.exitCode !== 0) room.log(`artifact ${src} was not collected (missing?)`);
  }
}

/**
 * Moves step `name`'s agent, verifier and artifact outputs to steps/<name>/{agent,verifier,artifacts}/, as Harbor
 * archives a multi-step trial, so the next step starts with empty /logs folders and each step's artifacts are its own.
 */
export async function archiveStep(trialPath: string, name: string): Promise<void> {
  for (const d of [TRIAL.agent, TRIAL.verifier, TRIAL.artifacts]) {
    const from = join(trialPath, d);
    const to = join(trialPaths(trialPath).step(name), d);
    await mkdir(to, { recursive: true });
    for (const f of await readdir(from)) await rename(join(from, f), join(to, f));
  }
}
