/**
 * What every kind of trial run (a full trial in run.ts, a verifier-only regrade in regrade.ts) does the same way:
 * keep its store record current, time its phases, write its system log and shape its exceptions, with the
 * attached secrets redacted from every line and message.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { trialDir, type TrialRecord } from "../store/index.ts";
import { CancelledFailure, type ExceptionType } from "./outcome.ts";
import { trialPaths } from "./layout.ts";
import type { ExceptionRecord, TimeSpan } from "./result.ts";
import type { Phase, TrialDeps, TrialRequest, TrialStatus } from "./types.ts";

/**
 * Provider keys in evolve's own environment (`*_API_KEY`, `*_AUTH_TOKEN`): they never enter a box, but whatever a
 * box or a planted link makes evolve print must not carry them either, so every log line and file is redacted.
 */
export function providerKeysFromEnv(env: Record<string, string | undefined> = process.env): string[] {
  return Object.entries(env)
    .filter(([k, v]) => /(_API_KEY|_AUTH_TOKEN)$/.test(k) && typeof v === "string" && v.length >= 8)
    .map(([, v]) => v!);
}

/** Now, as the ISO string records carry. */
export const now = () => new Date().toISOString();

/** The record-keeping half of a trial run; subclasses do the work. */
export abstract class TrialRecorder {
  protected readonly path: string;
  protected rec: TrialRecord;
  protected readonly timings: Partial<Record<Phase, TimeSpan>> = {};
  protected readonly secretValues: string[];
  /** The record as the previous attempt left it (undefined for a trial never recorded): why this attempt runs. */
  protected readonly previous: TrialRecord | undefined;

  constructor(
    protected readonly req: TrialRequest,
    protected readonly deps: TrialDeps,
    /** Fields that differ by kind of run (e.g. `regrade_of`), laid over the common fresh record. */
    fields: Partial<TrialRecord> = {},
  ) {
    this.path = trialDir(req.home, req.trialId);
    this.secretValues = [...Object.values(req.secrets), ...providerKeysFromEnv()];
    const existing = deps.store.getTrial(req.trialId);
    this.previous = existing;
    const at = now();
    this.rec = {
      ...(existing ?? { created_at: at, phase_timings: {} }),
      id: req.trialId,
      job_id: req.jobId,
      task_digest: req.task.digest,
      task_name: req.task.name,
      source: req.task.source,
      agent: req.agent.name,
      model: req.agent.model,
      status: existing?.status ?? "QUEUED",
      attempt_phase: "prepare",
      phase_timings: {},
      rewards: null,
      reward: null,
      exception: null,
      step_results: undefined,
      attempt: req.attempt ?? 1,
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
  protected async phase<T>(p: Phase, fn: () => Promise<T>): Promise<T> {
    this.checkCancelled();
    const span: TimeSpan = this.timings[p] ?? { started_at: now() };
    delete span.finished_at;
    this.timings[p] = span;
    this.update({ attempt_phase: p });
    this.deps.onEvent?.({ kind: "phase", trialId: this.req.trialId, phase: p, at: span.started_at });
    try {
      return await fn();
    } finally {
      span.finished_at = now();
      this.update({});
    }
  }

  /** Throws CancelledFailure once the run's signal has fired. */
  protected checkCancelled(): void {
    if (this.deps.signal?.aborted) throw new CancelledFailure();
  }

  /**
   * Writes the record with `fields` and the phase clocks; tells listeners when the status changed. The record's
   * schema takes any status string (older stores hold others); what this trial writes is always a TrialStatus.
   */
  protected update(fields: Partial<TrialRecord> & { status?: TrialStatus }): void {
    const prevStatus = this.rec.status;
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
  protected log(line: string): void {
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
  protected exc(type: ExceptionType, message: string, traceback = ""): ExceptionRecord {
    return { type, message: this.redact(message), traceback: this.redact(traceback), occurred_at: now() };
  }

  /** `s` with every attached secret value (4 characters or more) replaced by `[redacted]`. */
  protected redact(s: string): string {
    for (const v of this.secretValues) if (v.length >= 4) s = s.split(v).join("[redacted]");
    return s;
  }
}
