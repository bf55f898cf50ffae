/**
 * One trial, start to finish: the runner walks a plan (plan.ts), prepare → build → boot → install → agent → verify
 * → persist for a full trial (platform-trials.md), prepare → build → boot → verify → persist for a regrade
 * (regrade.ts). Every phase is recorded in the store as it starts and ends; the trial always settles in exactly one
 * status and always leaves its tree (config.json, result.json, exception.txt when failed) under trialDir(home, id).
 * See lifecycle.ts for which failure settles which status. This file walks the plan and owns the trial's boxes,
 * networks and gateway lease; what build, boot, install, agent and verify do is in phases/.
 */
import { existsSync, readFileSync } from "node:fs";
import { chmod, chown, mkdir, readFile, writeFile } from "node:fs/promises";
import { removeTree } from "./sweep.ts";
import { join } from "node:path";
import type { ContainerState, Engine, ExecOptions, ExecResult, IdMapping } from "../driver/types.ts";
import { loadConfig, type BoxDefaults } from "../config.ts";
import { firstLine } from "../errors.ts";
import { getHarness, harnessNames } from "../harness/index.ts";
import type { Harness, HarnessContext, HarnessInfo, HarnessMount, HarnessSettle } from "../harness/types.ts";
import type { TraceUpdate } from "../trace/events.ts";
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { open, rename } from "node:fs/promises";
import type { TrialRecord } from "../store/index.ts";
import { parseTaskToml, verifierMode, type TaskConfig } from "../task/model.ts";
import { awaitHealthy, boxSpec, gpuDevices, probeLiveBox, removeLabelled, requireRunning, startFailure } from "./box.ts";
import { keepChangedFiles } from "./changes.ts";
import { LABEL_HOME, LABEL_TRIAL } from "../driver/types.ts";
import { resolveAgentEnv, resolveVerifierEnv } from "./env.ts";
import { GatewayConfigError, type BudgetRefusal, type TrialGatewayLease } from "../gateway-host/model-gateway.ts";
import { homeGateway, spendRecord } from "./spend.ts";
import { zeroLane } from "../../gateway/meter.ts";
import { ComposeTask } from "./compose.ts";
import { TrialNetwork, trialPolicies, type NetPolicy, type TrialPolicies } from "./network.ts";
import { CancelledFailure, TrialFailure, type ExceptionType } from "../outcome.ts";
import { isStopped, stoppedByGateway, thrownVerdict, toRunning, toScoring, unverifiedVerdict, verifiedVerdict, type Verdict } from "./lifecycle.ts";
import { appendGatewayUsage, openTraceWriter, readTrace, type TraceWriter } from "../trace/store.ts";
import { ATTEMPT_OUTPUTS, BOX_ROOT, MOUNTED, TRIAL, trialPaths } from "../box/layout.ts";
import { agentRootProblem, snapshotAgentRoot } from "../conductor/instructions.ts";
import { preArtifactsScript, setupScript, testScript, type BoxScripts, type TaskScript } from "../box/scripts.ts";
import { writeEvolveJson, writeJson, writeResult, type AgentUsage, type ExceptionRecord, type StepResult, type TrialConfigFile } from "./result.ts";
import type { RewardMap } from "./reward.ts";
import { regradePlan } from "./regrade.ts";
import { stepPlans, trialConfigFile, type Scored, type StepPlan, type TrialPlan } from "./plan.ts";
import { aggregateStepRewards, passesMinReward } from "./steps.ts";
import { watchStopRequest } from "./stop.ts";
import { now, TrialRecorder } from "./recorder.ts";
import type { TrialDeps, TrialRequest } from "./types.ts";
import { agentStep, persistAgentRecords } from "./phases/agent.ts";
import { archiveStep, collectArtifacts } from "./phases/artifacts.ts";
import { bootAgentBox, buildImage, installAgent } from "./phases/build.ts";
import type { TrialRoom } from "./phases/room.ts";
import { verifyStep } from "./phases/verify.ts";
import { takeSystemBaseline, type SystemBaseline } from "./verifier-guard.ts";


/** The most of the agent's box's own output box.log keeps (the tail). */
const BOX_LOG_LIMIT = 1024 * 1024;

// container removals run after the trial returns; callers that exit (tests, `evolve run`) await them here
const removals = new Set<Promise<void>>();

/** Waits for every container removal started by finished trials of this process. */
export async function settleRemovals(): Promise<void> {
  while (removals.size > 0) await Promise.allSettled([...removals]);
}

