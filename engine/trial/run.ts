/**
 * One trial, start to finish: prepare → build → boot → install → agent → verify → persist (platform-trials.md).
 * Every phase is recorded in the store as it starts and ends; the trial always settles in exactly one status and
 * always leaves its tree (config.json, result.json, exception.txt when failed) under trialDir(home, id).
 * See errors.ts for which failure settles which status.
 */
import { existsSync, readFileSync } from "node:fs";
import { chmod, chown, copyFile, mkdir, mkdtemp, readdir, readFile, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Engine, IdMapping } from "../driver/types.ts";
import { loadConfig, type BoxDefaults } from "../config.ts";
import { firstLine, isDiskFull } from "../errors.ts";
import { getHarness, harnessNames } from "../harness/index.ts";
import type { Harness, HarnessContext } from "../harness/types.ts";
import type { TrialRecord } from "../store/index.ts";
import { baselineNetwork, DEFAULT_AGENT_TIMEOUT_SEC, DEFAULT_VERIFIER_TIMEOUT_SEC, parseTaskToml, verifierMode, type TaskConfig } from "../task/model.ts";
import { awaitHealthy, boxSpec, ensureEnvImage, gpuDevices, removeLabelled, requireImage, requireRunning } from "./box.ts";
import { keepChangedFiles } from "./changes.ts";
import { LABEL_HOME, LABEL_TRIAL } from "../driver/types.ts";
import { judgeFamily, resolveAgentEnv, resolveVerifierEnv, withJudgeEnv } from "./env.ts";
import { GatewayConfigError, type BudgetRefusal, type GatewayLease } from "../gateway/model-gateway.ts";
import { homeGateway, spendRecord } from "./spend.ts";
import { zeroLane } from "../../gateway/meter.ts";
import { ComposeTask } from "./compose.ts";
import { TrialNetwork, trialPolicies, type NetPolicy, type TrialPolicies } from "./network.ts";
import { CancelledFailure, TrialFailure } from "./outcome.ts";
import { ATTEMPT_OUTPUTS, BOX, TRIAL, collectArtifactCommand, MOUNTED, restoreArtifactCommand, trialPaths, VERIFY_COMMAND, artifactSources } from "./layout.ts";
import { pruneEmptyDirs, redactTree, writeEvolveJson, writeJson, writeResult, type AgentUsage, type ExceptionRecord, type StepResult, type TimeSpan, type TrialConfigFile } from "./result.ts";
import { primaryReward, readRewards, verifierTail, type RewardMap } from "./reward.ts";
import { runRegrade } from "./regrade.ts";
import { stepPlans, trialConfigFile, type StepPlan } from "./plan.ts";
import { aggregateStepRewards, passesMinReward, type MinReward } from "./steps.ts";
import { watchStopRequest } from "./stop.ts";
import { killNewProcs, snapshotProcs, type ProcSnapshot } from "./procs.ts";
import { defuseTree, emptyBoxDir } from "./boxfs.ts";
import { now, TrialRecorder } from "./recorder.ts";
import type { Phase, TrialDeps, TrialRequest, TrialStatus } from "./types.ts";


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
    const regradeOf = deps.store.getTrial(req.trialId)?.regrade_of;
    if (regradeOf) return await runRegrade(req, d, regradeOf);
    return await new TrialRun(req, d).run();
  } finally {
    watch.dispose();
  }
}


class TrialRun extends TrialRecorder {
  private readonly engine: Engine;
  private cfg!: TaskConfig;
  private harness!: Harness;
  private readonly boxes = new Set<string>();
  /** The agent's and the verifier's boxes: the ones that mount trial folders. */
  private readonly mountedBoxes = new Set<string>();
  private agentBox = "";
  /** The kept tree was taken already (before a separate verifier, when the agent's box went first). */
  private keptTaken = false;
  private workdir: string | undefined;
  private agentEnv: Record<string, string> = {};
  private solutionEnv: Record<string, string> = {};
  private literals: Record<string, string> = {};
  private image = "";
  private configFile!: TrialConfigFile;
  private agentException: ExceptionRecord | null = null;
  /** Set in boot by the combined root check: `[agent] user` is not in the image. */
  private userMissing = false;
  private net?: TrialNetwork;
  private compose?: ComposeTask;
  private policies!: TrialPolicies;
  /** config.toml `[box]`: caps for boxes whose task declares none. */
  private boxCaps?: BoxDefaults;
  /** The user namespace the trial's boxes run in (freshAttempt), undefined when none. */
  private userns?: IdMapping;
  /** The trial's gateway access, when its agent calls a model or its verifier asks for a judge. */
  private lease?: GatewayLease;
  /** A budget above the trial refused a call: the trial stops and settles BUDGET. */
  private refused?: BudgetRefusal;

