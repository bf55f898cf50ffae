/**
 * Schema versions of the store and the ordered steps between them. Opening an older store runs every step from
 * its version to {@link SCHEMA_VERSION} inside ONE write transaction together with the new version stamp, so a
 * crash mid-way leaves the old store untouched and a concurrent opener either sees the old store (and migrates
 * it itself, finding nothing left to do once it holds the write lock) or the finished one.
 */
import type { Database } from "lmdb";

/** The sub-databases of one store. */
export interface Dbs {
  meta: Database<unknown, string>;
  datasets: Database<unknown, [string, string]>;
  tasks: Database<unknown, string>;
  jobs: Database<unknown, string>;
  trials: Database<unknown, string>;
  /** Index: [job id, trial id] → true, so a job's trials are one range scan. */
  trialsByJob: Database<unknown, [string, string]>;
  /** [trial id, seq] → {type, data}. */
  events: Database<unknown, [string, number]>;
  /**
   * Spend ledger: [scope, name, period] → USD settled so far (user credits: period ""; team budgets: "YYYY-MM").
   * Added without a schema step: an absent db reads as nothing spent, and older builds never open it.
   */
  ledger: Database<unknown, [string, string, string]>;
  /**
   * API tokens of `evolve serve`: id → ApiTokenRecord (hashed). Added without a schema step, as the ledger: an absent
   * db reads as no token created, and older builds never open it.
   */
  tokens: Database<unknown, string>;
  /** Teams (engine/org): name → OrgRecord; invites: id → InviteRecord (hashed). Added without a schema step, as the ledger. */
  orgs: Database<unknown, string>;
  invites: Database<unknown, string>;
}

/** The schema version this build writes. */
export const SCHEMA_VERSION = 1;

/** The key in the meta db holding the schema version. A store without it is version 0. */
export const SCHEMA_KEY = "schema_version";

/** One step from `from` to `from + 1`; runs inside the migration's write transaction. */
export interface Migration {
  from: number;
  describe: string;
  run(dbs: Dbs): void;
}

/** Ordered: MIGRATIONS[i].from === i. */
export const MIGRATIONS: readonly Migration[] = [
  {
    from: 0,
    // Version 0 stores predate the meta db and kept no trials-by-job index; listing a job's trials needs it.
    describe: "build the trials-by-job index",
    run(dbs) {
      for (const { key, value } of dbs.trials.getRange({})) {
        const jobId = (value as { job_id?: unknown } | undefined)?.job_id;
        if (typeof jobId === "string" && jobId.length > 0) dbs.trialsByJob.putSync([jobId, key], true);
      }
    },
  },
];

/** Runs the steps from `version` up to {@link SCHEMA_VERSION}. Call inside a write transaction. */
export function migrate(dbs: Dbs, version: number): void {
  for (let v = version; v < SCHEMA_VERSION; v++) {
    const step = MIGRATIONS[v];
    if (!step || step.from !== v) throw new Error(`no migration from store schema ${v}`);
    step.run(dbs);
  }
  dbs.meta.putSync(SCHEMA_KEY, SCHEMA_VERSION);
}
