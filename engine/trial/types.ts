/**
 * The trial runner's vocabulary, shared by engine/trial (one trial) and engine/job (many). Statuses are
 * platform-trials.md's plus INTERRUPTED (outcome.ts); phases are the `attempt_phase` values a running trial reports.
 */
import type { Engine } from "../driver/types.ts";
import type { Store } from "../store/index.ts";
import type { TrialGateway } from "../gateway-host/model-gateway.ts";

// statuses live with the rest of how a trial ends (outcome.ts); re-exported for the runner's callers
export { SETTLED_STATUSES, type TrialStatus } from "./lifecycle.ts";
import type { TrialStatus } from "../outcome.ts";
import { PHASES } from "../store/records.ts";

/** The steps of one attempt, in order (the list is the store's, records.ts, so records check it). */
export { PHASES };
export type Phase = (typeof PHASES)[number];

/** The built-in agents; installed CLIs (claude, codex, …) plug in through the harness seam later. */
export type AgentName = "oracle" | "nop" | (string & {});

/** Everything needed to run one trial. Secret values live only in memory: never in the store or the trial tree. */
export interface TrialRequest {
  trialId: string;
  jobId: string;
  /** evolve's home (trial tree under <home>/trials/<id>/). */
  home: string;
  task: {
    /** Folder holding the task's files (a stored blob dir, or the user's folder for `run -p`). */
    dir: string;
    digest: string;
    name: string;
    /** Dataset `name@version` when run from a dataset. */
    source?: string;
  };
  /** `kwargs`: `--ak` options, checked against the harness before the job was recorded. */
  /** `root`: the job's `.agent/` (absolute host path), checked and copied into the trial in prepare. */
  /** `evolve_tools`: the evolve binary mounted in the agent's box, on its PATH (JobConfig's `agent.evolve_tools`). */
  agent: { name: AgentName; model?: string; kwargs?: Record<string, string>; root?: string; evolve_tools?: boolean };
  /** Multiplies agent and verifier timeouts (`--timeout-multiplier`). */
  timeoutMultiplier: number;
  /** Attached secrets by env name (`--secret NAME` reads NAME from evolve's own environment). */
  secrets: Record<string, string>;
  forceBuild?: boolean;
  /** Which attempt of this trial this is (1-based), for automatic INFRASTRUCTURE_ERROR retries. */
  attempt?: number;
  /** "name:ip" entries for every box's and the egress proxy's /etc/hosts: private mirrors on an air-gapped host, tests. */
  extraHosts?: string[];
  /** The job's per-trial agent spend cap, USD (`run --max-spend-usd`); a task's `[agent] max_spend_usd` may lower it. */
  maxSpendUsd?: number;
  /** `--ve` overrides for the verifier (REWARDKIT_JUDGE, REWARDKIT_MODEL only), laid over the task's verifier env. */
  verifierEnv?: Record<string, string>;
}

/** Live notifications from a running trial, for progress displays and `run --json`. */
export type TrialEvent =
  | { kind: "status"; trialId: string; status: TrialStatus }
  | { kind: "phase"; trialId: string; phase: Phase; at: string }
  | { kind: "log"; trialId: string; stream: "system" | "build"; line: string };

/** What a trial runner needs from its caller. */
export interface TrialDeps {
  engine: Engine;
  store: Store;
  /** The process's LLM gateway; a trial that calls a model takes a lease on it (one is made for the home if absent). */
  gateway?: TrialGateway;
  signal?: AbortSignal;
  onEvent?: (e: TrialEvent) => void;
}
