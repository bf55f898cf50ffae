/**
 * The embedded store: one LMDB environment under `<home>/store/`, the only place evolve opens LMDB. Records in,
 * records out, each checked against its schema (records.ts) on the way in and on the way out; no business rules.
 * Every write is a synchronous LMDB write transaction, and LMDB's write lock is shared by all processes on the
 * machine, so two evolve processes writing the same store serialize instead of losing each other's writes.
 */
import { accessSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { open, type RootDatabase } from "lmdb";
import type { z } from "zod";
import { diskFullError, EvolveError, firstLine, isDiskFull } from "../errors.ts";
import { checkDataFile, checkTrees } from "./check.ts";
import { migrate, SCHEMA_KEY, SCHEMA_VERSION, type Dbs } from "./migrations.ts";
import {
  ApiTokenRecordSchema,
  DatasetRecordSchema,
  InviteRecordSchema,
  OrgRecordSchema,
  JobRecordSchema,
  TaskRecordSchema,
  TraceEventSchema,
  TrialRecordSchema,
  type ApiTokenRecord,
  type DatasetRecord,
  type InviteRecord,
  type OrgRecord,
  type JobRecord,
  type NewTraceEvent,
  type TaskRecord,
  type TraceEvent,
  type TrialRecord,
} from "./records.ts";

const MAX_SEQ = Number.MAX_SAFE_INTEGER;
/**
 * LMDB refuses keys over 1978 bytes (its page size's limit); the store refuses them first, with room for the
 * ordered-binary encoding's framing, so an absurd id is a usage error instead of an LMDB error read as damage.
 */
export const MAX_KEY_BYTES = 1900;
const KEY_NAMES: Record<string, string> = {
  jobs: "job id",
  trials: "trial id",
  trials_by_job: "job id",
  events: "trial id",
  datasets: "dataset name or version",
  tasks: "task digest",
  ledger: "budget name",
  tokens: "token id",
  orgs: "organization name",
  invites: "invite id",
  meta: "setting name",
};
const StoredEventSchema = TraceEventSchema.omit({ seq: true });

/** What {@link Store.verify} found. */
export interface VerifyReport {
  ok: boolean;
  /** The data file read. */
  file: string;
  /** The first problem in the file's page structure, or null when it is whole (records are read only then). */
  structure: string | null;
  /** Per db: records read and how many of them are bad. */
  dbs: Record<string, { records: number; bad: number }>;
  /** Each bad record: its db, its key, and why. */
  bad: { db: string; key: unknown; why: string }[];
}

function zodCheck(schema: z.ZodType): (key: unknown, value: unknown) => string | undefined {
  return (_key, value) => {
    if (value === undefined) return "listed but unreadable";
    const r = schema.safeParse(value);
    if (r.success) return undefined;
    const i = r.error.issues[0];
    return `${i?.path.join(".") || "(root)"}: ${i?.message}`;
  };
}

/** The store of one evolve home. Obtain it with {@link openStore}; close it when done. */
export class Store {
  private depth = 0;
  private closed = false;
  private wrote = false;

  /** @internal use {@link openStore}. */
  constructor(
    /** The evolve home this store belongs to; blob folders hang off it (see paths.ts). */
    readonly home: string,
    /** The schema version on disk (always this build's after opening). */
    readonly schemaVersion: number,
    private readonly root: RootDatabase,
    private readonly dbs: Dbs,
    /** True when the home is on a read-only file system: reads are served, every write is refused. */
    readonly readOnly = false,
  ) {}

  /** The folder holding data.mdb. */
  get path(): string {
    return join(this.home, "store");
  }

  /**
   * Runs `fn` inside one write transaction: its reads see its own writes and no other process writes in between.
   * Nested calls join the outer transaction. Keep `fn` short and synchronous: it holds the store's write lock.
   */
  transaction<T>(fn: () => T): T {
    if (this.depth > 0) return fn();
    return this.write(() =>
      this.root.transactionSync(() => {
        this.depth++;
        try {
          return fn();
        } finally {
          this.depth--;
        }
      }),
    );
  }

  /**
   * Runs an LMDB write, turning what the machine refuses into errors a user can act on: a full disk is
   * `disk_full`, a read-only home `store_read_only`. LMDB aborts the transaction first, so nothing half-written stays.
   */
  private write<T>(fn: () => T): T {
    if (this.readOnly && this.depth === 0) throw this.readOnlyError();
    this.wrote = true;
    try {
      return fn();
    } catch (e) {
      if (e instanceof EvolveError) throw e;
      if (isDiskFull(e) || (ioError(e) && nearlyFull(this.path))) throw diskFullError(new Error(`ENOSPC: ${firstLine(e)}`), join(this.path, "data.mdb"));
      if (/EROFS|read-only file system/i.test(firstLine(e))) throw this.readOnlyError();
      throw e;
    }
  }

  private readOnlyError(): EvolveError {
    return new EvolveError(
      "store_read_only",
      `the store at ${this.path} is on a read-only file system: it can be read, not written`,
      "point EVOLVE_HOME at a writable copy (`evolve store backup` makes one) to run or change anything",
    );
  }

  // ---- datasets: key [name, version]

  /** Stores (or replaces) one dataset version. */
  putDataset(rec: DatasetRecord): void {
    const r = this.checked("datasets", DatasetRecordSchema, rec);
    this.write(() => this.dbs.datasets.putSync([r.name, r.version], r));
  }

  /** One dataset version, or undefined. */
  getDataset(name: string, version: string): DatasetRecord | undefined {
    return this.read("datasets", this.dbs.datasets, [name, version], DatasetRecordSchema);
  }

  /** Every version of `name`, or of every dataset when no name is given, in key order (name, then version). */
  listDatasets(name?: string): DatasetRecord[] {
    const out: DatasetRecord[] = [];
    for (const key of this.keys("datasets", this.dbs.datasets, name === undefined ? {} : { start: [name] })) {
      if (name !== undefined && key[0] !== name) break;
      const rec = this.read("datasets", this.dbs.datasets, key, DatasetRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** Removes one dataset version; false when it was not there. */
  deleteDataset(name: string, version: string): boolean {
    return this.write(() => this.dbs.datasets.removeSync([name, version]));
  }

  // ---- tasks: key = content digest

  /** Stores a task record. Task content is immutable, so a second put of the same digest only refreshes it. */
  putTask(rec: TaskRecord): void {
    const r = this.checked("tasks", TaskRecordSchema, rec);
    this.write(() => this.dbs.tasks.putSync(r.digest, r));
  }

  /** One task by digest, or undefined. */
  getTask(digest: string): TaskRecord | undefined {
    return this.read("tasks", this.dbs.tasks, digest, TaskRecordSchema);
  }

  /** Every stored task, in digest order. */
  listTasks(): TaskRecord[] {
    const out: TaskRecord[] = [];
    for (const key of this.keys("tasks", this.dbs.tasks, {})) {
      const rec = this.read("tasks", this.dbs.tasks, key, TaskRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** Removes a task record (not its blob folder); false when it was not there. */
  deleteTask(digest: string): boolean {
    return this.write(() => this.dbs.tasks.removeSync(digest));
  }

  // ---- jobs: key = id

  /** Stores (or replaces) a job. */
  putJob(rec: JobRecord): void {
    const r = this.checked("jobs", JobRecordSchema, rec);
    this.write(() => this.dbs.jobs.putSync(r.id, r));
  }

  /** One job, or undefined. */
  getJob(id: string): JobRecord | undefined {
    return this.read("jobs", this.dbs.jobs, id, JobRecordSchema);
  }

  /** Jobs newest first (ids sort by creation time), at most `limit`. */
  listJobs(limit?: number): JobRecord[] {
    const out: JobRecord[] = [];
    for (const key of this.keys("jobs", this.dbs.jobs, { reverse: true, limit })) {
      const rec = this.read("jobs", this.dbs.jobs, key, JobRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  // ---- trials: key = id, plus the [job id, trial id] index

  /** Stores (or replaces) a trial and keeps the by-job index in step, in one transaction. */
  putTrial(rec: TrialRecord): void {
    this.putTrials([rec]);
  }

  /**
   * Stores (or replaces) many trials in ONE write transaction (a job's plan, a cancel), keeping the by-job index in
   * step: a job of thousands of trials is one commit instead of thousands.
   */
  putTrials(recs: readonly TrialRecord[]): void {
    const rs = recs.map((rec) => this.checked("trials", TrialRecordSchema, rec));
    this.transaction(() => {
      for (const r of rs) {
        const old = this.raw("trials", this.dbs.trials, r.id) as { job_id?: unknown } | undefined;
        if (old && typeof old.job_id === "string" && old.job_id !== r.job_id) this.dbs.trialsByJob.removeSync([old.job_id, r.id]);
        this.dbs.trials.putSync(r.id, r);
        this.dbs.trialsByJob.putSync([r.job_id, r.id], true);
      }
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
      for (const key of this.keys("trials", this.dbs.trials, {})) {
        const rec = this.read("trials", this.dbs.trials, key, TrialRecordSchema);
        if (rec) out.push(rec);
      }
      return out;
    }
    this.checkKey("trials", jobId);
    for (const key of this.keys("trials_by_job", this.dbs.trialsByJob, { start: [jobId] })) {
      if (key[0] !== jobId) break;
      const rec = this.read("trials", this.dbs.trials, key[1], TrialRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  // ---- id lookups (engine/store/resolve.ts): key scans only, no record is read or parsed

  /** Up to `limit` ids of `db` that start with `prefix`, in id order; a range scan from the prefix. */
  idsWithPrefix(db: "jobs" | "trials", prefix: string, limit: number): string[] {
    this.checkKey(db, prefix);
    const found: string[] = [];
    try {
      for (const key of this.dbs[db].getKeys({ start: prefix })) {
        if (typeof key !== "string" || !key.startsWith(prefix) || found.length >= limit) break;
        found.push(key);
      }
    } catch (e) {
      throw this.corrupt(db, "(range scan)", e);
    }
    return found;
  }

  /** Up to `limit` trial ids that end with `suffix`; a scan of every trial key (keys only, no record is read). */
  trialIdsEndingWith(suffix: string, limit: number): string[] {
    const found: string[] = [];
    try {
      for (const key of this.dbs.trials.getKeys({})) {
        if (typeof key === "string" && key.endsWith(suffix)) found.push(key);
        if (found.length >= limit) break;
      }
    } catch (e) {
      throw this.corrupt("trials", "(range scan)", e);
    }
    return found;
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
    this.checkKey("events", trialId);
    const out: TraceEvent[] = [];
    let at: unknown = [trialId, fromSeq];
    try {
      for (const { key, value } of this.dbs.events.getRange({ start: [trialId, fromSeq], end: [trialId, MAX_SEQ], limit })) {
        at = key;
        const r = StoredEventSchema.safeParse(value);
        if (!r.success) throw this.corrupt("events", key, r.error);
        out.push({ seq: key[1], type: r.data.type, data: r.data.data });
      }
    } catch (e) {
      throw e instanceof EvolveError ? e : this.corrupt("events", at, e);
    }
    return out;
  }

  /** The last position in a trial's trace, -1 when it has none. */
  lastEventSeq(trialId: string): number {
    this.checkKey("events", trialId);
    for (const key of this.keys("events", this.dbs.events, { start: [trialId, MAX_SEQ], end: [trialId, -1], reverse: true, limit: 1 })) {
      if (typeof key[1] !== "number") throw this.corrupt("events", key, new Error("not a trace position"));
      return key[1];
    }
    return -1;
  }

  // ---- API tokens of `evolve serve`: key = token id (what a token allows is engine/serve's)

  /** Stores (or replaces: a revoke, a last use) one API token record. */
  putToken(rec: ApiTokenRecord): void {
    const r = this.checked("tokens", ApiTokenRecordSchema, rec);
    this.write(() => this.dbs.tokens.putSync(r.id, r));
  }

  /** One API token record, or undefined. */
  getToken(id: string): ApiTokenRecord | undefined {
    return this.read("tokens", this.dbs.tokens, id, ApiTokenRecordSchema);
  }

  /** Every API token record, oldest first (ids sort by creation time), revoked ones included. */
  listTokens(): ApiTokenRecord[] {
    const out: ApiTokenRecord[] = [];
    for (const key of this.keys("tokens", this.dbs.tokens, {})) {
      const rec = this.read("tokens", this.dbs.tokens, key, ApiTokenRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  // ---- teams (engine/org decides who may do what): orgs by name, invites by id

  /** Stores (or replaces: a join, a role change) one organization. */
  putOrg(rec: OrgRecord): void {
    const r = this.checked("orgs", OrgRecordSchema, rec);
    this.write(() => this.dbs.orgs.putSync(r.name, r));
  }

  /** One organization, or undefined. */
  getOrg(name: string): OrgRecord | undefined {
    return this.read("orgs", this.dbs.orgs, name, OrgRecordSchema);
  }

  /** Every organization, by name. */
  listOrgs(): OrgRecord[] {
    const out: OrgRecord[] = [];
    for (const key of this.keys("orgs", this.dbs.orgs, {})) {
      const rec = this.read("orgs", this.dbs.orgs, key, OrgRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** Stores (or replaces: a use, a revoke) one invite. */
  putInvite(rec: InviteRecord): void {
    const r = this.checked("invites", InviteRecordSchema, rec);
    this.write(() => this.dbs.invites.putSync(r.id, r));
  }

  /** One invite, or undefined. */
  getInvite(id: string): InviteRecord | undefined {
    return this.read("invites", this.dbs.invites, id, InviteRecordSchema);
  }

  /** Every invite, oldest first (ids sort by creation time), used and revoked ones included. */
  listInvites(): InviteRecord[] {
    const out: InviteRecord[] = [];
    for (const key of this.keys("invites", this.dbs.invites, {})) {
      const rec = this.read("invites", this.dbs.invites, key, InviteRecordSchema);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** Removes one organization and its invites (`auth org delete`; engine/org decides when that is allowed). */
  deleteOrg(name: string): boolean {
    return this.write(() => {
      for (const inv of this.listInvites()) if (inv.org === name) this.dbs.invites.removeSync(inv.id);
      return this.dbs.orgs.removeSync(name);
    });
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
    const v = this.raw("ledger", this.dbs.ledger, [scope, name, period]);
    if (v === undefined) return 0;
    if (typeof v !== "number" || !Number.isFinite(v)) throw this.corrupt("ledger", [scope, name, period], new Error(`not a number: ${JSON.stringify(v)}`));
    return v;
  }

  /** A store-wide setting kept beside the schema version (the global spend stop). */
  getSetting(key: string): unknown {
    return key === SCHEMA_KEY ? undefined : this.raw("meta", this.dbs.meta, `setting:${key}`);
  }

  /** Sets (or, with undefined, clears) a store-wide setting. */
  putSetting(key: string, value: unknown): void {
    this.write(() => {
      if (value === undefined) this.dbs.meta.removeSync(`setting:${key}`);
      else this.dbs.meta.putSync(`setting:${key}`, value);
    });
  }

  /**
   * Drops this process's read snapshot. Reads within one synchronous turn of the event loop share a snapshot
   * (lmdb-js renews it on the next turn), so a caller that must see another process's commit without yielding
   * first calls this. Writes never need it: they always see the latest state.
   */
  refresh(): void {
    this.root.resetReadTxn();
  }

  /**
   * Writes a compacted copy of the store to `file` (LMDB's own hot copy: it reads one snapshot, so jobs may keep
   * writing meanwhile and the copy is consistent as of its start). The copy is written beside its target under a
   * temporary name, checked like a store being opened, and only then renamed into place; an existing file is never
   * overwritten. Returns the copy's size in bytes.
   */
  async backup(file: string): Promise<{ file: string; bytes: number }> {
    if (existsSync(file)) throw new EvolveError("usage", `${file} already exists`, "name a new file: a backup never overwrites one");
    // LMDB copies an environment into a folder (as data.mdb): a temporary one beside the target, so the rename is local
    const tmp = `${file}.tmp-${process.pid}`;
    const copy = join(tmp, "data.mdb");
    try {
      mkdirSync(tmp);
      await this.root.backup(tmp, true);
      const check = checkDataFile(copy);
      const problem = check.ok ? checkTrees(copy) : check.why;
      if (problem) throw new Error(`the copy does not check out: ${problem}`);
      renameSync(copy, file);
      return { file, bytes: statSync(file).size };
    } catch (e) {
      if (e instanceof EvolveError) throw e;
      if (isDiskFull(e) || (ioError(e) && nearlyFull(join(file, "..")))) throw diskFullError(new Error(`ENOSPC: ${firstLine(e)}`), file);
      throw new EvolveError("backup_failed", `cannot write a backup to ${file}: ${firstLine(e)}`, "check that its folder exists and is writable");
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }

  /**
   * Reads the whole store back: first its file's page structure with plain reads (a damaged tree is reported, never
   * handed to LMDB), then every record of every db through its schema. Returns counts per db and the bad keys.
   */
  verify(): VerifyReport {
    const file = join(this.path, "data.mdb");
    const structure = checkTrees(file) ?? null;
    const report: VerifyReport = { ok: false, file, structure, dbs: {}, bad: [] };
    if (structure) return report;
    const schemas: [string, { getKeys(o: object): Iterable<unknown>; get(k: unknown): unknown }, (key: unknown, v: unknown) => string | undefined][] = [
      ["meta", this.dbs.meta, (k, v) => (k === SCHEMA_KEY && v !== SCHEMA_VERSION ? `schema version ${JSON.stringify(v)}` : undefined)],
      ["datasets", this.dbs.datasets, zodCheck(DatasetRecordSchema)],
      ["tasks", this.dbs.tasks, zodCheck(TaskRecordSchema)],
      ["jobs", this.dbs.jobs, zodCheck(JobRecordSchema)],
      ["trials", this.dbs.trials, zodCheck(TrialRecordSchema)],
      ["trials_by_job", this.dbs.trialsByJob, (k, v) => (v !== true ? "index entry is not `true`" : Array.isArray(k) && k.length === 2 ? undefined : "key is not [job id, trial id]")],
      ["events", this.dbs.events, (k, v) => (!Array.isArray(k) || typeof k[1] !== "number" ? "key is not [trial id, seq]" : zodCheck(StoredEventSchema)(k, v))],
      ["ledger", this.dbs.ledger, (_k, v) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? undefined : `not a non-negative number: ${JSON.stringify(v)}`)],
      ["tokens", this.dbs.tokens, zodCheck(ApiTokenRecordSchema)],
      ["orgs", this.dbs.orgs, zodCheck(OrgRecordSchema)],
      ["invites", this.dbs.invites, zodCheck(InviteRecordSchema)],
    ];
    for (const [db, handle, check] of schemas) {
      const counts = { records: 0, bad: 0 };
      report.dbs[db] = counts;
      let keys: unknown[];
      try {
        keys = [...handle.getKeys({})];
      } catch (e) {
        counts.bad++;
        report.bad.push({ db, key: "(range scan)", why: firstLine(e) });
        continue;
      }
      for (const key of keys) {
        counts.records++;
        let why: string | undefined;
        try {
          why = check(key, handle.get(key));
        } catch (e) {
          why = firstLine(e);
        }
        if (why) {
          counts.bad++;
          report.bad.push({ db, key, why });
        }
      }
    }
    report.ok = report.bad.length === 0;
    return report;
  }

  /** Closes the environment. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.root.close();
    if (this.wrote) restamp(this.path);
  }

  private checked<S extends z.ZodType>(db: string, schema: S, value: unknown): z.infer<S> {
    const r = schema.safeParse(value);
    if (r.success) {
      const key = db === "datasets" ? [(r.data as DatasetRecord).name, (r.data as DatasetRecord).version] : (r.data as { id?: string; digest?: string }).id ?? (r.data as { digest?: string }).digest;
      if (key !== undefined) this.checkKey(db, key);
      return r.data;
    }
    const i = r.error.issues[0];
    throw new EvolveError(
      "store_record_invalid",
      `refusing to write an invalid ${db} record: ${i?.path.join(".") || "(root)"}: ${i?.message}`,
      "this is a bug in evolve; please report it",
    );
  }

  /**
   * Refuses a key LMDB could never hold. A usage error, not damage: nothing with such a key can be in the store,
   * and the caller (an id typed by a user, a dataset name) is what has to change.
   */
  private checkKey(db: string, key: unknown): void {
    const parts = Array.isArray(key) ? key : [key];
    const bytes = parts.reduce((n: number, p) => n + (typeof p === "string" ? Buffer.byteLength(p) : 9) + 1, 0);
    if (bytes <= MAX_KEY_BYTES) return;
    const longest = parts.reduce((a: string, p) => (typeof p === "string" && p.length > a.length ? p : a), "");
    const what = KEY_NAMES[db] ?? `${db} key`;
    throw new EvolveError(
      "usage",
      `a ${what} of ${longest.length} characters (${JSON.stringify(longest.slice(0, 16))}…) is longer than the store can hold (${MAX_KEY_BYTES} bytes)`,
      "ids are 26 characters (see `evolve job list`); names and versions must be shorter",
    );
  }

  /** Every key of a range, the scan itself inside the store's error handling (a damaged page throws here). */
  private keys<K>(db: string, handle: { getKeys(o: object): Iterable<K> }, range: object): K[] {
    try {
      return [...handle.getKeys(range)];
    } catch (e) {
      throw this.corrupt(db, "(range scan)", e);
    }
  }

  /** One value as LMDB decodes it, a decoding failure reported as damage to that record. */
  private raw<K>(db: string, handle: { get(k: K): unknown }, key: K): unknown {
    this.checkKey(db, key);
    try {
      return handle.get(key);
    } catch (e) {
      throw this.corrupt(db, key, e);
    }
  }

  private read<K, S extends z.ZodType>(db: string, handle: { get(k: K): unknown }, key: K, schema: S): z.infer<S> | undefined {
    const raw = this.raw(db, handle, key);
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
      `\`evolve store verify\` lists every damaged record; restore ${join(this.home, "store", "data.mdb")} from a backup (docs/store.md "Backup and restore")`,
    );
  }
}

/** LMDB reports a write the disk cut short as EIO (its own "short write"), not ENOSPC. */
function ioError(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return code === 5 || code === "EIO" || /Input\/output error/.test(firstLine(e));
}

/** Whether the file system holding `path` has (next to) no room left: then an I/O error on write is a full disk. */
function nearlyFull(path: string): boolean {
  try {
    const s = statfsSync(path);
    return s.bavail * s.bsize < 4 * 1024 * 1024;
  } catch {
    return false;
  }
}

/** The file beside the store that says this home has held one (see {@link openStore}). */
export const STORE_MARKER = "store.marker";

/**
 * Whether this home has held a store: its marker, or (homes from before the marker) stored task or trial folders,
 * which only a store ever makes. A home like that whose data.mdb is gone or empty lost its data; a brand-new home
 * has neither and gets a fresh store.
 */
function heldStore(home: string): string | undefined {
  if (existsSync(join(home, STORE_MARKER))) return `${join(home, STORE_MARKER)} says it held one`;
  for (const dir of ["tasks", "trials"]) {
    try {
      if (readdirSync(join(home, dir)).some((n) => !n.startsWith("."))) return `it has stored ${dir} in ${join(home, dir)}`;
    } catch {
      // absent: no evidence
    }
  }
  return undefined;
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Refuses a data file LMDB must not map (see check.ts): damaged, cut short, or missing/empty in a home that had a
 * store. A failed check is repeated twice a moment later, since a writer in another process may be extending the
 * file or rewriting a meta page while it is read; damage stays, a race does not.
 */
function preflight(home: string, path: string): void {
  const data = join(path, "data.mdb");
  const restore = `stop evolve, then restore ${data} from a backup (\`evolve store backup\`; see docs/store.md "Backup and restore")`;
  for (let attempt = 0; ; attempt++) {
    let problem: string | undefined;
    let size: number | undefined;
    try {
      size = statSync(data).size;
    } catch {
      size = undefined;
    }
    if (size === undefined || size === 0) {
      const held = heldStore(home);
      if (!held) return;
      problem = `${data} is ${size === undefined ? "missing" : "empty"}, but this home held a store (${held})`;
      if (attempt >= 2) {
        const fresh = held.startsWith(join(home, STORE_MARKER)) ? `remove ${join(home, STORE_MARKER)}` : `move ${join(home, "tasks")} and ${join(home, "trials")} aside`;
        throw new EvolveError("store_corrupt", problem, `${restore}; to start an empty store on purpose, ${fresh}`);
      }
    } else {
      try {
        const before = statSync(data);
        const r = checkDataFile(data);
        if (r.ok && stampMatches(path, before, r.txnid)) return;
        const why = r.ok ? checkTrees(data) : r.why;
        if (!why) {
          writeStamp(path, before, r.ok ? r.txnid : 0n);
          return;
        }
        problem = `${data} is damaged: ${why}`;
      } catch (e) {
        problem = `${data} cannot be read: ${firstLine(e)}`;
      }
      if (attempt >= 2) throw new EvolveError("store_corrupt", problem, restore);
    }
    sleep(50);
  }
}

/**
 * The last state of data.mdb known whole: `store/checked.json` {size, mtime_ms, txnid}, written after a full walk
 * and when a store that wrote closes (LMDB's own writes keep a whole tree whole). An open that finds the file as
 * stamped skips the walk, so listings cost nothing extra; anything that changes the file behind evolve's back
 * (a copy, a truncation, an editor) changes its size or mtime and gets walked. Damage that keeps both (a disk's
 * bit rot) is what `evolve store verify`, which always walks, is for.
 */
const STAMP = "checked.json";

function stampMatches(path: string, st: { size: number; mtimeMs: number }, txnid: bigint): boolean {
  try {
    const s = JSON.parse(readFileSync(join(path, STAMP), "utf8")) as { size?: unknown; mtime_ms?: unknown; txnid?: unknown };
    return s.size === st.size && s.mtime_ms === st.mtimeMs && s.txnid === String(txnid);
  } catch {
    return false;
  }
}

function writeStamp(path: string, st: { size: number; mtimeMs: number }, txnid: bigint): void {
  try {
    const file = join(path, STAMP);
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify({ size: st.size, mtime_ms: st.mtimeMs, txnid: String(txnid) }) + "\n");
    renameSync(tmp, file);
  } catch {
    // read-only or full: the next open walks again, which is only slower
  }
}

/** Stamps the data file as whole after this process's own writes (see STAMP). */
function restamp(path: string): void {
  const data = join(path, "data.mdb");
  try {
    const st = statSync(data);
    const r = checkDataFile(data);
    if (r.ok) writeStamp(path, st, r.txnid);
  } catch {
    // nothing to stamp
  }
}

/**
 * Opens (creating if needed) the store of an evolve home, at `<home>/store/`. The data file is checked before LMDB
 * maps it (damaged, cut short, or lost from a home that had a store: `store_corrupt`, nothing written), and once
 * open the home is marked as holding a store. A store written by an older evolve is migrated in one transaction;
 * one written by a newer evolve is refused (`store_too_new`) rather than risk misreading it; a home that cannot
 * hold a store is `store_unavailable`. A home on a read-only file system is opened read-only: LMDB can read it
 * without its lock file there, since nothing can write it; writes are then `store_read_only`.
 */
export function openStore(home: string): Store {
  const path = join(home, "store");
  const unavailable = (e: unknown) =>
    new EvolveError(
      "store_unavailable",
      `cannot open the store at ${path}: ${firstLine(e)}`,
      "check that EVOLVE_HOME points at a writable directory",
    );
  preflight(home, path);
  const readOnly = readOnlyFs(path);
  if (!readOnly) {
    try {
      mkdirSync(path, { recursive: true });
      if (!statSync(path).isDirectory()) throw new Error("not a directory");
    } catch (e) {
      throw diskFull(e, path) ?? unavailable(e);
    }
  } else if (!existsSync(join(path, "data.mdb"))) {
    throw new EvolveError("store_unavailable", `${home} is on a read-only file system and holds no store`, "point EVOLVE_HOME at a writable directory");
  }
  let root: RootDatabase;
  let dbs: Dbs;
  try {
    root = open({ path, maxDbs: 16, encoding: "json", ...(readOnly ? { readOnly: true } : {}) });
    const db = (name: string) => root.openDB(name, { encoding: "json", ...(readOnly ? { readOnly: true } : {}) });
    dbs = {
      meta: db("meta"),
      datasets: db("datasets"),
      tasks: db("tasks"),
      jobs: db("jobs"),
      trials: db("trials"),
      trialsByJob: db("trials_by_job"),
      events: db("events"),
      ledger: db("ledger"),
      tokens: db("tokens"),
      orgs: db("orgs"),
      invites: db("invites"),
    } as Dbs;
  } catch (e) {
    if (/permission denied|EACCES/i.test(firstLine(e)) && existsSync(join(path, "data.mdb"))) {
      // Not served read-only: LMDB keeps its readers in lock.mdb, and reading without that on a file system where
      // the store's owner can still write would let a writer reuse pages under a reader's feet.
      throw new EvolveError(
        "store_read_only",
        `cannot read the store at ${path} without write access to it: LMDB records every reader in lock.mdb, and reading unrecorded is unsafe while its owner may write`,
        "get write access to that folder, or read a copy (its owner can make one with `evolve store backup`)",
      );
    }
    throw diskFull(e, path) ?? unavailable(e);
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
    if (version < SCHEMA_VERSION && readOnly) {
      throw new EvolveError("store_read_only", `the store at ${path} needs a schema upgrade (${version} → ${SCHEMA_VERSION}) and its file system is read-only`, "open it once from a writable copy");
    }
    if (version < SCHEMA_VERSION) {
      // Re-read under the write lock: another process may have migrated it since.
      version = root.transactionSync(() => {
        const v = versionOf();
        if (v > SCHEMA_VERSION) throw tooNew(v);
        if (v < SCHEMA_VERSION) migrate(dbs, v);
        return SCHEMA_VERSION;
      });
    }
    if (!readOnly) mark(home);
    return new Store(home, version, root, dbs, readOnly);
  } catch (e) {
    void root.close();
    if (e instanceof EvolveError) throw e;
    throw diskFull(e, path) ?? unavailable(e);
  }
}

function diskFull(e: unknown, path: string): EvolveError | undefined {
  const d = diskFullError(e, path);
  return d instanceof EvolveError ? d : undefined;
}

/** Whether the store's folder (or, before it exists, the home) sits on a file system mounted read-only. */
function readOnlyFs(path: string): boolean {
  for (const p of [path, join(path, "..")]) {
    try {
      accessSync(p, constants.W_OK);
      return false;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EROFS") return true;
      if (code !== "ENOENT") return false; // EACCES and the rest: let opening say what is wrong
    }
  }
  return false;
}

/**
 * Writes the home's store marker once the store is open and whole (written to a temporary name and renamed, so a
 * crash never leaves a half marker). Without it a deleted or emptied data.mdb would silently become a new, empty
 * store; with it, it is refused.
 */
function mark(home: string): void {
  const file = join(home, STORE_MARKER);
  if (existsSync(file)) return;
  try {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, `evolve store marker: this home holds a store in ${join(home, "store")}; if data.mdb goes missing or empty, evolve refuses to start a new one.\nRemove this file only to start an empty store on purpose.\n${new Date().toISOString()}\n`);
    renameSync(tmp, file);
  } catch {
    // best effort: the task and trial folders still tell a used home apart
  }
}