  constructor(req: TrialRequest, deps: TrialDeps) {
    super(req, deps);
    this.engine = deps.engine;
  }

  async run(): Promise<TrialRecord> {
    const onAbort = () => this.killBoxes();
    this.deps.signal?.addEventListener("abort", onAbort);
    let status: TrialStatus = "SCORED";
    let rewards: RewardMap | null = null;
    let exception: ExceptionRecord | null = null;
    let steps: StepResult[] | null = null;
    try {
      this.update({ status: "RUNNING" });
      await this.phase("prepare", () => this.prepare());
      await this.phase("build", () => this.build());
      await this.phase("boot", () => this.boot());
      await this.phase("install", () => this.install());
      const out = await this.runSteps();
      ({ status, rewards, exception, steps } = out);
    } catch (e) {
      exception = this.toException(e);
      status = e instanceof TrialFailure ? e.status : "INFRASTRUCTURE_ERROR";
      if (this.deps.signal?.aborted) {
        status = "CANCELLED";
        exception = this.toException(new CancelledFailure());
      }
      this.log(`trial failed: ${exception.type}: ${exception.message.split("\n")[0]}`);
    } finally {
      this.deps.signal?.removeEventListener("abort", onAbort);
    }
    if (this.refused && status !== "CANCELLED") {
      // whatever the stopped agent or verifier left behind is not a verdict: the budget ended the trial
      status = "BUDGET";
      rewards = null;
      exception = this.exc("ApiUsageLimitError", this.refused.message);
    }
    if (exception === null && this.agentException) exception = this.agentException;
    return this.persist(status, rewards, exception, steps);
  }

  // ---- phases ------------------------------------------------------------------------------------------------

  private async prepare(): Promise<void> {
    await this.freshAttempt();
    let text: string;
    try {
      text = await readFile(join(this.req.task.dir, "task.toml"), "utf8");
      this.cfg = parseTaskToml(text);
    } catch (e) {
      throw new TrialFailure("TaskInvalidError", `cannot read the task at ${this.req.task.dir}: ${(e as Error).message}`);
    }
    const cfg = this.cfg;
    const harness = getHarness(this.req.agent.name);
    if (!harness) throw new TrialFailure("UnknownAgentError", `no agent named ${this.req.agent.name} (known agents: ${harnessNames().join(", ")})`);
    this.harness = harness;
    this.configFile = this.makeConfig();
    await writeJson(trialPaths(this.path).config, this.configFile);

    const env = resolveAgentEnv(cfg.environment.env, this.req.secrets);
    const sol = resolveAgentEnv(cfg.solution.env, this.req.secrets);
    const missing = [...new Set([...env.missing, ...sol.missing])];
    if (missing.length > 0) {
      throw new TrialFailure(
        "SecretNotAttached",
        `secret_not_attached: the task needs ${missing.map((m) => `\${${m}}`).join(", ")}; attach with ${missing.map((m) => `--secret ${m}`).join(" ")}`,
      );
    }
    this.literals = env.literals;
    this.agentEnv = env.all;
    this.solutionEnv = sol.all;
    this.policies = trialPolicies(cfg);
    this.compose = ComposeTask.load(this.req.task.dir, this.agentEnv);
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
    }
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
      await rm(join(this.path, name), { recursive: true, force: true });
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

