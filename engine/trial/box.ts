/**
 * The trial's container ("box"): its image, how it is created and started, and the checks it must pass before
 * any agent work (platform-tasks.md "environment/", "Healthcheck and the agent user").
 *
 * Network design (no-network, allowlist through the egress proxy, phase switches, the gateway relay): see
 * network.ts, which decides each box's networks and /etc/hosts entries; boxSpec only carries them. No host socket
 * is ever mounted into a box: the gateway is reached over the trial's gw network.
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { isAbsolute, join, relative } from "node:path";
import { digestFiles, listTaskFiles } from "../task/digest.ts";
import { LABEL_ENV_KEY, LABEL_HOME, LABEL_IMAGE_HOME, LABEL_JOB, LABEL_MANAGED, LABEL_TRIAL, type ContainerSpec, type ContainerState, type Engine, type IdMapping } from "../driver/types.ts";
import type { BoxDefaults } from "../config.ts";
import type { EnvironmentConfig } from "../task/model.ts";
import type { HarnessMount } from "../harness/types.ts";
import { EvolveError } from "../errors.ts";
import { TrialFailure } from "../outcome.ts";
import { boxMounts, BOX_ROOT } from "../box/layout.ts";
import { formatDuration } from "../duration.ts";
import { DEFAULT_BOX_PATH, probeBox, statProbe, type BoxScripts, type TaskScript } from "../box/scripts.ts";

/** The image tag of a compose service a task builds: per task content (compose.ts). */
export function taskImageTag(digest: string, kind: "task" | "verifier" = "task"): string {
  const hex = digest.replace(/^sha256:/, "").slice(0, 16);
  return `evolve-${kind}:${hex}`;
}

// Bump when what goes into an environment's image changes in a way the key does not see (how evolve builds).
const ENV_KEY_VERSION = "evolve-env-v1";

const envKeys = new Map<string, Promise<string>>();

/**
 * The key of the image a build context makes: the context's files (paths, bytes, execute bits, as the task digest
 * counts them), the Dockerfile's path in it and its bytes, and the key's version. No build args, target or platform
 * are passed to a build, so nothing else changes the result; the task's name, its other files and its digest do not
 * enter, so tasks with identical environments share one image. Memoised per task digest and context (a stored task
 * never changes under its digest).
 */
export function envImageKey(taskDigest: string, taskDir: string, context: string, dockerfile = "Dockerfile"): Promise<string> {
  const memo = `${taskDigest}\0${relative(taskDir, context)}\0${dockerfile}`;
  let key = envKeys.get(memo);
  if (!key) {
    key = (async () => {
      const files = await digestFiles(await listTaskFiles(context));
      const df = await readFile(isAbsolute(dockerfile) ? dockerfile : join(context, dockerfile)).catch(() => Buffer.alloc(0));
      const h = createHash("sha256").update(`${ENV_KEY_VERSION}\0${dockerfile}\0${files}\0`).update(df);
      return `sha256:${h.digest("hex")}`;
    })();
    key.catch(() => envKeys.delete(memo));
    envKeys.set(memo, key);
  }
  return key;
}

/** The tag of an environment's image: `evolve-env:<key>`, the same for every task whose environment is the same. */
export function envImageTag(key: string): string {
  return `evolve-env:${key.replace(/^sha256:/, "").slice(0, 24)}`;
}

/**
 * Makes sure the image of a task's build context (environment/, or tests/ for a separate verifier) exists, keyed by
 * the context's content (envImageKey): tasks with identical environments build it once. Returns its tag and
 * whether this call built it. The image carries the home that built it, for `evolve gc --images`.
 */
export async function ensureEnvImage(
  engine: Engine,
  opts: { taskDigest: string; taskDir: string; context: string; home: string; force: boolean; job?: string; timeoutMs: number; log: (l: string) => void },
): Promise<{ tag: string; built: boolean }> {
  const key = await envImageKey(opts.taskDigest, opts.taskDir, opts.context);
  const tag = envImageTag(key);
  const r = await ensureBuilt(engine, { context: opts.context, tag, key, force: opts.force, job: opts.job, timeoutMs: opts.timeoutMs, log: opts.log, labels: { [LABEL_IMAGE_HOME]: opts.home } });
  return { tag, built: r.built };
}

