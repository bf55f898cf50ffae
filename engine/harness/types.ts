/**
 * The seam between the trial runner and an agent. The runner owns the box (image, boot, network, timeouts,
 * verifier); a harness only knows how to get its agent into the box (`install`) and how to run it on one
 * instruction (`run`). Built-ins are `oracle` and `nop`; installed CLIs (claude, codex, …) implement the same
 * interface in a later issue and register in engine/harness/index.ts.
 */
import type { Engine } from "../driver/types.ts";
import type { TraceEvent, TraceUpdate } from "../trace/events.ts";
import type { TaskScript } from "../box/scripts.ts";
import type { McpServer } from "./cli-types.ts";

/** What a harness is given for one run of one instruction (one step of a multi-step task). */
export interface HarnessContext {
  engine: Engine;
  containerId: string;
  /** The task folder on the host. */
  taskDir: string;
  /** Host folder holding this step's own files (`steps/<name>/` on a multi-step task, else the task root). */
  stepDir: string;
  instruction: string;
  /** `[agent] user` (name or uid); undefined = the image's USER. */
  user?: string;
  /** Where the agent works; undefined = the image's WORKDIR. */
  workdir?: string;
  /** The agent's environment: [environment.env] literals and resolved templates (secrets included). */
  env: Record<string, string>;
  /** `[solution].env` resolved, for the oracle only. */
  solutionEnv: Record<string, string>;
  model?: string;
  /** The agent's wall-clock budget for this run. */
  timeoutMs: number;
  /** Pass as the agent's timed exec's `onTimeout`: ends every process the agent started the moment it times out. */
  onTimeout?: () => Promise<void>;
  /** One line to the trial's system log. */
  log: (line: string) => void;
  /**
   * The sh command line that runs one of the task's scripts (one the harness listed in `prepare`), copied into the
   * agent's box at `boxPath`, with the interpreter the box has for it (box/scripts.ts: bash, else its `#!`, else sh).
   */
  scriptCommand: (script: TaskScript, boxPath: string) => string;
  /** The trial this run belongs to (a harness keeps per-trial state by it: one harness object serves many trials). */
  trialId?: string;
  /** The trial's `agent/` folder on the host: box-written, so read only through engine/box/fs.ts. */
  agentDir?: string;
  /** `--ak` options, validated in `checkRequest`. */
  options?: Readonly<Record<string, string>>;
  /** The gateway variables `env` carries for this phase (ANTHROPIC_/OPENAI_/…), when the agent calls a model. */
  gatewayEnv?: Record<string, string>;
  /** The trial's gateway credential for this phase (the value behind `gatewayEnv`'s keys). */
  gatewayKey?: string;
  /** The gateway's root URL as the box reaches it. */
  gatewayUrl?: string;
  /** Stores parsed trace events as they happen (the trial's trace; seq assigned by the store). */
  trace?: (updates: readonly TraceUpdate[]) => void;
}

/** What `Harness.prepare` and `checkRequest` know of the trial beyond the task. */
export interface HarnessTrial {
  trialId: string;
  /** evolve's home (vendored agents live under it). */
  home: string;
  /** `-m` as given (`provider/model`). */
  model?: string;
  /** `--ak` options. */
  options: Readonly<Record<string, string>>;
  /** The task's `[[environment.mcp_servers]]`. */
  mcpServers?: readonly McpServer[];
  /**
   * The trial's copy of the job's `.agent/` (host path, checked: plain files and folders only), when the job has one.
   * A harness that uses it mounts it read-only at BOX_AGENT_ROOT (engine/conductor/layout.ts) in the agent's box.
   */
  agentRoot?: string;
  /**
   * The job asks for evolve's own commands in the agent's box: a harness that honours it mounts the evolve binary
   * read-only at BOX_EVOLVE_BINARY and puts its folder on the agent's PATH (a meta-harness proposer's check_spec).
   */
  evolveTools?: boolean;
}

/** A host folder a harness needs in the agent's box (never the verifier's), mounted read-only. */
export interface HarnessMount {
  host: string;
  box: string;
}