  private async build(): Promise<void> {
    const env = this.cfg.environment;
    const context = join(this.req.task.dir, "environment");
    if (this.compose) {
      const mainFromCompose = !env.docker_image && !existsSync(join(context, "Dockerfile"));
      await this.compose.build(this.engine, {
        digest: this.req.task.digest, force: !!this.req.forceBuild, timeoutMs: env.build_timeout_sec * 1000, mainFromCompose,
        log: (line) => this.deps.onEvent?.({ kind: "log", trialId: this.req.trialId, stream: "build", line }),
      });
      if (mainFromCompose) {
        this.image = this.compose.mainImage!;
        return;
      }
    }
    if (env.docker_image) {
      await requireImage(this.engine, env.docker_image);
      this.image = env.docker_image;
      return;
    }
    if (!existsSync(join(context, "Dockerfile"))) {
      throw new TrialFailure("TaskInvalidError", "the task has no environment/Dockerfile, no docker_image and no image for its compose service main");
    }
    const r = await ensureEnvImage(this.engine, {
      taskDigest: this.req.task.digest,
      taskDir: this.req.task.dir,
      context,
      home: this.req.home,
      force: !!this.req.forceBuild,
      job: this.req.jobId,
      timeoutMs: env.build_timeout_sec * 1000,
      log: (line) => this.deps.onEvent?.({ kind: "log", trialId: this.req.trialId, stream: "build", line }),
    });
    this.log(r.built ? `built image ${r.tag}` : `image ${r.tag} is cached`);
    this.image = r.tag;
  }

  private async boot(): Promise<void> {
    const cfg = this.cfg;
    if (this.compose) {
      await this.compose.start(this.engine, this.net!, { trialId: this.req.trialId, jobId: this.req.jobId, home: this.req.home, userns: this.userns, track: (id) => this.boxes.add(id), log: (l) => this.log(l) });
    }
    this.agentBox = await this.startBox(this.image, this.policies.baseline, cfg.environment, "agent");
    if (cfg.environment.healthcheck) {
      await awaitHealthy(this.engine, this.agentBox, cfg.environment.healthcheck, () => !!this.deps.signal?.aborted);
      this.checkCancelled();
    }
    const state = await requireRunning(this.engine, this.agentBox, "before the agent started");
    // Every exec spawns a runtime process (~0.2 s on podman), so the image's WORKDIR comes from inspect and the
    // workdir and agent-user checks share one exec; a missing user still fails in install, before any agent work.
    const wd = cfg.environment.workdir;
    const user = this.agentUser();
    this.workdir = wd || state.workdir || "/";
    if (wd || user !== undefined) {
      // the agent's log folders are the agent user's own, never world-writable
      const check = `if [ -n "$1" ]; then mkdir -p "$1"; fi; if [ -n "$2" ]; then if id -u "$2" >/dev/null 2>&1; then chown "$2" ${BOX.agentLogs} ${BOX.artifacts}; else echo evolve-no-user; fi; fi`;
      const r = await this.exec(this.agentBox, ["sh", "-c", check, "sh", wd ?? "", user ?? ""], { user: "root" });
      this.userMissing = user !== undefined && (r.exitCode !== 0 || r.stdout.includes("evolve-no-user"));
    }
  }

  private async install(): Promise<void> {
    const user = this.agentUser();
    if (user !== undefined) {
      if (this.userMissing) {
        await requireRunning(this.engine, this.agentBox, "before the agent started");
        throw new TrialFailure("AgentUserNotFoundError", `[agent] user ${user} does not exist in the image (add it in the Dockerfile, e.g. RUN useradd -m ${user})`);
      }
    }
    await this.harness.install?.(this.context(this.stepPlans()[0]));
    await requireRunning(this.engine, this.agentBox, "before the agent started");
  }

  private async runSteps(): Promise<{ status: TrialStatus; rewards: RewardMap | null; exception: ExceptionRecord | null; steps: StepResult[] | null }> {
    const plans = this.stepPlans();
    const multi = plans[0].name !== null;
    const results: StepResult[] = [];
    for (const [i, plan] of plans.entries()) {
      const step: StepResult = { name: plan.name ?? "main", rewards: null, reward: null, exception: null };
      results.push(step);
      if (multi) this.log(`step ${i + 1}/${plans.length}: ${plan.name}`);
      if (plan.healthcheck && multi) {
        await awaitHealthy(this.engine, this.agentBox, plan.healthcheck, () => !!this.deps.signal?.aborted);
      }
      await this.phase("agent", () => this.agentStep(plan, step));
      this.update({ status: "SCORING" });
      const verdict = await this.phase("verify", () => this.verifyStep(plan, step));
      if (multi) await this.archiveStep(plan.name!);
      if (!verdict.ok) {
        return {
          status: "SCORING_ERROR",
          rewards: multi ? aggregateStepRewards(results.map((s) => s.rewards), this.cfg.multi_step_reward_strategy) : null,
          exception: step.exception,
          steps: multi ? results : null,
        };
      }
      if (multi && i < plans.length - 1) {
        const gate = passesMinReward(plan.minReward, step.rewards);
        if (!gate.pass) {
          this.log(`stopping after step ${plan.name}: ${gate.reason}`);
          break;
        }
        this.update({ status: "RUNNING" });
      }
    }
    const rewards = multi ? aggregateStepRewards(results.map((s) => s.rewards), this.cfg.multi_step_reward_strategy ?? "mean") : results[0].rewards;
    return { status: rewards ? "SCORED" : "SCORING_ERROR", rewards, exception: null, steps: multi ? results : null };
  }