// One ensure (check, then build if needed) per tag at a time in this process, registered before its first await:
// every trial that needs the image while it is being checked or built waits on that one instead of building again.
const pending = new Map<string, Promise<boolean>>();
// Tag and job pairs a forced build (`--force-build`) has already rebuilt: a job's trials rebuild once, not each.
const forced = new Set<string>();

/**
 * Makes sure the image `tag` exists and carries `key` as its LABEL_ENV_KEY: built when absent or stale (or forced,
 * once per `job`), bounded by `timeoutMs`. A build error is the task's own (EnvironmentBuildError) and carries
 * the last lines of the build log; every trial that waited on that build gets it too.
 */
export function ensureBuilt(
  engine: Engine,
  opts: { context: string; dockerfile?: string; tag: string; key: string; force: boolean; job?: string; timeoutMs: number; log: (l: string) => void; labels?: Record<string, string> },
): Promise<{ built: boolean }> {
  const shared = pending.get(opts.tag);
  if (shared) return shared.then(() => ({ built: false }));
  const forceKey = `${opts.tag}\0${opts.job ?? ""}`;
  const force = opts.force && !forced.has(forceKey);
  if (force) forced.add(forceKey);
  const p = (async () => {
    if (!force) {
      const labels = await engine.imageLabels(opts.tag);
      if (labels && labels[LABEL_ENV_KEY] === opts.key) return false;
    }
    const tail: string[] = [];
    await engine
      .build({
        context: opts.context,
        dockerfile: opts.dockerfile,
        tag: opts.tag,
        labels: { ...opts.labels, [LABEL_ENV_KEY]: opts.key, [LABEL_MANAGED]: "true" },
        timeoutMs: opts.timeoutMs,
        log: (line) => {
          tail.push(line);
          if (tail.length > 40) tail.shift();
          opts.log(line);
        },
      })
      .catch((e: unknown) => {
        // the builder's message already says which build failed and carries its tail (build.ts): it is the message
        // as it is, and only an error from before the builder ran (a refused ADD, no CLI) gets the tag and the tail
        const msg = String((e as Error)?.message ?? e);
        if (msg.startsWith(`building ${opts.tag} `)) throw new TrialFailure("EnvironmentBuildError", msg);
        throw new TrialFailure("EnvironmentBuildError", `building ${opts.tag} failed: ${msg}`, "INFRASTRUCTURE_ERROR", tail.join("\n"));
      });
    return true;
  })();
  pending.set(opts.tag, p);
  const done = () => {
    if (pending.get(opts.tag) === p) pending.delete(opts.tag);
  };
  p.then(done, done);
  return p.then((built) => ({ built }));
}

/** A pinned `docker_image` must already be on this machine: no registry is reachable from an air-gapped host. */
export async function requireImage(engine: Engine, ref: string): Promise<void> {
  if (!(await engine.imageExists(ref))) {
    throw new TrialFailure(
      "ImageNotFoundError",
      `the task's docker_image ${ref} is not present locally and cannot be pulled here; load it first (podman load / docker load)`,
    );
  }
}

/** CDI device names for a GPU request, or a refusal on a host without an NVIDIA CDI spec. */
export function gpuDevices(gpus: number | undefined): string[] {
  if (!gpus) return [];
  const specs = ["/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia.json", "/var/run/cdi/nvidia.yaml", "/var/run/cdi/nvidia.json"];
  if (!specs.some((p) => existsSync(p))) {
    throw new TrialFailure(
      "GpuUnavailableError",
      `the task needs ${gpus} GPU(s) but this host has none usable (no NVIDIA CDI spec in /etc/cdi or /var/run/cdi)`,
    );
  }
  return ["nvidia.com/gpu=all"];
}

