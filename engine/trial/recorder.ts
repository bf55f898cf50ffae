/**
 * The record-keeping half of the trial runner (run.ts), the same for every plan it walks (a full trial, a
 * verifier-only regrade: plan.ts): keep the store record current, time the phases, write the system log and shape
 * exceptions, with the attached secrets redacted from every line and message.
 */
import { appendFileSync, existsSync } from "node:fs";
import { trialDir, type TrialRecord } from "../store/index.ts";
import { CancelledFailure, type ExceptionType } from "../outcome.ts";
import { beginAttempt, persistFailedVerdict, settle, type TrialTransition, type Verdict } from "./lifecycle.ts";
import { BOX, BOX_ROOT, TEST_SCRIPT, TRIAL, trialPaths, verifyCommand } from "../box/layout.ts";
import { testScript, type BoxScripts } from "../box/scripts.ts";
import { probeLiveBox } from "./box.ts";
import type { ExecOptions, ExecResult } from "../driver/types.ts";
import { sweepTree, type SweepReport } from "./sweep.ts";
import { pruneEmptyDirs, writeJson, type ExceptionRecord, type TimeSpan, type TrialOutcome } from "./result.ts";
import { primaryReward, readRewards, verifierTail, type RewardMap } from "./reward.ts";
import type { Phase, TrialDeps, TrialRequest, TrialStatus } from "./types.ts";
import { formatDuration } from "../duration.ts";

/**
 * Provider keys in evolve's own environment (`*_API_KEY`, `*_AUTH_TOKEN`): they never enter a box, but whatever a
 * box or a planted link makes evolve print must not carry them either, so every log line and file is redacted.
 */
export function providerKeysFromEnv(env: Record<string, string | undefined> = process.env): string[] {
  return Object.entries(env)
    .filter(([k, v]) => /(_API_KEY|_AUTH_TOKEN)$/.test(k) && typeof v === "string" && v.length >= 8)
    .map(([, v]) => v!);
}

/** How runVerifier runs the task's tests in a box. */
export interface VerifierRun {
  /** Wraps each engine call (the full run turns a box that died under it into the entrypoint's death). */
  guard?: <T>(fn: () => Promise<T>) => Promise<T>;
  testsDirs: string[];
  workdir?: string;
  env: Record<string, string>;
  timeoutSec: number;
  /** What the box can run of the task's scripts, when it was probed already (the agent's box); else it is probed here. */
  scripts?: BoxScripts;
}

/** What runVerifier found: the scores, or the exception of a verifier that gave no valid verdict. */
export type VerifierVerdict = { rewards: RewardMap; primary: number | null } | { exception: ExceptionRecord; exitCode?: number };

const MIB = 1024 * 1024;
/** The most of a build's output setup.log keeps: past it, one line says so. */
export const SETUP_LOG_LIMIT = 64 * MIB;

/** Now, as the ISO string records carry. */
export const now = () => new Date().toISOString();

/** The record-keeping half of a trial run; subclasses do the work. Its public members are part of what a phase sees (phases/room.ts). */
export abstract class TrialRecorder {
  /** The trial's folder on the host (trialDir). */
  readonly path: string;
  protected rec: TrialRecord;
  /** A coalesced write of the record not made yet (see update). */
  private pendingWrite?: ReturnType<typeof setImmediate>;
  protected readonly timings: Partial<Record<Phase, TimeSpan>> = {};
  /** When this run started (result.json's `started_at`). */
  protected readonly startedAt = now();
  protected readonly secretValues: string[];
  /** The record as the previous attempt left it (undefined for a trial never recorded): why this attempt runs. */
  protected readonly previous: TrialRecord | undefined;
  /** The phase that failed first (threw, or gave no verdict): a trial that does not score records it as `failed_phase`. */
  protected failedPhase?: Phase;
  /** The latest phase started: where a trial that did not score without any phase failing stopped. */
  private lastPhase?: Phase;
  /** Bytes written to setup.log this attempt (bounded by SETUP_LOG_LIMIT). */
  private setupBytes = 0;