  private async agentStep(plan: StepPlan, step: StepResult): Promise<void> {
    this.update({ status: "RUNNING" });
    const started = now();
    const box = this.agentBox;
    await this.net!.enter(box, "agent");
    if (plan.name !== null && existsSync(join(plan.dir, "workdir"))) {
      await this.engine.copyIn(box, join(plan.dir, "workdir"), this.workdir!);
      const setup = `${this.workdir}/setup.sh`;
      const r = await this.exec(box, ["sh", "-c", `[ ! -f '${setup}' ] || bash '${setup}'`], {
        user: this.agentUser(),
        workdir: this.workdir,
        env: { ...this.agentEnv, ...this.net!.execEnv("agent") },
        timeoutMs: plan.agentTimeoutSec * 1000,
      });
      if (r.exitCode !== 0) this.log(`step ${plan.name}: workdir/setup.sh exited ${r.exitCode}`);
    }
    let gatewayEnv: Record<string, string> = {};
    if (this.lease && this.harness.usesModel) {
      // a fresh credential per agent phase, alive a minute past the phase's timeout at most
      gatewayEnv = this.lease.agentEnv(this.gatewayUrl(), plan.agentTimeoutSec * 1000 + 60_000);
    }
    const ctx = this.context(plan, { ...this.net!.execEnv("agent"), ...gatewayEnv });
    // what runs in the box now is the image's (its ENTRYPOINT's services) and the task's own setup: it stays
    const before = await this.guard(box, () => snapshotProcs(this.engine, box));
    let out: Awaited<ReturnType<Harness["run"]>>;
    try {
      // a harness's engine call that fails because the entrypoint died is that death, not an engine error
      out = await this.guard(box, () => this.harness.run(ctx));
    } finally {
      // revoked the moment the phase ends: nothing the agent left running spends during the verifier
      this.lease?.endAgent();
    }
    this.checkCancelled();
    await this.endAgentProcesses(box, before);
    if (this.harness.afterAgent) {
      try {
        await this.guard(box, () => this.harness.afterAgent!(ctx, out));
      } catch (e) {
        this.checkCancelled();
        this.log(`${this.harness.name}: reading the agent's output failed: ${firstLine(e)}`);
      }
    }
    if (out.timedOut) {
      step.exception = this.exc("AgentTimeoutError", `the agent ran past its ${plan.agentTimeoutSec} s timeout${plan.name ? ` in step ${plan.name}` : ""}`);
    } else if (this.lease?.capReached()) {
      step.exception = this.exc("AgentSpendCapError", `the agent reached the trial's spend cap: ${this.lease.capReached()}`);
    } else if (out.exitCode !== 0) {
      step.exception = this.exc("NonZeroAgentExitCodeError", `the agent exited with code ${out.exitCode}${plan.name ? ` in step ${plan.name}` : ""}`);
    }
    if (step.exception) {
      this.log(`${step.exception.type}: ${step.exception.message}; the verifier still runs`);
      this.agentException ??= step.exception;
    }
    step.agent_execution = { started_at: started, finished_at: now() };
    await this.collectArtifacts(plan);
  }

