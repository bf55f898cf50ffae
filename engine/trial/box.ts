/**
 * The trial's container ("box"): its image, how it is created and started, and the checks it must pass before
 * any agent work (platform-tasks.md "environment/", "Healthcheck and the agent user").
 *
 * Network design (no-network, allowlist through the egress proxy, phase switches, the gateway relay): see
 * network.ts, which decides each box's networks and /etc/hosts entries; boxSpec only carries them. No host socket
 * is ever mounted into a box: the gateway is reached over the trial's gw network.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { LABEL_HOME, LABEL_JOB, LABEL_MANAGED, LABEL_TASK_DIGEST, LABEL_TRIAL, type ContainerSpec, type ContainerState, type Engine, type IdMapping } from "../driver/types.ts";
import type { BoxDefaults } from "../config.ts";
import type { EnvironmentConfig } from "../task/model.ts";
import { TrialFailure } from "./outcome.ts";
import { boxMounts } from "./layout.ts";

/** The image tag a task's environment/Dockerfile builds to: stable per task content. */
export function taskImageTag(digest: string, kind: "task" | "verifier" = "task"): string {
  const hex = digest.replace(/^sha256:/, "").slice(0, 16);
  return `evolve-${kind}:${hex}`;
}

// one build per tag at a time in this process: concurrent trials of one task share a single build
const building = new Map<string, Promise<void>>();

/**
 * Makes sure the image for a Dockerfile exists: built when absent (or when `force`), with the task digest as a
 * label, bounded by `timeoutMs`. A build error is the task's own (EnvironmentBuildError): its first line says
 * why (the failing step and its error line, build.ts buildFailureCause), the rest is the build log's last lines.
 */
export async function ensureBuilt(
  engine: Engine,
  opts: { context: string; dockerfile?: string; tag: string; digest: string; force: boolean; timeoutMs: number; log: (l: string) => void },
): Promise<{ built: boolean }> {
  const pending = building.get(opts.tag);
  if (pending) {
    await pending;
    if (!opts.force) return { built: false };
  }
  if (!opts.force) {
    const labels = await engine.imageLabels(opts.tag);
    if (labels && labels[LABEL_TASK_DIGEST] === opts.digest) return { built: false };
  }
  const tail: string[] = [];
  const p = engine
    .build({
      context: opts.context,
      dockerfile: opts.dockerfile,
      tag: opts.tag,
      labels: { [LABEL_TASK_DIGEST]: opts.digest, [LABEL_MANAGED]: "true" },
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
  building.set(opts.tag, p);
  try {
    await p;
  } finally {
    if (building.get(opts.tag) === p) building.delete(opts.tag);
  }
  return { built: true };
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
}): ContainerSpec {
  const t = opts.trialPath;
  const mounts = boxMounts(t, opts.role, !!opts.separateVerifier);
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
    ...(opts.userns ? { userns: opts.userns } : {}),
  };
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
    const r = await engine.exec(id, ["sh", "-c", hc.command], { user: "root", timeoutMs: hc.timeout_sec * 1000 });
    if (r.exitCode === 0 && !r.timedOut) return;
    last = r.timedOut ? `timed out after ${hc.timeout_sec} s` : `exit ${r.exitCode}: ${(r.stderr || r.stdout).trim().slice(-500)}`;
    const inStart = Date.now() - started < hc.start_period_sec * 1000;
    if (!inStart) failures++;
    if (failures >= Math.max(1, hc.retries)) {
      throw new TrialFailure("HealthcheckError", `the healthcheck \`${hc.command}\` failed ${failures} time(s) after the start period; last: ${last}`);
    }
    await new Promise((r) => setTimeout(r, (inStart ? hc.start_interval_sec : hc.interval_sec) * 1000));
  }
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