  constructor(
    readonly req: TrialRequest,
    readonly deps: TrialDeps,
    /** Fields that differ by kind of run (e.g. `regrade_of`), laid over the common fresh record. */
    fields: Omit<Partial<TrialRecord>, "status"> = {},
    /** The record starts QUEUED whatever an earlier attempt of it left (a regrade), not in the status it was left in. */
    afresh = false,
  ) {
    this.path = trialDir(req.home, req.trialId);
    this.secretValues = [...Object.values(req.secrets), ...providerKeysFromEnv()];
    const existing = deps.store.getTrial(req.trialId);
    this.previous = existing;
    const at = now();
    const begun = beginAttempt(existing, at, afresh);
    this.rec = {
      ...(existing ?? { created_at: at, phase_timings: {} }),
      id: req.trialId,
      job_id: req.jobId,
      task_digest: req.task.digest,
      task_name: req.task.name,
      source: req.task.source,
      agent: req.agent.name,
      model: req.agent.model,
      status: begun.status,
      attempt_phase: "prepare",
      failed_phase: undefined,
      phase_timings: {},
      rewards: null,
      reward: null,
      exception: null,
      step_results: undefined,
      agent_exit: undefined,
      attempt: req.attempt ?? 1,
      attempts: begun.attempts,
      started_at: at,
      finished_at: undefined,
      updated_at: at,
      ...fields,
    };
  }

  /**
   * Runs one phase: refuses to start after a cancel, records the phase as the trial's `attempt_phase` with its
   * times (a phase run again, as each step's agent and verify are, keeps its first start), and tells listeners.
   */
  async phase<T>(p: Phase, fn: () => Promise<T>): Promise<T> {
    this.checkCancelled();
    const span: TimeSpan = this.timings[p] ?? { started_at: now() };
    delete span.finished_at;
    this.timings[p] = span;
    this.lastPhase = p;
    this.update({ attempt_phase: p }, { coalesce: true });
    this.deps.onEvent?.({ kind: "phase", trialId: this.req.trialId, phase: p, at: span.started_at });
    try {
      return await fn();
    } catch (e) {
      this.failedPhase ??= p;
      throw e;
    } finally {
      span.finished_at = now();
      this.update({}, { coalesce: true });
    }
  }

  /** Records that phase `p` gave no verdict without throwing (a verifier with no valid reward). */
  protected markFailed(p: Phase): void {
    this.failedPhase ??= p;
  }

  /** The phase a trial settling `status` failed in: none for a scored trial. */
  protected failedIn(status: TrialStatus): Phase | undefined {
    return status === "SCORED" ? undefined : (this.failedPhase ?? this.lastPhase);
  }

  /**
   * Passes one line of an image build (the task's image, its compose services', a separate verifier's) to
   * listeners and appends it to the trial's setup stream (setup.log, redacted), so the build's whole output is
   * kept, and readable with `trial logs --stream setup` while it runs. Bounded by SETUP_LOG_LIMIT.
   */
  buildLog(line: string): void {
    const text = this.redact(line);
    this.deps.onEvent?.({ kind: "log", trialId: this.req.trialId, stream: "build", line: text });
    if (this.setupBytes > SETUP_LOG_LIMIT) return;
    let chunk = `${text}\n`;
    if (this.setupBytes + Buffer.byteLength(chunk) > SETUP_LOG_LIMIT) {
      chunk = `evolve: setup.log reached ${SETUP_LOG_LIMIT / MIB} MiB; the rest of the build's output is not kept\n`;
      this.setupBytes = SETUP_LOG_LIMIT + 1;
    } else {
      this.setupBytes += Buffer.byteLength(chunk);
    }
    try {
      appendFileSync(trialPaths(this.path).setup, chunk);
    } catch {
      // the trial folder may be gone (a full disk is said where the tree is written); the event carried the line
    }
  }

  /** Throws CancelledFailure once the run's signal has fired. */
  checkCancelled(): void {
    if (this.deps.signal?.aborted) throw new CancelledFailure();
  }

  /**
   * Writes the record with `fields` and the phase clocks; tells listeners when the status changed. A status moves
   * only by a transition of lifecycle.ts (toRunning, toScoring, settle): any other change leaves it as it is.
   */
  update(fields: (Omit<Partial<TrialRecord>, "status"> & { status?: never }) | TrialTransition, o: { coalesce?: boolean } = {}): void {
    const prevStatus = this.rec.status;
    // a phase's start and end (no status change) ride on the next write made in the same turn of the event loop: one
    // phase's end, the next one's start and a status move between them are one synchronous store write, not three
    // (each ~2 ms, far more on a busy disk); a write nothing joins goes out at the turn's end (setImmediate)
    if (o.coalesce && !("status" in fields && fields.status)) {
      this.rec = { ...this.rec, ...fields, phase_timings: structuredClone(this.timings) as TrialRecord["phase_timings"], updated_at: now() };
      this.pendingWrite ??= setImmediate(() => {
        this.pendingWrite = undefined;
        try {
          this.update({});
        } catch (e) {
          this.log(`could not record the trial's phase: ${(e as Error).message}`);
        }
      });
      return;
    }
    if (this.pendingWrite) clearImmediate(this.pendingWrite);
    this.pendingWrite = undefined;
    const store = this.deps.store;
    store.transaction(() => {
      // `trial stop` from another process writes stop_requested_at into this record: never write over it.
      const stop = store.getTrial(this.req.trialId)?.stop_requested_at;
      const base = stop !== undefined && this.rec.stop_requested_at === undefined ? { ...this.rec, stop_requested_at: stop } : this.rec;
      this.rec = { ...base, ...fields, phase_timings: structuredClone(this.timings) as TrialRecord["phase_timings"], updated_at: now() };
      store.putTrial(this.rec);
    });
    if (fields.status && fields.status !== prevStatus) {
      this.deps.onEvent?.({ kind: "status", trialId: this.req.trialId, status: fields.status });
    }
  }