/** The container spec for one box: the image's ENTRYPOINT kept, CMD replaced by a keep-alive, only the trial's own folders mounted. */
export function boxSpec(opts: {
  image: string;
  trialId: string;
  jobId: string;
  trialPath: string;
  /** "none", "default" or a trial network (network.ts decides). */
  network: string;
  env: EnvironmentConfig;
  literals: Record<string, string>;
  role: "agent" | "verifier";
  home: string;
  /** From network.ts: /etc/hosts entries (the egress proxy, the gateway relay, compose services), proxy variables, aliases. */
  extraHosts?: string[];
  netEnv?: Record<string, string>;
  aliases?: string[];
  /** The verifier runs in a box of its own (layout.ts boxMounts says what each box then mounts). */
  separateVerifier?: boolean;
  /** Caps for a box whose task declares none (config.toml `[box]`). */
  caps?: BoxDefaults;
  /**
   * The box's user namespace, as the engine applies it (Engine.boxUserns of `[box] userns`): box root is then an
   * unprivileged host id, and the trial's folders must be that id's (the trial runner chowns them).
   */
  userns?: IdMapping;
  /** The harness's read-only folders (a vendored agent CLI), for the agent's box only. */
  harnessMounts?: readonly HarnessMount[];
  /**
   * A compose task's `main` service's `working_dir` and `user`, as Docker Compose applies them: the box's working
   * folder (made at start when the image lacks it) and the user a plain exec runs as. Unset: the image's.
   */
  workdir?: string;
  user?: string;
}): ContainerSpec {
  const t = opts.trialPath;
  const mounts = boxMounts(t, opts.role, !!opts.separateVerifier, opts.harnessMounts);
  return {
    image: opts.image,
    cmd: ["sleep", "infinity"],
    env: { ...opts.literals, ...opts.netEnv },
    labels: { [LABEL_MANAGED]: "true", [LABEL_TRIAL]: opts.trialId, [LABEL_JOB]: opts.jobId, [LABEL_HOME]: opts.home, "dev.evolve.role": opts.role },
    mounts,
    network: opts.network,
    extraHosts: opts.extraHosts?.length ? opts.extraHosts : undefined,
    aliases: opts.aliases,
    cpus: opts.env.cpus ?? opts.caps?.cpus,
    memoryMb: opts.env.memory_mb ?? opts.caps?.memory_mb,
    pidsLimit: opts.caps?.pids_limit,
    devices: gpuDevices(opts.env.gpus),
    ...(opts.workdir ? { workdir: opts.workdir } : {}),
    ...(opts.user ? { user: opts.user } : {}),
    ...(opts.userns ? { userns: opts.userns } : {}),
  };
}

/**
 * Why a box could not start, as the trial records it: one rule for every box evolve starts (the agent's, a separate
 * verifier's, each compose service's). What the engine made in a user-namespaced box that could not be given to the
 * box's mapped root (`box_userns_failed`) is BoxUsernsError, with its fix: this host's setup, a retry cannot help.
 * Anything else is EnvironmentStartError. `what` names the box ("the container from IMAGE", "compose service web").
 */
export function startFailure(e: unknown, what: string): TrialFailure {
  if (e instanceof TrialFailure) return e;
  if (e instanceof EvolveError && e.code === "box_userns_failed") return new TrialFailure("BoxUsernsError", `${what}: ${e.message}; ${e.hint}`);
  return new TrialFailure("EnvironmentStartError", `${what} did not start: ${(e as Error).message}`);
}

/** `[environment.healthcheck]` with its defaults filled (model.ts). */
export interface Healthcheck {
  command: string;
  interval_sec: number;
  timeout_sec: number;
  start_period_sec: number;
  start_interval_sec: number;
  retries: number;
}

/**
 * Runs the healthcheck until it passes. Failures inside the start period do not count (spaced by
 * start_interval_sec); after it, `retries` consecutive failures spaced by interval_sec fail the trial. The check
 * sees none of [environment.env] on a single-container task.
 */
export async function awaitHealthy(engine: Engine, id: string, hc: Healthcheck, isCancelled: () => boolean): Promise<void> {
  const started = Date.now();
  let failures = 0;
  let last = "";
  for (;;) {
    if (isCancelled()) return;
    const r = await engine.exec(id, ["sh", "-c", hc.command], { user: BOX_ROOT, timeoutMs: hc.timeout_sec * 1000 });
    if (r.exitCode === 0 && !r.timedOut) return;
    last = r.timedOut ? `timed out after ${formatDuration(hc.timeout_sec * 1000)}` : `exit ${r.exitCode}: ${(r.stderr || r.stdout).trim().slice(-500)}`;
    const inStart = Date.now() - started < hc.start_period_sec * 1000;
    if (!inStart) failures++;
    if (failures >= Math.max(1, hc.retries)) {
      throw new TrialFailure("HealthcheckError", `the healthcheck \`${hc.command}\` failed ${failures} time(s) after the start period; last: ${last}`);
    }
    await new Promise((r) => setTimeout(r, (inStart ? hc.start_interval_sec : hc.interval_sec) * 1000));
  }
}

/**
 * Probes a live box for what runs its task scripts (scripts.ts probeBox). A probe that could not run at all in a box
 * whose entrypoint has died, or is dying, is that death (EnvironmentStartError), not a box without sh: the box is
 * checked, and asked once more after a moment, before "no sh" is believed.
 */