/** Runs one trial and returns its settled store record. Never throws for a trial failure: that is a status. */
export async function runTrial(req: TrialRequest, deps: TrialDeps): Promise<TrialRecord> {
  // `evolve trial stop` from any process marks the record; the watch turns that into this trial's abort (stop.ts)
  const watch = watchStopRequest(deps.store, req.trialId, deps.signal);
  try {
    const d = { ...deps, signal: watch.signal };
    // a regrade's record names the trial it re-scores (job/actions.ts): the same runner walks its plan instead
    const regradeOf = deps.store.getTrial(req.trialId)?.regrade_of;
    return await new TrialRun(req, d, regradeOf ? regradePlan(regradeOf) : TrialRun.full).run();
  } finally {
    watch.dispose();
  }
}


/**
 * One attempt of a trial: it walks the attempt's plan and owns the trial's boxes, networks and gateway lease; what
 * each phase does lives in phases/ (and regrade.ts), which sees the attempt through the TrialRoom this class is.
 */
class TrialRun extends TrialRecorder implements TrialRoom {
  /** A full trial: the agent's box built, booted and installed, then each step's agent and verifier. */
  static readonly full: TrialPlan<TrialRun> = {
    kind: "trial",
    record: {},
    afresh: false,
    prepare: (r) => r.prepareAgent(),
    phases: [
      { phase: "build", run: buildImage },
      {
        phase: "boot",
        run: async (r) => {
          r.agentBoxState = await bootAgentBox(r);
          await r.probeAgentBox(r.agentBoxState);
        },
      },
      {
        phase: "install",
        run: async (r) => {
          await installAgent(r);
          await r.takeSystemBaseline();
        },
      },
    ],
    score: (r) => r.runSteps(),
  };

  readonly engine: Engine;
  cfg!: TaskConfig;
  harness!: Harness;
  private readonly boxes = new Set<string>();
  /** The agent's and the verifier's boxes: the ones that mount trial folders. */
  private readonly mountedBoxes = new Set<string>();
  agentBox = "";
  agentBoxState: ContainerState | undefined;
  keptTaken = false;
  systemBaseline: SystemBaseline | undefined;
  workdir: string | undefined;
  agentEnv: Record<string, string> = {};
  solutionEnv: Record<string, string> = {};
  literals: Record<string, string> = {};
  image = "";
  private configFile!: TrialConfigFile;
  agentException: ExceptionRecord | null = null;
  userMissing = false;
  agentScripts?: BoxScripts;
  /** The task scripts the agent's harness runs in its box (the oracle's solve.sh), from its prepare. */
  private harnessScripts: TaskScript[] = [];
  /** The trace's writer while the agent runs (opened at its first event). */
  private traceWriter?: TraceWriter;
  /** The harness's read-only folders for the agent's box (a vendored CLI), from its prepare. */
  private harnessMounts: HarnessMount[] = [];
  net?: TrialNetwork;
  compose?: ComposeTask;
  policies!: TrialPolicies;
  /** config.toml `[box]`: caps for boxes whose task declares none. */
  private boxCaps?: BoxDefaults;
  /** The user namespace the trial's boxes run in (freshAttempt), undefined when none. */
  userns?: IdMapping;
  lease?: TrialGatewayLease;
  /** box.log was written (the agent's box's output is kept once, before the box goes). */
  private boxLogKept = false;
  /** A budget above the trial refused a call: the trial stops and settles BUDGET. */
  private refused?: BudgetRefusal;
  /** Why the agent was stopped for a model the gateway could not serve: the trial settles ModelUnavailableError. */
  private unavailable?: string;

  constructor(
    req: TrialRequest,
    deps: TrialDeps,
    private readonly plan: TrialPlan<TrialRun>,
  ) {
    super(req, deps, plan.record, plan.afresh);
    this.engine = deps.engine;
  }

