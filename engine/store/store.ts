/**
 * The embedded store: one LMDB environment under `<home>/store/`, the only place evolve opens LMDB. Records in,
 * records out, each checked against its schema (records.ts) on the way in and on the way out; no business rules.
 * Every write is a synchronous LMDB write transaction, and LMDB's write lock is shared by all processes on the
 * machine, so two evolve processes writing the same store serialize instead of losing each other's writes.
 */
import { mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { open, type RootDatabase } from "lmdb";
import type { z } from "zod";
import { EvolveError, firstLine } from "../errors.ts";
import { migrate, SCHEMA_KEY, SCHEMA_VERSION, type Dbs } from "./migrations.ts";
import {
  DatasetRecordSchema,
  JobRecordSchema,
  TaskRecordSchema,
  TraceEventSchema,
  TrialRecordSchema,
  type DatasetRecord,
  type JobRecord,
  type NewTraceEvent,
  type TaskRecord,
  type TraceEvent,
  type TrialRecord,
} from "./records.ts";

const MAX_SEQ = Number.MAX_SAFE_INTEGER;
const StoredEventSchema = TraceEventSchema.omit({ seq: true });

/** The store of one evolve home. Obtain it with {@link openStore}; close it when done. */
export class Store {
  private depth = 0;
  private closed = false;

  /** @internal use {@link openStore}. */
  constructor(
    /** The evolve home this store belongs to; blob folders hang off it (see paths.ts). */
    readonly home: string,
    /** The schema version on disk (always this build's after opening). */
    readonly schemaVersion: number,
    private readonly root: RootDatabase,
    private readonly dbs: Dbs,
  ) {}

  /**
   * Runs `fn` inside one write transaction: its reads see its own writes and no other process writes in between.
   * Nested calls join the outer transaction. Keep `fn` short and synchronous: it holds the store's write lock.
   */
  transaction<T>(fn: () => T): T {
    if (this.depth > 0) return fn();
    return this.root.transactionSync(() => {
      this.depth++;
      try {
        return fn();
      } finally {
        this.depth--;
      }
    });
  }

  // ---- datasets: key [name, version]

  /** Stores (or replaces) one dataset version. */
  putDataset(rec: DatasetRecord): void {
    const r = this.checked("datasets", DatasetRecordSchema, rec);
    this.dbs.datasets.putSync([r.name, r.version], r);
  }

  /** One dataset version, or undefined. */
  getDataset(name: string, version: string): DatasetRecord | undefined {
    return this.read("datasets", this.dbs.datasets, [name, version], DatasetRecordSchema);
  }

  /** Every version of `name`, or of every dataset when no name is given, in key order (name, then version). */
  listDatasets(name?: string): DatasetRecord[] {
    const out: DatasetRecord[] = [];
    const range = name === undefined ? this.dbs.datasets.getRange({}) : this.dbs.datasets.getRange({ start: [name] });
    for (const { key } of range) {
      if (name !== undefined && key[0] !== name) break;
      const rec = this.read("datasets", this.dbs.datasets, key, DatasetRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** Removes one dataset version; false when it was not there. */
  deleteDataset(name: string, version: string): boolean {
    return this.dbs.datasets.removeSync([name, version]);
  }

  // ---- tasks: key = content digest

  /** Stores a task record. Task content is immutable, so a second put of the same digest only refreshes it. */
  putTask(rec: TaskRecord): void {
    const r = this.checked("tasks", TaskRecordSchema, rec);
    this.dbs.tasks.putSync(r.digest, r);
  }

  /** One task by digest, or undefined. */
  getTask(digest: string): TaskRecord | undefined {
    return this.read("tasks", this.dbs.tasks, digest, TaskRecordSchema);
  }

  /** Every stored task, in digest order. */
  listTasks(): TaskRecord[] {
    const out: TaskRecord[] = [];
    for (const { key } of this.dbs.tasks.getRange({})) {
      const rec = this.read("tasks", this.dbs.tasks, key, TaskRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** Removes a task record (not its blob folder); false when it was not there. */
  deleteTask(digest: string): boolean {
    return this.dbs.tasks.removeSync(digest);
  }

  // ---- jobs: key = id

  /** Stores (or replaces) a job. */
  putJob(rec: JobRecord): void {
    const r = this.checked("jobs", JobRecordSchema, rec);
    this.dbs.jobs.putSync(r.id, r);
  }

  /** One job, or undefined. */
  getJob(id: string): JobRecord | undefined {
    return this.read("jobs", this.dbs.jobs, id, JobRecordSchema);
  }

  /** Jobs newest first (ids sort by creation time), at most `limit`. */
  listJobs(limit?: number): JobRecord[] {
    const out: JobRecord[] = [];
    for (const { key } of this.dbs.jobs.getRange({ reverse: true, limit })) {
      const rec = this.read("jobs", this.dbs.jobs, key, JobRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  // ---- trials: key = id, plus the [job id, trial id] index

  /** Stores (or replaces) a trial and keeps the by-job index in step, in one transaction. */
  putTrial(rec: TrialRecord): void {
    const r = this.checked("trials", TrialRecordSchema, rec);
    this.transaction(() => {
      const old = this.dbs.trials.get(r.id) as { job_id?: unknown } | undefined;
      if (old && typeof old.job_id === "string" && old.job_id !== r.job_id) {
        this.dbs.trialsByJob.removeSync([old.job_id, r.id]);
      }
      this.dbs.trials.putSync(r.id, r);
      this.dbs.trialsByJob.putSync([r.job_id, r.id], true);
    });
  }

  /** One trial, or undefined. */
  getTrial(id: string): TrialRecord | undefined {
    return this.read("trials", this.dbs.trials, id, TrialRecordSchema);
  }

  /** The trials of one job (oldest first), or every trial when no job is given. */
  listTrials(jobId?: string): TrialRecord[] {
    const out: TrialRecord[] = [];
    if (jobId === undefined) {
      for (const { key } of this.dbs.trials.getRange({})) {
        const rec = this.read("trials", this.dbs.trials, key, TrialRecordSchema);
        if (rec) out.push(rec);
      }
      return out;
    }
    for (const { key } of this.dbs.trialsByJob.getRange({ start: [jobId] })) {
      if (key[0] !== jobId) break;
      const rec = this.read("trials", this.dbs.trials, key[1], TrialRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  // ---- trace events: key [trial id, seq]

  /**
   * Appends events to a trial's trace and returns them with their positions. Positions continue from the last
   * stored one (0 for a new trace) and are assigned inside one write transaction, so concurrent writers, in this
   * process or another, never share or skip a position.
   */
  appendEvents(trialId: string, events: readonly NewTraceEvent[]): TraceEvent[] {
    const items = events.map((e) => this.checked("events", StoredEventSchema, e));
    return this.transaction(() => {
      let seq = this.lastEventSeq(trialId) + 1;
      const out: TraceEvent[] = [];
      for (const e of items) {
        this.dbs.events.putSync([trialId, seq], { type: e.type, data: e.data });
        out.push({ seq, type: e.type, data: e.data });
        seq++;
      }
      return out;
    });
  }

  /** Events of a trial from position `fromSeq` (inclusive), at most `limit`: one LMDB range scan. */
  readEvents(trialId: string, fromSeq = 0, limit?: number): TraceEvent[] {
    const out: TraceEvent[] = [];
    for (const { key, value } of this.dbs.events.getRange({ start: [trialId, fromSeq], end: [trialId, MAX_SEQ], limit })) {
      const r = StoredEventSchema.safeParse(value);
      if (!r.success) throw this.corrupt("events", key, r.error);
      out.push({ seq: key[1], type: r.data.type, data: r.data.data });
    }
    return out;
  }

  /** The last position in a trial's trace, -1 when it has none. */
  lastEventSeq(trialId: string): number {
    for (const { key } of this.dbs.events.getRange({ start: [trialId, MAX_SEQ], end: [trialId, -1], reverse: true, limit: 1 })) {
      return key[1];
    }
    return -1;
  }

  // ---- spend ledger: key [scope, name, period]

  /**
   * Adds settled spend to a ledger entry and returns the new total, in one write transaction, so processes billing
   * the same user or team add up instead of overwriting each other.
   */
  addSpend(scope: "user" | "team" | "job", name: string, period: string, usd: number): number {
    if (!Number.isFinite(usd) || usd < 0) throw new EvolveError("store_record_invalid", `spend must be a non-negative number, got ${usd}`);
    return this.transaction(() => {
      const total = this.getSpend(scope, name, period) + usd;
      this.dbs.ledger.putSync([scope, name, period], total);
      return total;
    });
  }

  /** Settled spend of a ledger entry, USD (0 when nothing was recorded). */
  getSpend(scope: "user" | "team" | "job", name: string, period: string): number {
    const v = this.dbs.ledger.get([scope, name, period]);
    if (v === undefined) return 0;
    if (typeof v !== "number" || !Number.isFinite(v)) throw this.corrupt("ledger", [scope, name, period], new Error(`not a number: ${JSON.stringify(v)}`));
    return v;
  }

  /** A store-wide setting kept beside the schema version (the global spend stop). */
  getSetting(key: string): unknown {
    return key === SCHEMA_KEY ? undefined : this.dbs.meta.get(`setting:${key}`);
  }

  /** Sets (or, with undefined, clears) a store-wide setting. */
  putSetting(key: string, value: unknown): void {
    if (value === undefined) this.dbs.meta.removeSync(`setting:${key}`);
    else this.dbs.meta.putSync(`setting:${key}`, value);
  }

  /**
   * Drops this process's read snapshot. Reads within one synchronous turn of the event loop share a snapshot
   * (lmdb-js renews it on the next turn), so a caller that must see another process's commit without yielding
   * first calls this. Writes never need it: they always see the latest state.
   */
  refresh(): void {
    this.root.resetReadTxn();
  }

  /** Closes the environment. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.root.close();
  }

  private checked<S extends z.ZodType>(db: string, schema: S, value: unknown): z.infer<S> {
    const r = schema.safeParse(value);
    if (r.success) return r.data;
    const i = r.error.issues[0];
    throw new EvolveError(
      "store_record_invalid",
      `refusing to write an invalid ${db} record: ${i?.path.join(".") || "(root)"}: ${i?.message}`,
      "this is a bug in evolve; please report it",
    );
  }

  private read<K, S extends z.ZodType>(db: string, handle: { get(k: K): unknown }, key: K, schema: S): z.infer<S> | undefined {
    let raw: unknown;
    try {
      raw = handle.get(key);
    } catch (e) {
      throw this.corrupt(db, key, e);
    }
    if (raw === undefined) return undefined;
    const r = schema.safeParse(raw);
    if (!r.success) throw this.corrupt(db, key, r.error);
    return r.data;
  }

  private corrupt(db: string, key: unknown, cause: unknown): EvolveError {
    let why: string;
    if (cause && typeof cause === "object" && "issues" in cause) {
      const i = (cause as z.ZodError).issues[0];
      why = `${i?.path.join(".") || "(root)"}: ${i?.message}`;
    } else why = firstLine(cause);
    return new EvolveError(
      "store_corrupt",
      `store record ${db}/${JSON.stringify(key)} is corrupt (${why})`,
      `restore ${join(this.home, "store")} from a backup, or remove the damaged record`,
    );
  }
}

/**
 * Opens (creating if needed) the store of an evolve home, at `<home>/store/`. A store written by an older evolve
 * is migrated in one transaction; one written by a newer evolve is refused (`store_too_new`) rather than risk
 * misreading it; a home that cannot hold a store is `store_unavailable`.
 */
export function openStore(home: string): Store {
  const path = join(home, "store");
  const unavailable = (e: unknown) =>
    new EvolveError(
      "store_unavailable",
      `cannot open the store at ${path}: ${firstLine(e)}`,
      "check that EVOLVE_HOME points at a writable directory",
    );
  try {
    mkdirSync(path, { recursive: true });
    if (!statSync(path).isDirectory()) throw new Error("not a directory");
  } catch (e) {
    throw unavailable(e);
  }
  let root: RootDatabase;
  let dbs: Dbs;
  try {
    root = open({ path, maxDbs: 16, encoding: "json" });
    dbs = {
      meta: root.openDB("meta", { encoding: "json" }),
      datasets: root.openDB("datasets", { encoding: "json" }),
      tasks: root.openDB("tasks", { encoding: "json" }),
      jobs: root.openDB("jobs", { encoding: "json" }),
      trials: root.openDB("trials", { encoding: "json" }),
      trialsByJob: root.openDB("trials_by_job", { encoding: "json" }),
      events: root.openDB("events", { encoding: "json" }),
      ledger: root.openDB("ledger", { encoding: "json" }),
    };
  } catch (e) {
    throw unavailable(e);
  }
  const versionOf = (): number => {
    let v: unknown;
    try {
      v = dbs.meta.get(SCHEMA_KEY);
    } catch (e) {
      v = e;
    }
    if (v === undefined) return 0;
    if (typeof v === "number" && Number.isInteger(v) && v >= 0) return v;
    throw new EvolveError(
      "store_corrupt",
      `the store at ${path} has an unreadable schema version (${JSON.stringify(v instanceof Error ? firstLine(v) : v)})`,
      `restore ${path} from a backup`,
    );
  };
  const tooNew = (v: number) =>
    new EvolveError(
      "store_too_new",
      `the store at ${path} was written by a newer evolve (schema ${v}, this build knows ${SCHEMA_VERSION})`,
      "upgrade evolve",
    );
  try {
    let version = versionOf();
    if (version > SCHEMA_VERSION) throw tooNew(version);
    if (version < SCHEMA_VERSION) {
      // Re-read under the write lock: another process may have migrated it since.
      version = root.transactionSync(() => {
        const v = versionOf();
        if (v > SCHEMA_VERSION) throw tooNew(v);
        if (v < SCHEMA_VERSION) migrate(dbs, v);
        return SCHEMA_VERSION;
      });
    }
    return new Store(home, version, root, dbs);
  } catch (e) {
    void root.close();
    if (e instanceof EvolveError) throw e;
    throw unavailable(e);
  }
}