  /** Appends one line to the trial's system log (trial.log) and passes it to listeners. */
  log(line: string): void {
    const text = this.redact(line);
    try {
      appendFileSync(trialPaths(this.path).log, `${now()} ${text}\n`);
    } catch {
      // the trial folder may not exist yet (prepare failed); the event below still carries the line
    }
    this.deps.onEvent?.({ kind: "log", trialId: this.req.trialId, stream: "system", line: text });
  }

  /** Why this attempt runs, for the line trial.log starts each attempt with. */
  protected attemptReason(): string {
    const p = this.previous;
    const attempt = this.req.attempt ?? 1;
    const exc = p?.exception ? ` (${p.exception.type})` : "";
    if (attempt > 1) return `automatic retry after ${p?.status ?? "a failed attempt"}${exc}`;
    if (!p || (p.status === "QUEUED" && p.finished_at === undefined && Object.keys(p.phase_timings ?? {}).length === 0)) return "first attempt";
    if (p.status === "RUNNING" || p.status === "SCORING" || p.status === "QUEUED") return `the previous attempt was interrupted in phase ${p.attempt_phase ?? "?"}`;
    return `run again after ${p.status}${exc}`;
  }

  /** An exception record, secrets redacted. */
  exc(type: ExceptionType, message: string, traceback = ""): ExceptionRecord {
    return { type, message: this.redact(message), traceback: this.redact(traceback), occurred_at: now() };
  }

  /** `s` with every secret this run knows (redactionValues, 4 characters or more) replaced by `[redacted]`. */
  protected redact(s: string): string {
    for (const v of this.redactionValues()) if (v.length >= 4) s = s.split(v).join("[redacted]");
    return s;
  }

  // ---- the verify and persist steps every kind of run shares -------------------------------------------------

  /**
   * Runs the verifier in `box`: the task's tests (each of `testsDirs` laid over the last) replace whatever /tests
   * held, test.sh runs with its output as the verifier stream, and the reward files are read the one way
   * (reward.ts). Returns the scores, or the exception of a verifier that gave no valid verdict; a test.sh nothing in
   * the box can run throws ScriptInterpreterNotFoundError before anything is copied in (scripts.ts).
   */
  async runVerifier(box: string, o: VerifierRun): Promise<VerifierVerdict> {
    const engine = this.deps.engine;
    const guard = o.guard ?? (<T>(fn: () => Promise<T>) => fn());
    const exec = (cmd: string[], opts: ExecOptions): Promise<ExecResult> => guard(() => engine.exec(box, cmd, opts));
    const test = testScript(this.req.task.dir, o.testsDirs);
    const scripts = o.scripts?.has(test) ? o.scripts : await probeLiveBox(engine, box, [test], (argv) => exec(argv, { user: BOX_ROOT, timeoutMs: 30_000 }));
    const runTest = scripts.command(test, TEST_SCRIPT);
    // a HEAD rather than an exec: /tests is only there when the image or the agent made it
    if (await guard(() => engine.pathExists(box, BOX.tests))) await exec(["sh", "-c", `rm -rf ${BOX.tests}`], { user: BOX_ROOT });
    for (const dir of o.testsDirs) if (existsSync(dir)) await guard(() => engine.copyIn(box, dir, BOX.tests));
    const r = await exec(["sh", "-c", verifyCommand(runTest)], { user: BOX_ROOT, workdir: o.workdir, env: o.env, timeoutMs: o.timeoutSec * 1000 });
    this.checkCancelled();
    const vdir = trialPaths(this.path).verifier;
    const tailOr = async (fallback: string) => {
      const tail = await verifierTail(vdir);
      return tail.trim() ? tail : fallback;
    };
    if (r.timedOut) {
      const msg = `the verifier ran past its ${formatDuration(o.timeoutSec * 1000)} timeout`;
      return { exception: this.exc("VerifierTimeoutError", await tailOr(msg), msg) };
    }
    const parsed = await readRewards(vdir);
    if (!parsed.ok) return { exception: this.exc(parsed.type, await tailOr(parsed.reason), `${parsed.reason} (test.sh exited ${r.exitCode})`), exitCode: r.exitCode };
    this.log(`verifier: ${JSON.stringify(parsed.rewards)} from ${parsed.file}`);
    return { rewards: parsed.rewards, primary: parsed.primary };
  }