  async run(): Promise<TrialRecord> {
    const onAbort = () => this.killBoxes();
    this.deps.signal?.addEventListener("abort", onAbort);
    const exc = (t: ExceptionType, m: string, tb?: string) => this.exc(t, m, tb);
    let verdict: Verdict;
    let steps: StepResult[] | null = null;
    try {
      this.update(toRunning());
      await this.phase("prepare", () => this.prepare());
      for (const p of this.plan.phases) await this.phase(p.phase, () => p.run(this));
      ({ verdict, steps } = await this.plan.score(this));
    } catch (e) {
      // a cancel settles CANCELLED; an interrupted runner (Ctrl-C, SIGTERM) leaves INTERRUPTED for `job resume`
      verdict = thrownVerdict(e, exc, this.deps.signal);
      this.log(`trial failed: ${verdict.exception!.type}: ${verdict.exception!.message.split("\n")[0]}`);
    } finally {
      this.deps.signal?.removeEventListener("abort", onAbort);
    }
    // a budget refusal, or a model the agent never reached: whatever the stopped agent or verifier left is no verdict
    verdict = stoppedByGateway(verdict, { refused: this.refused?.message, unavailable: this.unavailable }, exc);
    if (verdict.exception === null && this.agentException) verdict = { ...verdict, exception: this.agentException };
    return this.persist(verdict, steps);
  }

  // ---- prepare, and the order of each step's phases (the phases themselves are in phases/) -------------------

  /**
   * The prepare phase of every plan: the attempt starts fresh, the plan settles its own part (reads the task, writes
   * config.json), and the trial's network is made for the policies the task declares.
   */
  private async prepare(): Promise<void> {
    await this.freshAttempt();
    await this.plan.prepare(this);
    const cfg = this.cfg;
    this.policies = trialPolicies(cfg);
    this.net = new TrialNetwork(this.engine, {
      trialId: this.req.trialId,
      jobId: this.req.jobId,
      home: this.req.home,
      policies: this.policies,
      compose: this.compose !== undefined,
      extraHosts: this.req.extraHosts,
      log: (l) => this.log(l),
      track: (id) => this.boxes.add(id),
      ...(this.lease ? { gateway: { socketDir: this.lease.socketDir } } : {}),
    });
    // refuse before building anything: no GPU appears later in this trial
    gpuDevices(cfg.environment.gpus);
    if (cfg.environment.storage_mb !== undefined) {
      this.log(`warning: storage_mb = ${cfg.environment.storage_mb} is not enforced by this engine; the box gets the engine's default disk`);
    }
  }

  /** Reads the task's task.toml into `cfg`, and its literal environment values (every box's exec gets them). */
  async readTask(): Promise<void> {
    try {
      this.cfg = parseTaskToml(await readFile(join(this.req.task.dir, "task.toml"), "utf8"));
    } catch (e) {
      throw new TrialFailure("TaskInvalidError", `cannot read the task at ${this.req.task.dir}: ${(e as Error).message}`);
    }
    this.literals = resolveAgentEnv(this.cfg.environment.env, {}).literals;
  }

  /** Writes config.json; result.json repeats it, and evolve.json is written beside it. */
  async writeConfig(file: TrialConfigFile): Promise<void> {
    this.configFile = file;
    await writeJson(trialPaths(this.path).config, file);
  }

  /** A full trial's part of prepare: the task, the harness, the agent's environment and the gateway lease. */
  private async prepareAgent(): Promise<void> {
    await this.readTask();
    const cfg = this.cfg;
    const harness = getHarness(this.req.agent.name);
    if (!harness) throw new TrialFailure("UnknownAgentError", `no agent named ${this.req.agent.name} (known agents: ${harnessNames().join(", ")})`);
    this.harness = harness;
    await this.writeConfig(trialConfigFile(this.req, cfg));
    // what the agent needs of the task (the oracle: a reference solution) is refused before anything is built
    const agentRoot = this.req.agent.root !== undefined ? this.copyAgentRoot(this.req.agent.root) : undefined;
    const prepared = harness.prepare?.(
      { dir: this.req.task.dir, steps: this.stepPlans() },
      {
        trialId: this.req.trialId, home: this.req.home, model: this.req.agent.model, options: this.req.agent.kwargs ?? {}, mcpServers: cfg.environment.mcp_servers,
        ...(agentRoot !== undefined ? { agentRoot } : {}),
        ...(this.req.agent.evolve_tools === true ? { evolveTools: true } : {}),
      },
    );
    this.harnessScripts = prepared?.scripts ?? [];
    this.harnessMounts = prepared?.mounts ?? [];

    const env = resolveAgentEnv(cfg.environment.env, this.req.secrets);
    const sol = resolveAgentEnv(cfg.solution.env, this.req.secrets);
    const missing = [...new Set([...env.missing, ...sol.missing])];
    if (missing.length > 0) {
      throw new TrialFailure(
        "SecretNotAttached",
        `secret_not_attached: the task needs ${missing.map((m) => `\${${m}}`).join(", ")}; attach with ${missing.map((m) => `--secret ${m}`).join(" ")}`,
      );
    }
    this.agentEnv = env.all;
    this.solutionEnv = sol.all;
    this.compose = ComposeTask.load(this.req.task.dir, this.agentEnv, cfg.environment.env);
    const judgeAsked = this.stepPlans().some((p) => resolveVerifierEnv({ ...cfg.verifier.env, ...p.verifierEnv }).judge.length > 0);
    if (harness.usesModel || judgeAsked) {
      const gw = this.deps.gateway ?? homeGateway(this.req.home, this.deps.store);
      try {
        this.lease = await gw.lease({
          trialId: this.req.trialId,
          jobId: this.req.jobId,
          capUsd: gw.trialCap(cfg.agent.max_spend_usd, this.req.maxSpendUsd),
          onSpend: (t) => this.update(spendRecord(t, false)),
        });
      } catch (e) {
        if (e instanceof GatewayConfigError) throw new TrialFailure("GatewayConfigError", e.message);
        throw e;
      }
      this.lease.onBudgetRefusal((r) => {
        this.refused = r;
        this.log(`gateway refused a call: ${r.message}; stopping the trial`);
        this.killBoxes();
      });
      this.lease.onModelUnavailable((why) => {
        this.unavailable = why;
        this.log(`${why}; stopping the trial`);
        this.killBoxes();
      });
    }
  }

