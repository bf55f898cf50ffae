/**
 * `evolve trial regrade`: the verifier of a settled trial runs again, as a new trial, on what the original run left.
 * No agent runs. A fresh box boots from the task image (or the separate verifier's image), gets the original's kept
 * files back, and the task's tests score it exactly as a normal verify phase would:
 *
 * - shared mode: the kept tree of changes.ts is laid back over the image (added and modified files with their mode
 *   and owner, deleted paths removed), which rebuilds the file system the original verifier saw;
 * - separate mode: the original's collected artifacts are copied into the new trial and put back at their source
 *   paths, which is all a separate verifier ever sees.
 *
 * What cannot be regraded faithfully is refused before any job is made ({@link regradeRefusal}).
 */
import { existsSync } from "node:fs";
import { cp, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { endBlocks, entryBlocks } from "../driver/tar.ts";
import type { Engine } from "../driver/types.ts";
import { EvolveError } from "../errors.ts";
import { trialDir, type TrialRecord } from "../store/index.ts";
import { baselineNetwork, DEFAULT_VERIFIER_TIMEOUT_SEC, parseTaskToml, verifierMode, type TaskConfig } from "../task/model.ts";
import { isJudgeTask } from "../task/rules-env.ts";
import { awaitHealthy, boxSpec, ensureEnvImage, requireImage } from "./box.ts";
import { keepChangedFiles, readKeptFile, readManifest, type KeptManifest } from "./changes.ts";
import { resolveAgentEnv, resolveVerifierEnv } from "./env.ts";
import { CancelledFailure, TrialFailure, type ExceptionType } from "../outcome.ts";
import { isSettledStatus, isStopped, thrownVerdict, toRunning, toScoring, verifiedVerdict, type Verdict } from "./lifecycle.ts";
import { artifactSources, BOX, BOX_ROOT, restoreArtifactCommand, trialPaths } from "../box/layout.ts";
import { boxPutTar } from "./inspect.ts";
import { writeJson, writeResult, type ExceptionRecord, type TrialConfigFile } from "./result.ts";
import type { RewardMap } from "./reward.ts";
import { now, TrialRecorder } from "./recorder.ts";
import type { TrialDeps, TrialRequest } from "./types.ts";
import { buildVerifierImage } from "./phases/verify.ts";


/**
 * Why trial `orig` cannot be regraded, as the EvolveError to throw, or undefined when it can. Checked before the
 * regrade job is made, and again by the runner (the original's files may have gone since).
 */
export async function regradeRefusal(home: string, orig: TrialRecord, taskDir: string): Promise<EvolveError | undefined> {
  const id = orig.id;
  if (!isSettledStatus(orig.status)) {
    return new EvolveError("trial_not_settled", `trial ${id} is ${orig.status}: only a settled trial can be regraded`, `wait for it, or \`evolve trial stop ${id}\` first`);
  }
  if (!orig.phase_timings.verify) {
    return new EvolveError("regrade_never_verified", `trial ${id} never reached its verifier (${orig.status}${orig.exception ? `, ${orig.exception.type}` : ""}): there is nothing to regrade`, `run it again instead: \`evolve trial retry ${id}\``);
  }
  if (orig.exception?.type === "VerifierEnvironmentChangedError") {
    // the kept tree holds the agent's changes to the verifier's programs: restoring it would run them
    return new EvolveError(
      "regrade_verifier_changed",
      `trial ${id}'s agent changed what the shared verifier runs (${orig.exception.message.split("\n")[0].slice(0, 200)}): a regrade would restore those changes and run them`,
      "run it again instead: `evolve trial retry`; or declare the paths in [verifier] allowed_system_changes if the task expects them",
    );
  }
  let text: string;
  try {
    text = await readFile(join(taskDir, "task.toml"), "utf8");
  } catch {
    return new EvolveError("task_missing", `the task of trial ${id} (${orig.task_digest}) is no longer stored`, "publish or run the task again");
  }
  const raw = parseToml(text) as Record<string, unknown>;
  if (isJudgeTask(raw)) {
    return new EvolveError("regrade_judge_task", `trial ${id}'s task grades with an LLM judge: a regrade would ask the judge again, not re-score the same run`, "judge tasks are not regradable yet: `evolve trial retry` runs the trial again");
  }
  const cfg = parseTaskToml(text);
  if (cfg.steps && cfg.steps.length > 0) {
    return new EvolveError("regrade_multi_step", `trial ${id}'s task has ${cfg.steps.length} steps: each step's verifier saw a different box, and only the last one is kept`, "run it again instead: `evolve trial retry`");
  }
  if (verifierMode(cfg.verifier) === "shared") {
    const m = await readManifest(trialDir(home, id));
    if (!m) {
      return new EvolveError("regrade_no_kept_files", `trial ${id} kept no files (its box was gone before the end of the run, or it ran before evolve kept them)`, `run it again instead: \`evolve trial retry ${id}\``);
    }
    if (m.skipped.length > 0) {
      return new EvolveError("regrade_files_incomplete", `trial ${id} could not keep ${m.skipped.length} changed path(s) (first: ${m.skipped[0].path}: ${m.skipped[0].reason}): its verifier would see a different box`, `see \`evolve trial files changes ${id}\``);
    }
  }
  return undefined;
}

/** What a regrade runs, for the command to say before it starts: the stored task's own verifier, in its mode. */
export interface RegradeVerifier {
  /** The script that scores, as the task names it. */
  script: "tests/test.sh";
  /** The stored copy of the task's tests/ the verifier runs (the task as stored under its digest, not a working copy). */
  tests_dir: string;
  /** `shared`: on the agent's image with the kept files laid back; `separate`: its own box with the collected artifacts. */
  mode: string;
}

/** The verifier a regrade of a trial of the task stored in `taskDir` runs (regradeRefusal has read that task). */
export async function regradeVerifier(taskDir: string): Promise<RegradeVerifier> {
  const cfg = parseTaskToml(await readFile(join(taskDir, "task.toml"), "utf8"));
  return { script: "tests/test.sh", tests_dir: join(taskDir, "tests"), mode: verifierMode(cfg.verifier) };
}

/** Runs the verifier-only trial `req.trialId`, re-scoring trial `origId`; settles and returns its record. */
export async function runRegrade(req: TrialRequest, deps: TrialDeps, origId: string): Promise<TrialRecord> {
  return new Regrade(req, deps, origId).run();
}

class Regrade extends TrialRecorder {
  private readonly engine: Engine;
  private cfg!: TaskConfig;
  private config!: TrialConfigFile & { regrade_of: string };
  private box = "";
  private image = "";
  private literals: Record<string, string> = {};

  constructor(
    req: TrialRequest,
    deps: TrialDeps,
    private readonly origId: string,
  ) {
    // a regrade's record starts afresh whatever an earlier attempt of it left
    super(req, deps, { regrade_of: origId }, true);
    this.engine = deps.engine;
  }

  async run(): Promise<TrialRecord> {
    const onAbort = () => {
      if (this.box) void this.engine.remove(this.box).catch(() => {});
    };
    this.deps.signal?.addEventListener("abort", onAbort);
    let verdict: Verdict;
    try {
      this.update(toRunning());
      await this.phase("prepare", () => this.prepare());
      await this.phase("build", () => this.build());
      await this.phase("boot", () => this.boot());
      this.update(toScoring());
      const { rewards, exception } = await this.phase("verify", () => this.verify());
      verdict = verifiedVerdict(rewards, exception);
    } catch (e) {
      // the same rules as a full run's (lifecycle.ts): a full disk is DiskFullError, a stop CANCELLED or INTERRUPTED
      verdict = thrownVerdict(e, (t: ExceptionType, m: string, tb?: string) => this.exc(t, m, tb), this.deps.signal);
      this.log(`regrade failed: ${verdict.exception!.type}: ${verdict.exception!.message.split("\n")[0]}`);
    } finally {
      this.deps.signal?.removeEventListener("abort", onAbort);
    }
    return this.persist(verdict);
  }

  private async prepare(): Promise<void> {
    for (const d of ["verifier", "artifacts"]) await mkdir(join(this.path, d), { recursive: true });
    const orig = this.deps.store.getTrial(this.origId);
    if (!orig) throw new TrialFailure("RegradeSourceMissingError", `the trial to regrade, ${this.origId}, is not in the store`);
    const refusal = await regradeRefusal(this.req.home, orig, this.req.task.dir);
    if (refusal) throw new TrialFailure("RegradeRefusedError", `${refusal.code}: ${refusal.message}`);
    this.cfg = parseTaskToml(await readFile(join(this.req.task.dir, "task.toml"), "utf8"));
    this.literals = resolveAgentEnv(this.cfg.environment.env, {}).literals;
    const m = this.req.timeoutMultiplier || 1;
    this.config = {
      trial_name: this.req.trialId,
      job_id: this.req.jobId,
      task: { path: this.req.task.dir, name: this.req.task.name, digest: this.req.task.digest, source: this.req.task.source ?? null },
      agent: { name: this.req.agent.name, model_name: this.req.agent.model ?? null },
      timeout_multiplier: m,
      timeouts: { agent_sec: 0, verifier_sec: (this.cfg.verifier.timeout_sec ?? DEFAULT_VERIFIER_TIMEOUT_SEC) * m, build_sec: this.cfg.environment.build_timeout_sec },
      environment: {
        force_build: !!this.req.forceBuild,
        network_mode: baselineNetwork(this.cfg.environment),
        verifier_mode: verifierMode(this.cfg.verifier),
        cpus: this.cfg.environment.cpus ?? null,
        memory_mb: this.cfg.environment.memory_mb ?? null,
        storage_mb: this.cfg.environment.storage_mb ?? null,
        gpus: this.cfg.environment.gpus ?? null,
      },
      secret_names: Object.keys(this.req.secrets).sort(),
      attempt: this.req.attempt ?? 1,
      regrade_of: this.origId,
    };
    await writeJson(trialPaths(this.path).config, this.config);
    const origArtifacts = join(trialDir(this.req.home, this.origId), "artifacts");
    if (this.separate() && existsSync(origArtifacts)) await cp(origArtifacts, join(this.path, "artifacts"), { recursive: true });
    this.log(`regrade of trial ${this.origId}: only the verifier runs, on the original's ${this.separate() ? "artifacts" : "kept files"}`);
  }

  private separate(): boolean {
    return verifierMode(this.cfg.verifier) === "separate";
  }

  private async build(): Promise<void> {
    const env = this.cfg.environment;
    const buildLog = (line: string) => this.buildLog(line);
    const image = { taskDigest: this.req.task.digest, taskDir: this.req.task.dir, home: this.req.home, job: this.req.jobId, timeoutMs: env.build_timeout_sec * 1000, log: buildLog };
    if (env.docker_image) {
      await requireImage(this.engine, env.docker_image);
      this.image = env.docker_image;
      return;
    }
    // a separate verifier runs in its own image (tests/Dockerfile) when the task has one, as the original's did
    const verifierImage = this.separate() ? await buildVerifierImage(this.engine, this.req, this.cfg, { force: false, log: buildLog }) : undefined;
    if (verifierImage) {
      this.image = verifierImage;
    } else {
      this.image = (await ensureEnvImage(this.engine, { ...image, context: join(this.req.task.dir, "environment"), force: !!this.req.forceBuild })).tag;
    }
  }

  private async boot(): Promise<void> {
    const cfg = this.cfg;
    const venv = this.separate() ? (cfg.verifier.environment ?? cfg.environment) : cfg.environment;
    let mode = baselineNetwork(venv);
    if (this.separate() && cfg.verifier.network_mode) mode = cfg.verifier.network_mode;
    if (mode === "allowlist") throw new TrialFailure("NetworkPolicyUnsupportedError", "regrading a task whose verifier uses network_mode = \"allowlist\" is not supported yet");
    const spec = boxSpec({ image: this.image, trialId: this.req.trialId, jobId: this.req.jobId, trialPath: this.path, network: mode === "no-network" ? "none" : "default", env: venv, literals: this.literals, role: "verifier", home: this.req.home });
    // a verifier-only box has no agent stream to mount
    spec.mounts = spec.mounts?.filter((m) => m.container !== BOX.agentLogs);
    try {
      this.box = await this.engine.create(spec);
      if (this.deps.signal?.aborted) throw new CancelledFailure();
      await this.engine.start(this.box);
    } catch (e) {
      if (e instanceof CancelledFailure) throw e;
      throw new TrialFailure("EnvironmentStartError", `cannot start a box from ${this.image}: ${(e as Error).message}`);
    }
    this.log(`verifier box ${this.box.slice(0, 12)} started from ${this.image}`);
    if (!this.separate() && cfg.environment.healthcheck) {
      await awaitHealthy(this.engine, this.box, cfg.environment.healthcheck, () => !!this.deps.signal?.aborted);
    }
    if (this.separate()) await this.restoreArtifacts();
    else await this.restoreKept();
  }

  /** Lays the original's kept tree over the fresh box: files and folders with mode and owner, deletions redone. */
  private async restoreKept(): Promise<void> {
    const origPath = trialDir(this.req.home, this.origId);
    const m = (await readManifest(origPath)) as KeptManifest;
    const blocks: Buffer[] = [];
    const owners: string[] = [];
    const deleted: string[] = [];
    let n = 0;
    for (const e of m.files) {
      if (e.kind === "deleted") {
        deleted.push(e.path);
        continue;
      }
      if (e.kind === "modified" && e.type === "dir") continue;
      const mode = parseInt(e.mode ?? "0644", 8);
      const name = e.path.replace(/^\/+/, "");
      if (e.type === "dir") blocks.push(...entryBlocks({ name, type: "dir", mode }));
      else if (e.type === "symlink") blocks.push(...entryBlocks({ name, type: "symlink", mode: 0o777, linkname: e.target ?? "" }));
      else if (e.type === "file") blocks.push(...entryBlocks({ name, type: "file", mode, data: await this.keptBytes(origPath, e.path) }));
      else continue;
      n++;
      if ((e.uid ?? 0) !== 0 || (e.gid ?? 0) !== 0) owners.push(`${e.uid ?? 0}:${e.gid ?? 0}`, e.path);
    }
    if (deleted.length) await this.root(["sh", "-c", 'rm -rf -- "$@"', "sh", ...deleted], "removing paths the run deleted");
    if (blocks.length) await boxPutTar(this.engine, this.box, "/", Buffer.concat([...blocks, endBlocks()]));
    if (owners.length) await this.root(["sh", "-c", 'while [ $# -gt 1 ]; do chown -h "$1" "$2" || exit 1; shift 2; done', "sh", ...owners], "restoring owners");
    this.log(`restored ${n} kept path(s) and ${deleted.length} deletion(s) from trial ${this.origId}`);
  }

  /** A kept file of the original, read the one way kept files are (no link followed, bounded); a tampered one refuses the regrade. */
  private async keptBytes(origPath: string, path: string): Promise<Buffer> {
    try {
      return await readKeptFile(origPath, path);
    } catch (e) {
      throw new TrialFailure("RegradeRestoreError", (e as Error).message);
    }
  }

  /** Puts each listed artifact back at its source path, as the original's separate verifier box had it. */
  private async restoreArtifacts(): Promise<void> {
    for (const s of artifactSources(this.cfg.artifacts)) await this.root(["sh", "-c", restoreArtifactCommand(s)], `restoring artifact ${s}`);
  }

  private async verify(): Promise<{ rewards: RewardMap | null; exception: ExceptionRecord | null }> {
    const cfg = this.cfg;
    const wd = cfg.environment.workdir || (await this.root(["pwd"], "reading the working directory")).stdout.trim() || "/";
    // judge tasks are refused before a regrade starts (refusal above), so no judge credential is ever asked for here
    const { env } = resolveVerifierEnv(cfg.verifier.env);
    const v = await this.runVerifier(this.box, {
      testsDirs: [join(this.req.task.dir, "tests")],
      workdir: wd,
      env: { ...this.literals, ...env },
      timeoutSec: (cfg.verifier.timeout_sec ?? DEFAULT_VERIFIER_TIMEOUT_SEC) * (this.req.timeoutMultiplier || 1),
    });
    return "exception" in v ? { rewards: null, exception: v.exception } : { rewards: v.rewards, exception: null };
  }

  private async persist(verdict: Verdict): Promise<TrialRecord> {
    const { status, rewards, exception } = verdict;
    const span = this.beginPersist();
    if (this.box && !isStopped(status) && this.cfg && !this.separate()) {
      await keepChangedFiles(this.engine, this.box, this.path, (l) => this.log(l));
    }
    let boxesGone = true;
    if (this.box) {
      await this.engine.remove(this.box).catch((e: unknown) => {
        boxesGone = false;
        this.log(`could not remove box ${this.box.slice(0, 12)}: ${(e as Error).message}; \`evolve gc\` will`);
      });
    }
    const finished = now();
    return this.finishPersist(span, verdict, {
      boxesGone,
      finishedAt: finished,
      write: (reward) =>
        writeResult(
          this.path,
          this.outcome({
            config: this.config ?? ({ trial_name: this.req.trialId, job_id: this.req.jobId, regrade_of: this.origId } as unknown as TrialConfigFile),
            status,
            rewards,
            reward,
            exception,
            finishedAt: finished,
            stepResults: null,
          }),
        ),
    });
  }

  private async root(cmd: string[], what: string) {
    const r = await this.engine.exec(this.box, cmd, { user: BOX_ROOT, timeoutMs: 120_000 });
    if (this.deps.signal?.aborted) throw new CancelledFailure();
    if (r.exitCode !== 0) throw new TrialFailure("RegradeRestoreError", `${what} failed (exit ${r.exitCode}): ${(r.stderr || r.stdout).trim().slice(-500)}`);
    return r;
  }

}
