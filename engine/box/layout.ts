/**
 * Where a trial's things live: the trial folder on the host (platform-trial-outputs.md, Harbor's trial layout) and
 * the paths inside a box (Harbor's `/logs/*`, `/tests`, `/solution`). Every other module asks here instead of
 * spelling a path, so the two views cannot drift apart.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Mount } from "../driver/types.ts";

/** Paths inside a box. */
export const BOX = {
  /** The agent's streams and sessions. */
  agentLogs: "/logs/agent",
  /** What the verifier writes: reward.json / reward.txt, test-stdout.txt. */
  verifierLogs: "/logs/verifier",
  /** Collected artifacts, each at `/logs/artifacts<source path>`. */
  artifacts: "/logs/artifacts",
  /** The task's tests/ (the verifier), copied in for the verify phase. */
  tests: "/tests",
  /** The task's solution/ (the oracle). */
  solution: "/solution",
  /** evolve's own scratch files (pre_artifacts.sh). */
  scratch: "/tmp/.evolve",
} as const;

/**
 * The user every one of evolve's own commands in a box runs as: uid 0 by number, never the name `root`, which the
 * engine looks up in the box's /etc/passwd and a minimal image (scratch, busybox, distroless) does not have.
 */
export const BOX_ROOT = "0";

/** Names inside a trial folder. */
export const TRIAL = {
  agent: "agent",
  verifier: "verifier",
  artifacts: "artifacts",
  steps: "steps",
  log: "trial.log",
  /** The setup stream: the image builds' whole output. */
  setup: "setup.log",
  /** The box stream: the agent's box's own output (its ENTRYPOINT's stdout and stderr), bounded. */
  box: "box.log",
  config: "config.json",
  result: "result.json",
  exception: "exception.txt",
  evolve: "evolve.json",
  /** The kept tree: what the run changed in the box, and its manifest. */
  kept: "fs",
  keptManifest: "fs-changes.json",
  /** The verifier's log, inside `verifier/`. */
  testStdout: "test-stdout.txt",
  /** The parsed trace (engine/trace/store.ts): host-only, beside agent/, never in a folder a box mounts. */
  trace: "trace-parsed.jsonl",
  /** The trial's copy of the job's `.agent/` (`--agent-root`), host-written, mounted read-only by a harness that uses it. */
  agentRoot: "agent-root",
  /** What persist did not keep as a box wrote it (too large, too deep, unreadable, past the deadline), and why. */
  persistSkipped: "persist-skipped.json",
} as const;

/** The folders a box mounts, in the box and in the trial folder. */
export const MOUNTED = [
  { name: TRIAL.agent, box: BOX.agentLogs },
  { name: TRIAL.verifier, box: BOX.verifierLogs },
  { name: TRIAL.artifacts, box: BOX.artifacts },
] as const;

/** What one attempt writes into the trial folder; a new attempt starts without any of it (trial.log is kept). */
export const ATTEMPT_OUTPUTS = [TRIAL.agent, TRIAL.verifier, TRIAL.artifacts, TRIAL.steps, TRIAL.kept, TRIAL.keptManifest, TRIAL.result, TRIAL.exception, TRIAL.evolve, TRIAL.setup, TRIAL.box, TRIAL.trace, TRIAL.agentRoot, TRIAL.persistSkipped] as const;

/** A trial folder's paths. */
export function trialPaths(dir: string) {
  return {
    root: dir,
    agent: join(dir, TRIAL.agent),
    verifier: join(dir, TRIAL.verifier),
    artifacts: join(dir, TRIAL.artifacts),
    steps: join(dir, TRIAL.steps),
    /** A finished step's archived outputs (`steps/<name>/agent`, `…/verifier`). */
    step: (name: string) => join(dir, TRIAL.steps, name),
    log: join(dir, TRIAL.log),
    setup: join(dir, TRIAL.setup),
    box: join(dir, TRIAL.box),
    config: join(dir, TRIAL.config),
    result: join(dir, TRIAL.result),
    exception: join(dir, TRIAL.exception),
    evolve: join(dir, TRIAL.evolve),
    agentRoot: join(dir, TRIAL.agentRoot),
    persistSkipped: join(dir, TRIAL.persistSkipped),
    testStdout: join(dir, TRIAL.verifier, TRIAL.testStdout),
  };
}

/**
 * The names a trial's agent stream (the harness's stdout under agent/) may have, in the order they are looked for:
 * `<agent>.txt` (a built-in or shipped CLI), then `stdout.log` (a registered agent's default).
 */