  /**
   * Every attempt (the first, an automatic retry, `job resume`, `trial retry`) starts from a fresh box and empty
   * output folders: whatever a killed or failed attempt left — a verifier's reward file, a box still running — can
   * never be read as this attempt's. The trial folder is the owner's alone (0700): a file a box made set-id or a
   * device node is out of other host users' reach. In a user namespace (`[box] userns`) the three folders the
   * boxes mount are the box root's host id's, so box root writes them without being host root.
   */
  private async freshAttempt(): Promise<void> {
    await mkdir(this.path, { recursive: true, mode: 0o700 });
    await chmod(this.path, 0o700);
    this.boxCaps = loadConfig(this.req.home).box;
    this.userns = this.boxCaps.userns ? await this.engine.boxUserns(this.boxCaps.userns) : undefined;
    const left = await removeLabelled(this.engine, { [LABEL_TRIAL]: this.req.trialId, [LABEL_HOME]: this.req.home });
    const stale: string[] = [];
    for (const name of ATTEMPT_OUTPUTS) {
      if (existsSync(join(this.path, name))) stale.push(name);
      // by descriptors: a tree a box left deeper than PATH_MAX must not make every later attempt fail
      await removeTree(join(this.path, name));
    }
    for (const m of MOUNTED) {
      await mkdir(join(this.path, m.name), { mode: 0o755 });
      // box root is the mapped host id: the folders it writes (and chowns to the agent user) must be its own
      if (this.userns) await this.giveToBoxRoot(join(this.path, m.name), this.userns);
    }
    const removed = left.containers + left.networks > 0 ? `; removed ${left.containers} box(es) and ${left.networks} network(s) an earlier attempt left` : "";
    const cleared = stale.length > 0 ? `; cleared ${stale.join(", ")}` : "";
    const ns = this.userns ? `; boxes run in a user namespace (box root is host uid ${this.userns.hostId})` : "";
    this.log(`attempt ${this.req.attempt ?? 1} starts: ${this.attemptReason()}${removed}${cleared}${ns}`);
  }

  /**
   * The job's `.agent/` checked (plain files and folders only, readable, bounded) and copied into the trial folder,
   * before anything is built: the copy is what the harness mounts, and stays with the trial as the record of what ran.
   */
  private copyAgentRoot(root: string): string {
    const bad = agentRootProblem(root);
    if (bad) throw new TrialFailure("AgentRootInvalidError", `the job's .agent/ cannot be used: ${bad}`);
    const dest = trialPaths(this.path).agentRoot;
    try {
      snapshotAgentRoot(root, dest);
    } catch (e) {
      throw new TrialFailure("AgentRootInvalidError", `the job's .agent/ could not be copied into the trial: ${firstLine(e)}`);
    }
    this.log(`agent root: ${root} copied to ${TRIAL.agentRoot}/`);
    return dest;
  }

