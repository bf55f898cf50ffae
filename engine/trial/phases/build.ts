/**
 * The build, boot and install phases: the agent's image (the task's compose services, its docker_image or its
 * environment/Dockerfile), the agent's box started from it with the task's services beside it, and the harness
 * installed in it.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { awaitHealthy, ensureEnvImage, requireImage, requireRunning } from "../box.ts";
import { BOX, BOX_ROOT } from "../../box/layout.ts";
import { TrialFailure } from "../../outcome.ts";
import type { TrialRoom } from "./room.ts";
import type { ContainerState } from "../../driver/types.ts";

/** build: makes (or finds cached) the image the agent's box runs and sets `room.image`. */
export async function buildImage(room: TrialRoom): Promise<void> {
  const { engine, req } = room;
  const env = room.cfg.environment;
  const context = join(req.task.dir, "environment");
  if (room.compose) {
    const mainFromCompose = !env.docker_image && !existsSync(join(context, "Dockerfile"));
    await room.compose.build(engine, {
      digest: req.task.digest, force: !!req.forceBuild, timeoutMs: env.build_timeout_sec * 1000, mainFromCompose,
      log: (line) => room.buildLog(line),
    });
    if (mainFromCompose) {
      room.image = room.compose.mainImage!;
      return;
    }
  }
  if (env.docker_image) {
    await requireImage(engine, env.docker_image);
    room.buildLog(`evolve: the task runs docker_image ${env.docker_image}; nothing to build`);
    room.image = env.docker_image;
    return;
  }
  if (!existsSync(join(context, "Dockerfile"))) {
    throw new TrialFailure("TaskInvalidError", "the task has no environment/Dockerfile, no docker_image and no image for its compose service main");
  }
  const r = await ensureEnvImage(engine, {
    taskDigest: req.task.digest,
    taskDir: req.task.dir,
    context,
    home: req.home,
    force: !!req.forceBuild,
    job: req.jobId,
    timeoutMs: env.build_timeout_sec * 1000,
    log: (line) => room.buildLog(line),
  });
  room.log(r.built ? `built image ${r.tag}` : `image ${r.tag} is cached`);
  // the setup stream says so too: a cached image's build output is that of the run that built it
  if (!r.built) room.buildLog(`evolve: image ${r.tag} is cached (built by an earlier run of this task); no build ran`);
  room.image = r.tag;
}

/**
 * boot: starts the task's compose services and the agent's box (`room.agentBox`), waits for its healthcheck, and
 * settles its workdir; whether `[agent] user` exists is checked in the same exec and failed on in install. Returns
 * the box's state as read once it was running (the script probe reuses it: one inspect fewer per trial).
 */
export async function bootAgentBox(room: TrialRoom): Promise<ContainerState> {
  const { cfg, engine, req } = room;
  if (room.compose) {
    await room.compose.start(engine, room.net!, { trialId: req.trialId, jobId: req.jobId, home: req.home, userns: room.userns, track: (id) => room.track(id), log: (l) => room.log(l) });
  }
  room.agentBox = await room.startBox(room.image, room.policies.baseline, cfg.environment, "agent");
  if (cfg.environment.healthcheck) {
    // a check that cannot run because the entrypoint died says so (guard), not what the engine said of the exec
    await room.guard(room.agentBox, () => awaitHealthy(engine, room.agentBox, cfg.environment.healthcheck!, () => !!room.deps.signal?.aborted));
    room.checkCancelled();
  }
  const state = await requireRunning(engine, room.agentBox, "before the agent started");
  // Every exec spawns a runtime process (~0.2 s on podman), so the image's WORKDIR comes from inspect and the
  // workdir and agent-user checks share one exec; a missing user still fails in install, before any agent work.
  const wd = cfg.environment.workdir;
  const user = room.agentUser();
  room.workdir = wd || state.workdir || "/";
  // without `[agent] user` the agent runs as the image's USER: a non-root one must be able to write its logs too
  const runsAs = user ?? nonRootUser(state.user);
  if (wd || runsAs !== undefined) {
    // the agent's log folders are the agent user's own, never world-writable
    const check = `if [ -n "$1" ]; then mkdir -p "$1"; fi; if [ -n "$2" ]; then if id -u "$2" >/dev/null 2>&1; then chown "$2" ${BOX.agentLogs} ${BOX.artifacts}; else echo evolve-no-user; fi; fi`;
    const r = await room.exec(room.agentBox, ["sh", "-c", check, "sh", wd ?? "", runsAs ?? ""], { user: BOX_ROOT });
    room.userMissing = user !== undefined && (r.exitCode !== 0 || r.stdout.includes("evolve-no-user"));
  }
  return state;
}

/** install: refuses a missing `[agent] user`, then runs the harness's install in the agent's box. */
export async function installAgent(room: TrialRoom): Promise<void> {
  const user = room.agentUser();
  if (user !== undefined) {
    if (room.userMissing) {
      await requireRunning(room.engine, room.agentBox, "before the agent started");
      throw new TrialFailure("AgentUserNotFoundError", `[agent] user ${user} does not exist in the image (add it in the Dockerfile, e.g. RUN useradd -m ${user})`);
    }
  }
  await room.harness.install?.(room.context(room.stepPlans()[0]));
  await requireRunning(room.engine, room.agentBox, "before the agent started");
}

/**
 * The user part of an image's USER ("dev", "1001" of "1001:1001") when it is not root, else undefined. The boot
 * check gives it the log folders only when the image's passwd knows it (`id -u`), as for `[agent] user`.
 */
export function nonRootUser(imageUser: string | undefined): string | undefined {
  const name = (imageUser ?? "").split(":")[0].trim();
  return name === "" || name === "root" || name === "0" ? undefined : name;
}