  /** result.json's outcome of this run: the request's identity and this run's clocks around the verdict given. */
  protected outcome(
    v: Pick<TrialOutcome, "config" | "status" | "rewards" | "reward" | "exception" | "finishedAt" | "stepResults" | "agentUsage" | "agentInfo">,
  ): TrialOutcome {
    const { task } = this.req;
    return {
      id: this.req.trialId,
      taskName: task.name,
      taskDir: task.dir,
      taskDigest: task.digest,
      source: task.source ?? null,
      agent: this.req.agent,
      attemptPhase: "persist",
      failedPhase: this.failedIn(v.status),
      phaseTimings: this.timings,
      startedAt: this.startedAt,
      attempt: this.req.attempt ?? 1,
      ...v,
    };
  }

  /** Starts the persist phase: recorded as the trial's phase, with its clock. */
  protected beginPersist(): TimeSpan {
    const span: TimeSpan = { started_at: now() };
    this.timings.persist = span;
    this.update({ attempt_phase: "persist" });
    this.deps.onEvent?.({ kind: "phase", trialId: this.req.trialId, phase: "persist", at: span.started_at });
    return span;
  }

  /** What redaction replaces in the trial tree; runs that issue credentials add theirs. */
  protected redactionValues(): string[] {
    return this.secretValues;
  }

  /** Says in trial.log (and persist-skipped.json) what the persist sweep changed and what it did not keep. */
  private async recordSweep(d: SweepReport): Promise<void> {
    // a path deeper than PATH_MAX is thousands of bytes: a log line shows its end
    const cut = (p: string) => (p.length > 160 ? `…${p.slice(-160)}` : p);
    if (d.setid.length > 0) this.log(`cleared set-id bits on ${d.setid.length} file(s) a box wrote: ${d.setid.slice(0, 10).map(cut).join(", ")}`);
    if (d.special.length > 0) this.log(`removed ${d.special.length} device node(s), FIFO(s) or socket(s) a box wrote: ${d.special.slice(0, 10).map(cut).join(", ")}`);
    if (d.deadlineHit) this.log(`persist: the sweep ran past its deadline; what it had not read was removed unread (see ${TRIAL.persistSkipped})`);
    if (d.skippedCount === 0) return;
    const why = [...new Set(d.skipped.map((s) => s.reason))].join(", ");
    const first = d.skipped.slice(0, 5).map((s) => `${cut(s.path)} (${s.reason}, ${s.action})`).join(", ");
    this.log(`persist: ${d.skippedCount} entr${d.skippedCount === 1 ? "y" : "ies"} the boxes wrote not kept as written (${why}): ${first}; the list is in ${TRIAL.persistSkipped}`);
    await writeJson(trialPaths(this.path).persistSkipped, { count: d.skippedCount, deadline_hit: d.deadlineHit, entries: d.skipped.map((s) => ({ ...s, path: this.redact(s.path) })) });
  }

  /**
   * Ends the persist phase the same way for every run: once no process of any box that mounts the trial's folders
   * is left (each halted or removed: `boxesGone`), the tree is made inert (box/fs.ts) and redacted; then
   * `write` writes the run's own files. A tree that cannot be written is said in the verdict (a full disk is DiskFullError and takes the reward
   * with it: it explains whatever the run saw), and the record settles with the verdict and `fields`.
   */
  protected async finishPersist(
    span: TimeSpan,
    verdict: Verdict,
    o: { boxesGone: boolean; finishedAt: string; write: (reward: number | null) => Promise<void>; fields?: Omit<Partial<TrialRecord>, "status"> },
  ): Promise<TrialRecord> {
    let v = verdict;
    try {
      if (o.boxesGone) {
        // nothing the boxes wrote makes this throw (sweep.ts): what it could not keep is recorded, the verdict stands
        await this.recordSweep(await sweepTree(this.path, { secrets: this.redactionValues() }));
        await pruneEmptyDirs(this.path);
      } else {
        this.log("warning: a box of this trial could not be removed; its folders are left as it wrote them (not redacted)");
      }
      span.finished_at = now();
      await o.write(primaryReward(v.rewards));
    } catch (e) {
      v = persistFailedVerdict(v, e, this.path, (t, m, tb) => this.exc(t, m, tb));
      this.failedPhase ??= "persist";
    }
    span.finished_at ??= now();
    this.update(settle(this.rec, v, o.finishedAt, { ...o.fields, failed_phase: this.failedIn(v.status) }));
    return this.rec;
  }
}