  /** Chowns a trial folder to the box's root; a host that will not let evolve do it is told how to go on. */
  private async giveToBoxRoot(dir: string, map: IdMapping): Promise<void> {
    try {
      await chown(dir, map.hostId, map.hostId);
    } catch (e) {
      throw new TrialFailure(
        "BoxUsernsError",
        `cannot give ${dir} to the box's root (host uid ${map.hostId}): ${firstLine(e)}; run evolve as root beside rootful podman, or set [box] userns = false in config.toml`,
      );
    }
  }

  /**
   * Probes the agent's box once for every task script that will run in it (scripts.ts): the harness's, each step's
   * setup.sh, pre_artifacts.sh and, when the verifier shares the box, each step's test.sh. One that nothing in the
   * box can run fails the trial now, before any agent work, instead of as a missing reward file later.
   */
  private async probeAgentBox(state: ContainerState): Promise<void> {
    const dir = this.req.task.dir;
    const shared = verifierMode(this.cfg.verifier) !== "separate";
    const scripts = [...this.harnessScripts];
    for (const plan of this.stepPlans()) {
      if (plan.name !== null) scripts.push(setupScript(dir, plan.dir));
      if (shared) scripts.push(testScript(dir, plan.testsDirs));
    }
    scripts.push(preArtifactsScript(dir));
    const present = scripts.filter((s, i) => existsSync(s.host) && scripts.findIndex((t) => t.host === s.host) === i);
    this.agentScripts = await probeLiveBox(this.engine, this.agentBox, present, (argv) => this.exec(this.agentBox, argv, { user: BOX_ROOT, timeoutMs: 30_000 }), state);
    this.agentScripts.check();
    const note = this.agentScripts.fallbackNote();
    if (note) this.log(`task scripts: ${note}`);
  }

  /**
   * What boot and install changed under the shared verifier's system paths, before any agent work: the agent's own
   * changes there are told from evolve's by it (verifier-guard.ts). A box whose changes the engine cannot list gets
   * none, and its shared verifier gives no verdict.
   */
  private async takeSystemBaseline(): Promise<void> {
    if (verifierMode(this.cfg.verifier) === "separate") return;
    try {
      this.systemBaseline = await takeSystemBaseline(this.engine, this.agentBox, this.workdir);
    } catch (e) {
      this.log(`could not list the box's changes before the agent ran: ${firstLine(e)}`);
    }
  }

  /** A full trial's scoring: each step's agent and verify phases, a step's min_reward gating the next. */
  private async runSteps(): Promise<Scored> {
    const plans = this.stepPlans();
    const multi = plans[0].name !== null;
    const results: StepResult[] = [];
    for (const [i, plan] of plans.entries()) {
      const step: StepResult = { name: plan.name ?? "main", rewards: null, reward: null, exception: null };
      results.push(step);
      if (multi) this.log(`step ${i + 1}/${plans.length}: ${plan.name}`);
      if (plan.healthcheck && multi) {
        const hc = plan.healthcheck;
        await this.guard(this.agentBox, () => awaitHealthy(this.engine, this.agentBox, hc, () => !!this.deps.signal?.aborted));
      }
      await this.phase("agent", async () => {
        await agentStep(this, plan, step);
        await collectArtifacts(this, plan);
      });
      this.update(toScoring());
      const verdict = await this.phase("verify", () => verifyStep(this, plan, step));
      if (multi) await archiveStep(this.path, plan.name!);
      if (!verdict.ok) {
        this.markFailed("verify");
        return {
          verdict: unverifiedVerdict(multi ? aggregateStepRewards(results.map((s) => s.rewards), this.cfg.multi_step_reward_strategy) : null, step.exception, verdict.status),
          steps: multi ? results : null,
        };
      }
      if (multi && i < plans.length - 1) {
        const gate = passesMinReward(plan.minReward, step.rewards);
        if (!gate.pass) {
          this.log(`stopping after step ${plan.name}: ${gate.reason}`);
          break;
        }
        this.update(toRunning());
      }
    }
    const rewards = multi ? aggregateStepRewards(results.map((s) => s.rewards), this.cfg.multi_step_reward_strategy ?? "mean") : results[0].rewards;
    return { verdict: verifiedVerdict(rewards, null), steps: multi ? results : null };
  }

