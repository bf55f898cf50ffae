/**
 * What a trial will do, worked out from its task.toml and the request before anything runs: the plan the runner
 * walks (which phases, in which order, and how the run is scored), its steps with their timeouts and verifier
 * settings, and config.json (what ran). Pure: no engine, no files.
 *
 * Every kind of run is a {@link TrialPlan} walked by the one runner (run.ts TrialRun): a full trial is prepare →
 * build → boot → install → (agent → verify) per step; a regrade (regrade.ts) is prepare → build → boot (the kept
 * files or artifacts restored) → verify, no agent. The runner, not the plan, owns what every run shares: the
 * record and its transitions (lifecycle.ts), the fresh attempt, the trial's boxes and networks, interrupts and
 * stops, the verdict of a thrown failure (a full disk included), persist and its fallbacks. So a kind of run is
 * only its list of phases and cannot drift from the others in how it boots, records or settles.
 */
import { join } from "node:path";
import type { TrialRecord } from "../store/index.ts";
import { baselineNetwork, DEFAULT_AGENT_TIMEOUT_SEC, DEFAULT_VERIFIER_TIMEOUT_SEC, verifierMode, type TaskConfig } from "../task/model.ts";
import type { Verdict } from "./lifecycle.ts";
import type { StepResult, TrialConfigFile } from "./result.ts";
import type { MinReward } from "./steps.ts";
import type { Phase, TrialRequest } from "./types.ts";

/** What the scoring part of a plan settled: the verdict, and a multi-step task's per-step results. */
export interface Scored {
  verdict: Verdict;
  steps: StepResult[] | null;
}

/** One phase of a plan: run over the attempt's room `R`, recorded under its name (attempt_phase, phase_timings). */
export interface PlanPhase<R> {
  phase: Phase;
  run(room: R): Promise<void>;
}

/**
 * One kind of run, as the runner walks it over an attempt's room `R` (phases/room.ts): the prepare phase (the
 * runner starts the attempt fresh, then `prepare`, then opens the trial's network), then `phases` in order, then
 * `score`, which runs its own phases (agent, verify) through the room and gives the verdict; persist follows.
 */
export interface TrialPlan<R> {
  /** A full trial, or a regrade: the verifier alone re-scoring a settled trial. */
  kind: "trial" | "regrade";
  /** Fields the record of this kind carries from its first write (a regrade's `regrade_of`). */
  record: Omit<Partial<TrialRecord>, "status">;
  /** The record starts QUEUED whatever an earlier attempt left (a regrade), not in the status it was left in. */
  afresh: boolean;
  /** This kind's part of prepare: it reads the task (room.readTask) and writes config.json (room.writeConfig). */
  prepare(room: R): Promise<void>;
  /** The phases between prepare and scoring, in order. */
  phases: readonly PlanPhase<R>[];
  /** Runs the scoring phases and gives the verdict; a failure it throws is settled by the runner. */
  score(room: R): Promise<Scored>;
}

/** One step as the runner walks it; a single-step task is one unnamed step at the task root. */
export interface StepPlan {
  name: string | null;
  /** Host folder with the step's own files (instruction, solution, tests, workdir). */
  dir: string;
  /** The host folders the step's verifier copies to /tests, each laid over the last: the task's, then the step's own. */
  testsDirs: string[];
  agentTimeoutSec: number;
  verifierTimeoutSec: number;
  verifierEnv: Record<string, string>;
  minReward?: MinReward;
  healthcheck?: TaskConfig["environment"]["healthcheck"];
  artifacts: unknown[];
}

/** The steps of a task, timeouts multiplied (`--timeout-multiplier`); a step's own timeout beats the task's. */
export function stepPlans(cfg: TaskConfig, taskDir: string, multiplier: number): StepPlan[] {
  const m = multiplier || 1;
  const agentSec = (cfg.agent.timeout_sec ?? DEFAULT_AGENT_TIMEOUT_SEC) * m;
  const verSec = (cfg.verifier.timeout_sec ?? DEFAULT_VERIFIER_TIMEOUT_SEC) * m;
  if (!cfg.steps || cfg.steps.length === 0) {
    return [{ name: null, dir: taskDir, testsDirs: [join(taskDir, "tests")], agentTimeoutSec: agentSec, verifierTimeoutSec: verSec, verifierEnv: {}, artifacts: [] }];
  }
  return cfg.steps.map((s) => ({
    name: s.name,
    dir: join(taskDir, "steps", s.name),
    testsDirs: [join(taskDir, "tests"), join(taskDir, "steps", s.name, "tests")],
    agentTimeoutSec: s.agent.timeout_sec !== undefined ? s.agent.timeout_sec * m : agentSec,
    verifierTimeoutSec: s.verifier.timeout_sec !== undefined ? s.verifier.timeout_sec * m : verSec,
    verifierEnv: s.verifier.env,
    minReward: s.min_reward as MinReward | undefined,
    healthcheck: s.healthcheck,
    artifacts: s.artifacts,
  }));
}

/**
 * config.json: the trial's identity and settings (attached secrets by name only). Without `cfg` (the task could
 * not be read) the task's own settings are left empty.
 */
export function trialConfigFile(req: TrialRequest, cfg?: TaskConfig): TrialConfigFile {
  const m = req.timeoutMultiplier || 1;
  return {
    trial_name: req.trialId,
    job_id: req.jobId,
    task: { path: req.task.dir, name: req.task.name, digest: req.task.digest, source: req.task.source ?? null },
    agent: {
      name: req.agent.name,
      model_name: req.agent.model ?? null,
      ...(req.agent.kwargs && Object.keys(req.agent.kwargs).length > 0 ? { kwargs: req.agent.kwargs } : {}),
      ...(req.agent.root !== undefined ? { root: req.agent.root } : {}),
    },
    timeout_multiplier: cfg ? m : req.timeoutMultiplier,
    timeouts: cfg
      ? { agent_sec: (cfg.agent.timeout_sec ?? DEFAULT_AGENT_TIMEOUT_SEC) * m, verifier_sec: (cfg.verifier.timeout_sec ?? DEFAULT_VERIFIER_TIMEOUT_SEC) * m, build_sec: cfg.environment.build_timeout_sec }
      : { agent_sec: 0, verifier_sec: 0, build_sec: 0 },
    environment: cfg
      ? {
          force_build: !!req.forceBuild,
          network_mode: baselineNetwork(cfg.environment),
          verifier_mode: verifierMode(cfg.verifier),
          cpus: cfg.environment.cpus ?? null,
          memory_mb: cfg.environment.memory_mb ?? null,
          storage_mb: cfg.environment.storage_mb ?? null,
          gpus: cfg.environment.gpus ?? null,
        }
      : { force_build: !!req.forceBuild, network_mode: "", verifier_mode: "", cpus: null, memory_mb: null, storage_mb: null, gpus: null },
    secret_names: Object.keys(req.secrets).sort(),
    attempt: req.attempt ?? 1,
  };
}

/**
 * A regrade's config.json: the trial's identity and the task's settings as a full trial's, the agent named but
 * given no time (none runs), and the trial it re-scores.
 */
export function regradeConfigFile(req: TrialRequest, cfg: TaskConfig, origId: string): TrialConfigFile & { regrade_of: string } {
  const c = trialConfigFile(req, cfg);
  return { ...c, agent: { name: req.agent.name, model_name: req.agent.model ?? null }, timeouts: { ...c.timeouts, agent_sec: 0 }, regrade_of: origId };
}