  /**
   * Kills every process the agent started (procs.ts) before anything reads what it left: what survives would keep
   * writing during the verifier, or read the judge's credential from its environment. A box whose processes
   * cannot all be ended gives no verdict.
   */
  private async endAgentProcesses(box: string, before: ProcSnapshot): Promise<void> {
    const r = await this.guard(box, () => killNewProcs(this.engine, box, before));
    if (r.killed.length > 0) {
      const shownProcs = r.killed.slice(0, 20).map((p) => `${p.name}(${p.pid})`).join(", ");
      this.log(`agent phase ended: killed ${r.killed.length} process(es) the agent left running (${before.via} sweep): ${shownProcs}${r.killed.length > 20 ? ", …" : ""}`);
    }
    if (r.left.length > 0) {
      const names = r.left.slice(0, 10).map((p) => `${p.name}(${p.pid})`).join(", ");
      throw new TrialFailure("AgentProcessesSurvivedError", `${r.left.length} process(es) the agent started were still alive after the sweep (${names}); no verifier runs beside them`);
    }
  }

  /** After the agent: pre_artifacts.sh (uncommitted work committed first), else the listed artifact paths. */
  private async collectArtifacts(plan: StepPlan): Promise<void> {
    const box = this.agentBox;
    const pre = join(this.req.task.dir, "pre_artifacts.sh");
    if (existsSync(pre)) {
      const tmp = await mkdtemp(join(tmpdir(), "evolve-pre-"));
      try {
        await copyFile(pre, join(tmp, "pre_artifacts.sh"));
        await this.engine.copyIn(box, tmp, BOX.scratch);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
      const commit =
        "if git -c safe.directory='*' rev-parse --is-inside-work-tree >/dev/null 2>&1; then " +
        "git -c safe.directory='*' add -A && (git -c safe.directory='*' diff --cached --quiet || " +
        "git -c safe.directory='*' -c user.name=evolve -c user.email=evolve@localhost commit -q -m 'agent work'); fi";
      const r = await this.exec(box, ["bash", "-c", `${commit}; mkdir -p ${BOX.artifacts}; bash ${BOX.scratch}/pre_artifacts.sh`], {
        user: "root",
        workdir: this.workdir,
        env: this.literals,
        timeoutMs: plan.verifierTimeoutSec * 1000,
      });
      this.log(`pre_artifacts.sh exited ${r.exitCode}${r.timedOut ? " (timed out)" : ""}`);
      return;
    }
    for (const src of this.artifactSources(plan)) {
      const r = await this.exec(box, ["sh", "-c", collectArtifactCommand(src)], {
        user: "root",
      });
      if (r.exitCode !== 0) this.log(`artifact ${src} was not collected (missing?)`);
    }
  }

  private async verifyStep(plan: StepPlan, step: StepResult): Promise<{ ok: boolean }> {
    const started = now();
    try {
      const separate = verifierMode(this.cfg.verifier) === "separate";
      if (separate && this.stepPlans().length === 1) await this.retireAgentBox();
      else await this.net!.enter(this.agentBox, "verify");
      // nothing of the agent runs any more (endAgentProcesses): what it left in the verifier's folder goes, and
      // only the verifier writes there from now on
      await emptyBoxDir(trialPaths(this.path).verifier);
      const box = separate ? await this.separateVerifierBox(plan) : this.agentBox;
      const resolved = resolveVerifierEnv({ ...this.cfg.verifier.env, ...plan.verifierEnv });
      let env = resolved.env;
      if (resolved.judge.length > 0 && this.lease) {
        const vars = this.lease.judgeEnv(resolved.judge.map((j) => judgeFamily(j.name)), this.gatewayUrl(), plan.verifierTimeoutSec * 1000 + 60_000);
        env = withJudgeEnv(env, resolved.judge, vars);
        this.log(`judge credential for ${resolved.judge.map((j) => j.key).join(", ")} issued through the gateway`);
      }
      // --ve REWARDKIT_JUDGE / REWARDKIT_MODEL: the job's override of the rubric's judge
      env = { ...env, ...(this.req.verifierEnv ?? {}) };
      const v = await this.runVerifier(box, {
        guard: (fn) => this.guard(box, fn),
        testsDirs: [join(this.req.task.dir, "tests"), ...(plan.name !== null ? [join(plan.dir, "tests")] : [])],
        workdir: this.workdir,
        env: { ...this.literals, ...(separate ? {} : this.net!.execEnv("verify")), ...env },
        timeoutSec: plan.verifierTimeoutSec,
      });
      if ("exception" in v) {
        step.exception = v.exception;
        return { ok: false };
      }
      step.rewards = v.rewards;
      step.reward = v.primary;
      return { ok: true };
    } finally {
      this.lease?.endJudge();
      step.verifier = { started_at: started, finished_at: now() };
    }
  }

  /**
   * A separate verifier of a single-step task never runs beside the agent's box: the kept tree is taken and the
   * box removed first (the task's other services stay: they hold no trial folder). A multi-step task's box lives on for its next step; it has
   * no /logs/verifier mount and none of the agent's processes left.
   */
  private async retireAgentBox(): Promise<void> {
    const box = this.agentBox;
    if (!box) return;
    await keepChangedFiles(this.engine, box, this.path, (l) => this.log(l));
    this.keptTaken = true;
    await this.engine.remove(box);
    this.boxes.delete(box);
    this.mountedBoxes.delete(box);
    this.agentBox = "";
    this.log(`agent box ${box.slice(0, 12)} removed before the separate verifier starts`);
  }

  /** A fresh box for a separate verifier: tests/Dockerfile when present (and no docker_image), else the task image. */
  private async separateVerifierBox(plan: StepPlan): Promise<string> {
    const cfg = this.cfg;
    let image = this.image;
    const testsDockerfile = join(this.req.task.dir, "tests", "Dockerfile");
    if (!cfg.environment.docker_image && existsSync(testsDockerfile)) {
      ({ tag: image } = await ensureEnvImage(this.engine, {
        taskDigest: this.req.task.digest,
        taskDir: this.req.task.dir,
        context: join(this.req.task.dir, "tests"),
        home: this.req.home,
        force: !!this.req.forceBuild,
        job: this.req.jobId,
        timeoutMs: cfg.environment.build_timeout_sec * 1000,
        log: (line) => this.deps.onEvent?.({ kind: "log", trialId: this.req.trialId, stream: "build", line }),
      }));
    }
    const venv = cfg.verifier.environment ?? cfg.environment;
    const box = await this.startBox(image, this.policies.separateVerifier ?? this.policies.baseline, venv, "verifier");
    // the verifier sees /logs/artifacts (mounted) and each listed artifact back at its source path
    for (const src of this.artifactSources(plan)) {
      await this.exec(box, ["sh", "-c", restoreArtifactCommand(src)], { user: "root" });
    }
    return box;
  }

  private async persist(status: TrialStatus, rewards: RewardMap | null, exception: ExceptionRecord | null, steps: StepResult[] | null): Promise<TrialRecord> {
    const span = this.beginPersist();
    // the kept tree (`trial files` after the run, `trial regrade`): what the run changed, copied out before the box goes
    if (this.agentBox && !this.keptTaken && status !== "CANCELLED") await keepChangedFiles(this.engine, this.agentBox, this.path, (l) => this.log(l));
    // every box that mounts a trial folder is gone before evolve writes into those folders (boxfs.ts)
    const boxesGone = await this.removeMountedBoxes();
    this.scheduleRemoval();
    const spent = await this.settleSpend();
    const finished = now();
    const rec = await this.finishPersist(span, { status, rewards, exception }, {
      boxesGone,
      finishedAt: finished,
      fields: { step_results: steps?.map((s) => ({ ...s })), ...spent.fields },
      write: async (reward) => {
        // without a config.json (the task could not be read) the outcome says only what is known
        const config = this.configFile ?? trialConfigFile(this.req);
        await writeResult(this.path, this.outcome({ config, status, rewards, reward, exception, finishedAt: finished, stepResults: steps, agentUsage: spent.agentUsage }));
        if (!this.configFile) return;
        await writeEvolveJson(this.path, { ...spent.fields, retry_of: this.rec.retry_of, regrade_of: this.rec.regrade_of });
      },
    });
    this.lease?.forget();
    return rec;
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
    if (totals.events.length > 0) {
      try {
        this.deps.store.appendEvents(this.req.trialId, totals.events);
      } catch (e) {
        this.log(`could not store the gateway's usage events: ${(e as Error).message}`);
      }
    }
    const fields = spendRecord(totals, true);
    const t = fields.tokens;
    const agentUsage: AgentUsage | undefined = this.harness?.usesModel
      ? { n_input_tokens: t.input + t.cached_read + t.cache_write, n_cache_tokens: t.cached_read, n_output_tokens: t.output, cost_usd: fields.spend.final_usd }
      : undefined;
    return { fields, agentUsage };
  }

  // ---- helpers -----------------------------------------------------------------------------------------------

  private async startBox(image: string, policy: NetPolicy, env: TaskConfig["environment"], role: "agent" | "verifier"): Promise<string> {
    const net = await this.net!.boxNetworking(role, policy);
    const network = net.network;
    const spec = boxSpec({
      image, trialId: this.req.trialId, jobId: this.req.jobId, trialPath: this.path, network, env, literals: this.literals, role, home: this.req.home,
      extraHosts: net.extraHosts, netEnv: { ...(role === "agent" ? this.compose?.main.environment : undefined), ...net.env }, aliases: net.aliases,
      separateVerifier: verifierMode(this.cfg.verifier) === "separate", caps: this.boxCaps, userns: this.userns,
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
      throw new TrialFailure("EnvironmentStartError", `cannot start the container from ${image}: ${(e as Error).message}`);
    }
    this.log(`${role} box ${id.slice(0, 12)} started from ${image} (network ${network})`);
    this.net!.created(id, policy, network, role);
    await this.net!.attach(id, policy, `${role} box boot`);
    return id;
  }

  /** exec that turns "the box died under us" into the entrypoint's exit code, and an abort into CancelledFailure. */
  private exec(id: string, cmd: string[], opts: Parameters<Engine["exec"]>[2]) {
    return this.guard(id, () => this.engine.exec(id, cmd, opts));
  }

  /** Runs an engine call on box `id`; when it fails, a dead box or an abort is the reason reported. */
  private async guard<T>(id: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      this.checkCancelled();
      await requireRunning(this.engine, id, "during the trial");
      throw e;
    }
  }

  private context(plan: StepPlan, phaseEnv: Record<string, string> = {}): HarnessContext {
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
    };
  }