  private async persist(verdict: Verdict, steps: StepResult[] | null): Promise<TrialRecord> {
    const { status, rewards, exception } = verdict;
    const span = this.beginPersist();
    this.closeTrace();
    // the kept tree (`trial files` after the run, `trial regrade`): what the run changed, copied out before the box goes
    if (this.agentBox && !this.keptTaken && !isStopped(status)) await keepChangedFiles(this.engine, this.agentBox, this.path, (l) => this.log(l));
    if (this.agentBox) await this.keepBoxLog(this.agentBox);
    // every box that mounts a trial folder has no process left before evolve writes into those folders (box/fs.ts);
    // removing them (their storage torn down, ~0.1 s each on podman) waits until the record has settled
    const boxesGone = await this.haltMountedBoxes();
    let rec: TrialRecord;
    try {
      const spent = await this.settleSpend();
      const finished = now();
      rec = await this.finishPersist(span, verdict, {
        boxesGone,
        finishedAt: finished,
        fields: { step_results: steps?.map((s) => ({ ...s })), ...spent.fields },
        write: async (reward) => {
          // without a config.json (the task could not be read) the outcome says only what is known
          const config = this.configFile ?? trialConfigFile(this.req);
          const agentInfo = boxesGone ? await this.settleHarness() : undefined;
          await writeResult(this.path, this.outcome({ config, status, rewards, reward, exception, finishedAt: finished, stepResults: steps, agentUsage: spent.agentUsage, agentInfo }));
          if (!this.configFile) return;
          await writeEvolveJson(this.path, { ...spent.fields, retry_of: this.rec.retry_of, regrade_of: this.rec.regrade_of });
        },
      });
      this.lease?.forget();
    } finally {
      // every box and network of the trial, once the record has settled; settleRemovals awaits them (the job
      // runner does before it exits)
      this.scheduleRemoval();
    }
    return rec;
  }

  /**
   * The harness's own records at persist (every box gone, the tree redacted): its home capture and trajectory, as
   * its settle names them, written through fresh files. A failure is the harness's and is only logged.
   */
  private async settleHarness(): Promise<HarnessInfo | undefined> {
    if (!this.harness?.settle) return undefined;
    const agentDir = trialPaths(this.path).agent;
    const st: HarnessSettle = {
      trialId: this.req.trialId,
      agentDir,
      events: () => readTrace(this.req.home, this.req.trialId),
      writeAgentFile: (name, text) => writeFresh(join(agentDir, name), text),
      redact: (t) => this.redact(t),
      log: (l) => this.log(l),
    };
    try {
      const settled = await this.harness.settle(st);
      if (settled?.records) await persistAgentRecords(st, this.harness.name, settled.records);
      return settled?.info;
    } catch (e) {
      this.log(`${this.harness.name}: settling its records failed: ${firstLine(e)}`);
      return undefined;
    }
  }

  /** Stores parsed trace events as the agent runs, secrets redacted (an agent may print what it was given). */
  private storeTrace(updates: readonly TraceUpdate[]): void {
    if (updates.length === 0) return;
    try {
      const values = this.redactionValues();
      const safe = values.length === 0 ? updates : updates.map((u) => JSON.parse(this.redact(JSON.stringify(u))) as TraceUpdate);
      this.traceWriter ??= openTraceWriter(this.req.home, this.req.trialId);
      this.traceWriter.append(safe);
    } catch (e) {
      this.log(`could not store trace events: ${firstLine(e)}`);
    }
  }

  /** Closes the agent's trace writer: the gateway's usage events are the next (and last) writer's. */
  private closeTrace(): void {
    try {
      this.traceWriter?.close();
    } catch (e) {
      this.log(`could not close the trace: ${firstLine(e)}`);
    }
    this.traceWriter = undefined;
  }

  /**
   * Ends the gateway lease and settles the trial's spend: the gateway's usage events follow the harness's in the
   * trace, and the totals become the record's final spend. A built-in agent calls no model, so its zero is measured.
   */
  private async settleSpend(): Promise<{ fields: ReturnType<typeof spendRecord> | Record<string, never>; agentUsage?: AgentUsage }> {
    if (!this.lease) {
      if (this.harness && !this.harness.usesModel) {
        return { fields: spendRecord({ agent: zeroLane(), judge: zeroLane() }, true) };
      }
      return { fields: {} };
    }
    const totals = await this.lease.end();
    this.closeTrace();
    if (totals.events.length > 0) {
      try {
        appendGatewayUsage(this.req.home, this.req.trialId, totals.events);
      } catch (e) {
        this.log(`could not store the gateway's usage events: ${(e as Error).message}`);
      }
    }
    const fields = spendRecord(totals, true);
    const t = fields.tokens;
    const agentUsage: AgentUsage | undefined = this.harness?.usesModel
      ? { n_input_tokens: t.prompt, n_cache_tokens: t.cached_read, n_output_tokens: t.output, cost_usd: fields.spend.final_usd }
      : undefined;
    return { fields, agentUsage };
  }

