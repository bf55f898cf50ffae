/**
 * The one view a phase has of the attempt it runs in (run.ts's TrialRun implements it). A phase module
 * (build, agent, artifacts, verify, and a regrade's phases in regrade.ts) is a set of functions over a TrialRoom:
 * it reads the plan and what earlier phases settled, fills in what it settles itself (the image, the agent's box,
 * its workdir), and reaches boxes only through the helpers here, so that a box that died, an abort and the trial's
 * box bookkeeping are handled the one way run.ts handles them. Boxes, networks and the gateway lease stay run.ts's.
 */
import type { ContainerState, Engine, ExecOptions, ExecResult, IdMapping } from "../../driver/types.ts";
import type { TrialGatewayLease } from "../../gateway-host/model-gateway.ts";
import type { Harness, HarnessContext } from "../../harness/types.ts";
import type { TrialRecord } from "../../store/index.ts";
import type { TaskConfig } from "../../task/model.ts";
import type { ComposeTask } from "../compose.ts";
import type { NetPolicy, TrialNetwork, TrialPolicies } from "../network.ts";
import type { ExceptionType } from "../../outcome.ts";
import type { StepPlan } from "../plan.ts";
import type { TrialConfigFile } from "../result.ts";
import type { VerifierRun, VerifierVerdict } from "../recorder.ts";
import type { ExceptionRecord } from "../result.ts";
import type { BoxScripts, TaskScript } from "../../box/scripts.ts";
import type { SystemBaseline } from "../verifier-guard.ts";
import type { Phase, TrialDeps, TrialRequest } from "../types.ts";
import type { TrialTransition } from "../lifecycle.ts";

/** What a phase sees of the attempt: the request, what prepare settled, the attempt's boxes, and the helpers. */
export interface TrialRoom {
  // ---- the request and where the trial writes -----------------------------------------------------------------
  readonly req: TrialRequest;
  readonly deps: TrialDeps;
  readonly engine: Engine;
  /** The trial's folder on the host. */
  readonly path: string;

  // ---- settled by prepare -------------------------------------------------------------------------------------
  /** The task (readTask). */
  readonly cfg: TaskConfig;
  readonly harness: Harness;
  /** The task's literal (non-secret) environment values: every exec in the agent's box gets them. */
  readonly literals: Record<string, string>;
  /** The agent's environment, attached secrets resolved. */
  readonly agentEnv: Record<string, string>;
  /** `[solution] env`, for the oracle. */
  readonly solutionEnv: Record<string, string>;
  readonly policies: TrialPolicies;
  readonly compose?: ComposeTask;
  readonly net?: TrialNetwork;
  /** The trial's gateway access, when its agent calls a model or its verifier asks for a judge. */
  readonly lease?: TrialGatewayLease;
  /** The user namespace the trial's boxes run in, undefined when none. */
  readonly userns?: IdMapping;

  // ---- filled in as the attempt goes ----------------------------------------------------------------------------
  /** The image the agent's box runs (build). */
  image: string;
  /**
   * The agent's box (boot); "" once retired before a separate verifier. A regrade's shared verifier box stands in
   * for it: the box the kept files are laid back in, and taken again at persist.
   */
  agentBox: string;
  /** The agent's box's state as boot read it once the box ran (its main process's host pid: the agent's sweep). */
  agentBoxState?: ContainerState;
  /** The agent's working directory in its box (boot). */
  workdir: string | undefined;
  /** Set in boot by the combined root check: `[agent] user` is not in the image. */
  userMissing: boolean;
  /** What the agent's box can run of the task's scripts, probed once at boot (scripts.ts). */
  agentScripts?: BoxScripts;
  /** What evolve had changed under the verifier's system paths before the agent ran (verifier-guard.ts); shared mode. */
  systemBaseline?: SystemBaseline;
  /** The kept tree was taken already (before a separate verifier, when the agent's box went first). */
  keptTaken: boolean;
  /** The first agent failure of the trial (timeout, exit code, spend cap): the trial's exception if nothing worse. */
  agentException: ExceptionRecord | null;

  // ---- the recorder -------------------------------------------------------------------------------------------------
  /** Appends one line to trial.log (redacted). */
  log(line: string): void;
  /** An exception record, secrets redacted. */
  exc(type: ExceptionType, message: string, traceback?: string): ExceptionRecord;
  /** Writes the store record with `fields`; a status moves only by a transition of lifecycle.ts. */
  update(fields: (Omit<Partial<TrialRecord>, "status"> & { status?: never }) | TrialTransition): void;
  /** Throws CancelledFailure once the trial was stopped. */
  checkCancelled(): void;
  /** Runs the task's tests in `box` the one way every run does (recorder.ts). */
  runVerifier(box: string, o: VerifierRun): Promise<VerifierVerdict>;
  /** Passes one line of an image build to listeners and the trial's setup stream (setup.log). */
  buildLog(line: string): void;
  /** Runs `fn` as phase `p` of the attempt: recorded as it starts and ends, refused once the trial was stopped. */
  phase<T>(p: Phase, fn: () => Promise<T>): Promise<T>;

  // ---- prepare --------------------------------------------------------------------------------------------------
  /** Reads the task's task.toml into `cfg` (TaskInvalidError when it cannot), and its literal environment values. */
  readTask(): Promise<void>;
  /** Writes config.json (what ran); result.json repeats it. */
  writeConfig(file: TrialConfigFile): Promise<void>;

  // ---- boxes --------------------------------------------------------------------------------------------------------
  /** Creates and starts a box of the trial that mounts its folders, on `policy`'s networking. */
  startBox(image: string, policy: NetPolicy, env: TaskConfig["environment"], role: "agent" | "verifier"): Promise<string>;
  /** Keeps box `id`'s own output (its ENTRYPOINT's) as the trial's box stream, box.log, before the box goes. */
  keepBoxLog(id: string): Promise<void>;
  /** Counts a box someone else started (the task's compose services) as the trial's: it goes with the trial. */
  track(id: string): void;
  /** Halts box `id` now (no process of it left; removed after the trial settles, or now when it cannot be halted). */
  haltBox(id: string): Promise<void>;
  /** exec in box `id` through guard. */
  exec(id: string, cmd: string[], opts: ExecOptions): Promise<ExecResult>;
  /**
   * The sh command line that runs task script `script`, copied into the agent's box at `boxPath`, with the
   * interpreter the box has for it; throws ScriptInterpreterNotFoundError when it has none.
   */
  scriptCommand(script: TaskScript, boxPath: string): string;
  /** Runs an engine call on box `id`; when it fails, a dead box or an abort is the reason reported. */
  guard<T>(id: string, fn: () => Promise<T>): Promise<T>;

  // ---- the plan -----------------------------------------------------------------------------------------------------
  /** The task's steps (one unnamed step for a single-step task), timeouts multiplied. */
  stepPlans(): StepPlan[];
  /** What a harness sees of step `plan`, with `phaseEnv` laid over the agent's environment. */
  context(plan: StepPlan, phaseEnv?: Record<string, string>): HarnessContext;
  /** `[agent] user`, as the exec user, or undefined for the image's. */
  agentUser(): string | undefined;
  /** The gateway's address inside the trial's boxes. */
  gatewayUrl(): string;
}