/** What result.json's `agent_info` says of the agent that ran: its version, its model's provider. */
export interface HarnessInfo {
  version?: string;
  provider?: string;
}

/**
 * What a harness asks the trial to keep of its run (Harness.settle): the trial writes these records into `agent/`
 * itself at persist (trial/phases/agent.ts persistAgentRecords), so a harness names them and does no persistence.
 */
export interface HarnessRecords {
  /** The agent's home folder in the box (under /logs/agent), captured as `agent-home.json`; `leaveOut`: names under agent/ that are not the home's. */
  home?: { box: string; leaveOut: readonly string[] };
  /** The agent `trajectory.json` names (ATIF `agent`); the stored trace is written as ATIF when present. */
  trajectory?: { name: string; version: string | null; model: string };
}

/** What a harness's settle returns: result.json's `agent_info`, and what the trial keeps for it. */
export interface HarnessSettled {
  info: HarnessInfo;
  records?: HarnessRecords;
}

/** What a harness sees once the trial's boxes are all gone (persist): the place to write files into `agent/`. */
export interface HarnessSettle {
  trialId: string;
  /** The trial's `agent/` folder on the host; no box can write it any more, but what a box left there is still untrusted. */
  agentDir: string;
  /** The trial's stored trace, gateway usage events included, read as it is iterated (never held whole). */
  events(): Iterable<TraceEvent>;
  /** Writes `text` at `agent/<name>` through a fresh file (never through a link a box left). */
  writeAgentFile(name: string, text: string): Promise<void>;
  /** Replaces every secret value in `text` (the redaction the trial tree gets). */
  redact(text: string): string;
  log: (line: string) => void;
}

/** One step of the task, as `Harness.prepare` sees it: its name (null on a single-step task) and its host folder. */
export interface HarnessStep {
  name: string | null;
  dir: string;
}

/** How an agent run ended. A non-zero exit or a timeout is recorded, and the verifier still runs. */
export interface AgentOutcome {
  exitCode: number;
  timedOut: boolean;
}

/** One agent. */
export interface Harness {
  readonly name: string;
  /**
   * The agent calls a model: the trial takes a gateway lease and `ctx.env` carries the trial's agent credential
   * (ANTHROPIC_ and OPENAI_ variables pointing at the gateway). Built-ins call none.
   */
  readonly usesModel?: boolean;
  /**
   * Checked in the prepare phase, before anything is built: throws a TrialFailure when the task lacks what this agent
   * needs (the oracle without a reference solution), and names the task scripts it will run in the agent's box, whose
   * interpreters the runner checks once the box is up, with its own.
   */
  prepare?(task: { dir: string; steps: readonly HarnessStep[] }, trial: HarnessTrial): { scripts: TaskScript[]; mounts?: HarnessMount[] };
  /**
   * Refuses a model or `--ak` options this agent cannot take (an EvolveError with a stable code), before a job is
   * recorded; prepare asks again for a trial started some other way.
   */
  checkRequest?(req: { model?: string; options: Readonly<Record<string, string>> }): void;
  /** Puts the agent into the box (the `install` phase). Optional: built-ins need nothing. */
  install?(ctx: HarnessContext): Promise<void>;
  /** Runs the agent on `ctx.instruction` inside the box; its streams go under /logs/agent. */
  run(ctx: HarnessContext): Promise<AgentOutcome>;
  /**
   * Reads what the agent left (its streams and session files) once its phase has ended and every process it
   * started is gone, before pre_artifacts.sh, artifacts and the verifier: where a harness's parser turns its output
   * into trace events. A failure here is logged and does not change the trial's verdict.
   */
  afterAgent?(ctx: HarnessContext, outcome: AgentOutcome): Promise<void>;
  /**
   * Runs at persist, once every box of the trial is gone and the tree is redacted: says what the agent was and which
   * of its records the trial keeps (agent-home.json, trajectory.json). Also called for a trial that failed early; a
   * failure is logged only.
   */
  settle?(s: HarnessSettle): Promise<HarnessSettled | void>;
}