  // ---- the room's helpers (phases/room.ts) --------------------------------------------------------------------

  /**
   * Creates and starts a box that mounts the trial's folders; it is the trial's until the end (halted by haltBox or
   * persist, removed once the record has settled).
   */
  async startBox(image: string, policy: NetPolicy, env: TaskConfig["environment"], role: "agent" | "verifier"): Promise<string> {
    const net = await this.net!.boxNetworking(role, policy);
    const network = net.network;
    const spec = boxSpec({
      image, trialId: this.req.trialId, jobId: this.req.jobId, trialPath: this.path, network, env, literals: this.literals, role, home: this.req.home,
      extraHosts: net.extraHosts, netEnv: { ...(role === "agent" ? this.compose?.main.environment : undefined), ...net.env }, aliases: net.aliases,
      separateVerifier: verifierMode(this.cfg.verifier) === "separate", caps: this.boxCaps, userns: this.userns,
      harnessMounts: this.harnessMounts,
      // compose's `main` is the agent's box: its working_dir and user hold there as under Docker Compose
      ...(role === "agent" ? { workdir: this.compose?.main.workdir, user: this.compose?.main.user } : {}),
    });
    let id: string;
    try {
      id = await this.engine.create(spec);
    } catch (e) {
      throw new TrialFailure("EnvironmentStartError", `cannot create the container from ${image}: ${(e as Error).message}`);
    }
    this.boxes.add(id);
    this.mountedBoxes.add(id);
    if (this.deps.signal?.aborted) throw new CancelledFailure();
    try {
      await this.engine.start(id);
    } catch (e) {
      throw startFailure(e, `the container from ${image}`);
    }
    this.log(`${role} box ${id.slice(0, 12)} started from ${image} (network ${network})`);
    this.net!.created(id, policy, network, role);
    await this.net!.attach(id, policy, `${role} box boot`);
    return id;
  }

  /** exec that turns "the box died under us" into the entrypoint's exit code, and an abort into CancelledFailure. */
  exec(id: string, cmd: string[], opts: ExecOptions): Promise<ExecResult> {
    return this.guard(id, () => this.engine.exec(id, cmd, opts));
  }