export function agentStreamNames(agent: string): string[] {
  return [`${agent}.txt`, "stdout.log"];
}

/**
 * The file holding the agent stream in `agentDir` (a trial's or an archived step's agent/): the first of
 * agentStreamNames that exists, else the first `*.txt` by name (an agent renamed since), else `<agent>.txt` where
 * it would be. Existence only: reading it is fs.ts's (the box wrote it).
 */
export function agentStreamFile(agentDir: string, agent: string): string {
  for (const n of agentStreamNames(agent)) if (existsSync(join(agentDir, n))) return join(agentDir, n);
  const txt = existsSync(agentDir) ? readdirSync(agentDir).filter((n) => n.endsWith(".txt")).sort() : [];
  return join(agentDir, txt.length ? txt[0] : `${agent}.txt`);
}

/**
 * The steps a multi-step trial has archived (`steps/<name>/`, one per finished step), in `order` (the record's
 * `step_results`: the order they ran), then any other folder there by name; [] for a single-step trial. Only
 * folders count: the steps folder is host-written, and a link there is never followed.
 */
export function archivedSteps(dir: string, order: readonly string[] = []): string[] {
  let names: string[];
  try {
    names = readdirSync(join(dir, TRIAL.steps), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return [];
  }
  const known = order.filter((n, i) => names.includes(n) && order.indexOf(n) === i);
  return [...known, ...names.filter((n) => !known.includes(n)).sort()];
}

/**
 * The trial folders a box mounts. A separate verifier runs in a box of its own: the agent's box then never sees
 * `/logs/verifier` (what the verifier writes is out of the agent's reach), and the verifier's box sees the agent's
 * logs read-only. `harness` is the harness's own mounts (its HarnessMount list).
 */
export function boxMounts(trialDir: string, role: "agent" | "verifier", separateVerifier: boolean, harness: readonly { host: string; box: string }[] = []): Mount[] {
  const p = trialPaths(trialDir);
  // the harness's own folders (a vendored agent CLI) are the agent's box's alone, and read-only
  const own = role === "agent" ? harness.map((m) => ({ host: m.host, container: m.box, readOnly: true })) : [];
  if (!separateVerifier) return [...MOUNTED.map((m) => ({ host: join(trialDir, m.name), container: m.box })), ...own];
  return role === "agent"
    ? [{ host: p.agent, container: BOX.agentLogs }, { host: p.artifacts, container: BOX.artifacts }, ...own]
    : [{ host: p.agent, container: BOX.agentLogs, readOnly: true }, { host: p.verifier, container: BOX.verifierLogs }, { host: p.artifacts, container: BOX.artifacts }];
}

/** Where the verifier's script is in its box. */
export const TEST_SCRIPT = `${BOX.tests}/test.sh`;

/**
 * The verifier's sh command line in its box: test.sh, run by `runTest` (its interpreter and path, scripts.ts), with
 * its output as the verifier stream.
 */
export function verifyCommand(runTest: string): string {
  return `${runTest} > ${BOX.verifierLogs}/${TRIAL.testStdout} 2>&1`;
}

/** Where an artifact from `src` (absolute, no quote, no `..`; see run.ts) is kept in the box. */
export const artifactPath = (src: string) => `${BOX.artifacts}${src}`;

/** Copies the artifact at `src` into /logs/artifacts (exit 1 when it is missing). */
export function collectArtifactCommand(src: string): string {
  return `[ -e '${src}' ] && mkdir -p "$(dirname '${artifactPath(src)}')" && cp -a '${src}' '${artifactPath(src)}'`;
}

/** Puts a collected artifact back at its source path (a separate verifier, a regrade); absent is fine. */
export function restoreArtifactCommand(src: string): string {
  return `[ ! -e '${artifactPath(src)}' ] || { mkdir -p "$(dirname '${src}')" && rm -rf '${src}' && cp -a '${artifactPath(src)}' '${src}'; }`;
}

/**
 * The source paths of a task's (or a step's) `artifacts` entries that can be collected: absolute, no quote, no
 * `..`, trailing slashes dropped. The validator refuses the others; a stored task is checked again here.
 */
export function artifactSources(entries: readonly unknown[]): string[] {
  const out: string[] = [];
  for (const a of entries) {
    const src = typeof a === "string" ? a : (a as { source?: unknown })?.source;
    if (typeof src === "string" && src.startsWith("/") && !src.includes("'") && !src.split("/").includes("..")) out.push(src.replace(/\/+$/, ""));
  }
  return out;
}