  /** The gateway's address inside the trial's boxes (the relay network.ts gives every box of a leased trial). */
  private gatewayUrl(): string {
    const url = this.net?.gatewayUrl();
    if (!url) throw new TrialFailure("NetworkSetupError", "the trial's boxes have no route to the gateway");
    return url;
  }

  private instruction(plan: StepPlan): string {
    const p = join(plan.dir, "instruction.md");
    return existsSync(p) ? readFileSync(p, "utf8") : "";
  }

  private agentUser(): string | undefined {
    const u = this.cfg.agent.user;
    return u === undefined ? undefined : String(u);
  }

  private stepPlans(): StepPlan[] {
    return stepPlans(this.cfg, this.req.task.dir, this.req.timeoutMultiplier);
  }


  /** Absolute container paths of the task's (and the step's) `artifacts` entries. */
  private artifactSources(plan: StepPlan): string[] {
    return artifactSources([...this.cfg.artifacts, ...plan.artifacts]);
  }

  /** Moves this step's agent and verifier outputs to steps/<name>/ so the next step starts with empty /logs folders. */
  private async archiveStep(name: string): Promise<void> {
    for (const d of [TRIAL.agent, TRIAL.verifier]) {
      const from = join(this.path, d);
      const to = join(trialPaths(this.path).step(name), d);
      await mkdir(to, { recursive: true });
      for (const f of await readdir(from)) await rename(join(from, f), join(to, f));
    }
  }

  private makeConfig(): TrialConfigFile {
    return trialConfigFile(this.req, this.cfg);
  }


  private toException(e: unknown): ExceptionRecord {
    // a full disk fails the same way on every retry: one deterministic type, whichever step ran out of space
    if (isDiskFull(e)) return this.exc("DiskFullError", `no space left on the device: ${firstLine(e)}`, String((e as Error)?.stack ?? ""));
    if (e instanceof TrialFailure) return this.exc(e.type, e.message, e.traceback);
    const err = e as Error;
    return this.exc("EnvironmentError", String(err?.message ?? e), String(err?.stack ?? ""));
  }

  /**
   * Removes (and awaits) the boxes that mount the trial's folders; false when one may still be alive. The task's
   * other services, the relay and the proxy mount nothing and go with scheduleRemoval.
   */
  private async removeMountedBoxes(): Promise<boolean> {
    let ok = true;
    for (const id of [...this.mountedBoxes]) {
      try {
        await this.engine.remove(id);
        this.boxes.delete(id);
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