  /** Runs an engine call on box `id`; when it fails, a dead box or an abort is the reason reported. */
  async guard<T>(id: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      this.checkCancelled();
      await requireRunning(this.engine, id, `during the ${this.rec.attempt_phase ?? "trial's"} phase`);
      throw e;
    }
  }

  /** The command that runs a task script in the agent's box, with the interpreter its boot probe found for it. */
  scriptCommand(script: TaskScript, boxPath: string): string {
    if (!this.agentScripts) throw new Error(`${script.name} is run before the agent's box was probed`);
    return this.agentScripts.command(script, boxPath);
  }

  /**
   * Keeps the agent's box's own output (its ENTRYPOINT's stdout and stderr: the services the image starts) as the
   * trial's box stream, box.log, before the box goes: the last BOX_LOG_LIMIT bytes, with a first line saying so
   * when more was printed. A box the engine no longer has leaves none.
   */
  async keepBoxLog(id: string): Promise<void> {
    if (this.boxLogKept) return;
    try {
      const l = await this.engine.logs(id, { limitBytes: BOX_LOG_LIMIT });
      if (!l) return;
      const cut = l.truncated ? `evolve: the box printed more than ${BOX_LOG_LIMIT / 1024 / 1024} MiB; box.log keeps the last of it\n` : "";
      await writeFile(trialPaths(this.path).box, this.redact(cut + l.text));
      this.boxLogKept = true;
    } catch (e) {
      this.log(`could not keep the box's own output (box.log): ${firstLine(e)}`);
    }
  }

  /** A box of the trial started elsewhere (a compose service): removed with the trial's. */
  track(id: string): void {
    this.boxes.add(id);
  }

  /**
   * Halts a box of the trial before the trial ends (the agent's, before a separate verifier): not one of its
   * processes is left. It is removed with the trial's other boxes once the record has settled (its storage torn
   * down, ~0.1 s on podman, off the critical path); a box the engine cannot halt is removed now instead.
   */
  async haltBox(id: string): Promise<void> {
    try {
      await this.engine.halt(id);
    } catch (e) {
      this.log(`could not halt box ${id.slice(0, 12)} (${firstLine(e)}); removing it`);
      await this.engine.remove(id);
      this.boxes.delete(id);
    }
    this.mountedBoxes.delete(id);
  }

  /** What the harness sees of step `plan`: the agent's box, user, workdir and environment (`phaseEnv` laid over). */
  context(plan: StepPlan, phaseEnv: Record<string, string> = {}): HarnessContext {
    return {
      engine: this.engine,
      containerId: this.agentBox,
      taskDir: this.req.task.dir,
      stepDir: plan.dir,
      instruction: this.instruction(plan),
      user: this.agentUser(),
      workdir: this.workdir,
      env: { ...this.agentEnv, ...phaseEnv },
      solutionEnv: this.solutionEnv,
      model: this.req.agent.model,
      timeoutMs: plan.agentTimeoutSec * 1000,
      log: (l) => this.log(l),
      scriptCommand: (script, boxPath) => this.scriptCommand(script, boxPath),
      trialId: this.req.trialId,
      agentDir: trialPaths(this.path).agent,
      options: this.req.agent.kwargs ?? {},
      trace: (u) => this.storeTrace(u),
    };
  }

  /** The gateway's address inside the trial's boxes (the relay network.ts gives every box of a leased trial). */
  gatewayUrl(): string {
    const url = this.net?.gatewayUrl();
    if (!url) throw new TrialFailure("NetworkSetupError", "the trial's boxes have no route to the gateway");
    return url;
  }

  private instruction(plan: StepPlan): string {
    const p = join(plan.dir, "instruction.md");
    return existsSync(p) ? readFileSync(p, "utf8") : "";
  }

  /** `[agent] user` as the exec user; undefined runs as the image's user. */
  agentUser(): string | undefined {
    const u = this.cfg.agent.user;
    return u === undefined ? undefined : String(u);
  }

  /** The task's steps, timeouts multiplied. */
  stepPlans(): StepPlan[] {
    return stepPlans(this.cfg, this.req.task.dir, this.req.timeoutMultiplier);
  }


  /**
   * Halts (and awaits) the boxes that mount the trial's folders: not one of their processes is left to write there;
   * false when one may still be alive. A box the engine cannot halt is removed instead. They, the task's other
   * services, the relay and the proxy (which mount nothing) are removed by scheduleRemoval.
   */
  private async haltMountedBoxes(): Promise<boolean> {
    let ok = true;
    for (const id of [...this.mountedBoxes]) {
      try {
        await this.engine.halt(id).catch(async (e: unknown) => {
          this.log(`could not halt box ${id.slice(0, 12)} (${firstLine(e)}); removing it`);
          await this.engine.remove(id);
          this.boxes.delete(id);
        });
        this.mountedBoxes.delete(id);
      } catch (e) {
        ok = false;
        this.log(`could not remove box ${id.slice(0, 12)}: ${(e as Error).message}`);
      }
    }
    return ok;
  }

  /** Every value redaction replaces: attached secrets, the gateway and judge credentials, the provider keys. */
  protected override redactionValues(): string[] {
    return [...this.secretValues, ...(this.lease?.secretValues() ?? [])];
  }

  private killBoxes(): void {
    for (const id of this.boxes) void this.engine.remove(id).catch(() => {});
  }

  private scheduleRemoval(): void {
    const ids = [...this.boxes];
    const net = this.net;
    if (ids.length === 0) {
      if (net) {
        const p: Promise<void> = net.removeNetworks().then(() => void removals.delete(p));
        removals.add(p);
      }
      return;
    }
    const p: Promise<void> = Promise.all(
      ids.map((id) =>
        this.engine.remove(id).catch((e: unknown) => {
          // labels let `evolve gc` find it later
          this.log(`could not remove container ${id.slice(0, 12)}: ${(e as Error).message}; \`evolve gc\` will`);
        }),
      ),
    )
      .then(() => net?.removeNetworks())
      .then(() => {
        removals.delete(p);
      });
    removals.add(p);
  }

}

/**
 * Writes `text` at `path` in a folder a box once wrote: through a fresh O_EXCL, no-follow file renamed into place, so
 * a link the box left at the name (or at a temporary name) is replaced, never written through.
 */
async function writeFresh(path: string, text: string): Promise<void> {
  const tmp = `${path}.evolve-${randomBytes(6).toString("hex")}`;
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    await fh.writeFile(text);
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}