export async function probeLiveBox(
  engine: Engine,
  id: string,
  scripts: readonly TaskScript[],
  exec: (argv: string[]) => Promise<{ exitCode: number; stdout: string }>,
  known?: ContainerState,
): Promise<BoxScripts> {
  // the engine's stat answers without a process in the box when it finds every program (scripts.ts statProbe); a box
  // that is not running is left to the exec, whose failure says why. `known`: the state boot read a moment ago (its
  // PATH and that it ran); a box that died since is caught by the requireRunning that ends install
  const quick = async (programs: readonly string[]) => {
    const st = known ?? (await engine.inspect(id));
    return st?.running ? statProbe(programs, st.path ?? DEFAULT_BOX_PATH, (p) => engine.pathStat(id, p)) : undefined;
  };
  const first = await probeBox(scripts, exec, quick);
  if (!first.programs.noShell) return first;
  await requireRunning(engine, id, "while evolve probed the box");
  await new Promise((r) => setTimeout(r, 500));
  const again = await probeBox(scripts, exec);
  if (again.programs.noShell) await requireRunning(engine, id, "while evolve probed the box");
  return again;
}

/** Lines of the box's own output an exception about its entrypoint's exit carries. */
export const BOX_LOG_TAIL_LINES = 20;

/**
 * Fails the trial when the box's main process (the image's ENTRYPOINT) has exited: its service is gone. The
 * message says so with the exit code and the last lines the entrypoint printed (what box.log keeps), so a dead
 * service or a failed healthcheck is not an engine error with no reason.
 */
export async function requireRunning(engine: Engine, id: string, when: string): Promise<ContainerState> {
  const s = await engine.inspect(id);
  if (!s) throw new TrialFailure("EnvironmentStartError", `the container vanished ${when}`);
  if (!s.running) {
    let said = "";
    try {
      said = (await engine.logs(id, { tailLines: BOX_LOG_TAIL_LINES }))?.text.trimEnd() ?? "";
    } catch {
      // the reason stays the exit code alone
    }
    const last = said.split("\n").at(-1) ?? "";
    throw new TrialFailure(
      "EnvironmentStartError",
      said
        ? `the box's entrypoint exited with code ${s.exitCode ?? "unknown"} ${when}: ${last}\nthe last lines of box.log (its own output):\n${said}`
        : `the box's entrypoint exited with code ${s.exitCode ?? "unknown"} ${when}, printing nothing (box.log is empty)`,
    );
  }
  return s;
}

/** How long a box whose exec was killed may take to show as exited (Docker marks it a moment after its execs die). */
const DEATH_SETTLE_MS = 5000;

/**
 * requireRunning after an exec in the box ended with `exitCode`. An exec killed by SIGKILL (137, or -1 when the
 * engine lost it) may be the box's own death reaching it before the engine marks the box exited (Docker does so a
 * moment later): the box is then given a few seconds to show as exited before it is taken as alive. An exec
 * that timed out was killed by evolve: pass 0 for it.
 */
export async function requireRunningAfter(engine: Engine, id: string, exitCode: number, when: string): Promise<ContainerState> {
  if (exitCode === 137 || exitCode === -1) {
    const deadline = Date.now() + DEATH_SETTLE_MS;
    while (Date.now() < deadline && (await engine.inspect(id))?.running) await new Promise((r) => setTimeout(r, 200));
  }
  return requireRunning(engine, id, when);
}

/**
 * Removes every managed container and network carrying all of `labels` (a killed run's boxes of one job or one
 * trial), containers first; returns how many went. `job resume` and each new attempt of a trial call it, so
 * nothing a dead attempt left running writes into the folders the next attempt starts from.
 */
export async function removeLabelled(engine: Engine, labels: Record<string, string>): Promise<{ containers: number; networks: number }> {
  const boxes = await engine.list({ ...labels, [LABEL_MANAGED]: "" });
  await Promise.all(boxes.map((c) => engine.remove(c.id)));
  let networks = 0;
  for (const n of await engine.listNetworks({ ...labels, [LABEL_MANAGED]: "" })) {
    try {
      await engine.removeNetwork(n.name);
      networks++;
    } catch {
      // in use by something evolve does not manage: left for `evolve gc` and the user
    }
  }
  return { containers: boxes.length, networks };
}
