import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { open } from "lmdb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EvolveError } from "../errors.ts";
import { idTime, newId, openStore, SCHEMA_VERSION, type Store, type TrialRecord } from "./index.ts";
import { expectCode } from "../../tests/support/expect-code.ts";

let root: string;
let n = 0;
const prevHome = process.env.EVOLVE_HOME;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "evolve-store-"));
  process.env.EVOLVE_HOME = join(root, "unused-home");
});
afterAll(() => {
  if (prevHome === undefined) delete process.env.EVOLVE_HOME;
  else process.env.EVOLVE_HOME = prevHome;
  rmSync(root, { recursive: true, force: true });
});

const freshHome = () => join(root, `home-${++n}`);
const now = () => new Date().toISOString();
const DIGEST = `sha256:${"ab".repeat(32)}`;

function trial(id: string, jobId: string, extra: Partial<TrialRecord> = {}): TrialRecord {
  return {
    id,
    job_id: jobId,
    task_digest: DIGEST,
    agent: "oracle",
    status: "QUEUED",
    phase_timings: {},
    created_at: now(),
    updated_at: now(),
    ...extra,
  };
}

/** Raw LMDB access, only to fabricate on-disk states (old, newer, damaged) that evolve itself never writes. */
async function raw(home: string, fn: (dbs: (name: string, encoding?: "json" | "binary") => any) => void): Promise<void> {
  const env = open({ path: join(home, "store"), maxDbs: 16, encoding: "json" });
  env.transactionSync(() => fn((name, encoding = "json") => env.openDB(name, { encoding })));
  await env.close();
}

describe("ids", () => {
  it("are unique and sort in creation order, even within one millisecond", () => {
    const ids = Array.from({ length: 2000 }, () => newId());
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    expect(ids[0]).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    const t = Date.now();
    expect(Math.abs((idTime(newId()) ?? 0) - t)).toBeLessThan(1000);
  });
});

describe("store records", () => {
  let home: string;
  let store: Store;
  beforeAll(() => {
    home = freshHome();
    store = openStore(home);
  });
  afterAll(() => store.close());

  it("creates <home>/store and stamps the current schema", () => {
    expect(readdirSync(join(home, "store"))).toContain("data.mdb");
    expect(store.schemaVersion).toBe(SCHEMA_VERSION);
  });

  it("round-trips datasets by [name, version] and lists one name's versions only", () => {
    const base = { digest: DIGEST, tasks: [{ name: "org/a", digest: DIGEST }], status: "active" as const, created_at: now(), updated_at: now() };
    store.putDataset({ ...base, name: "swe", version: "1" });
    store.putDataset({ ...base, name: "swe", version: "2" });
    store.putDataset({ ...base, name: "swe-lite", version: "1" });
    store.putDataset({ ...base, name: "sw", version: "9" });
    expect(store.getDataset("swe", "2")?.tasks).toEqual(base.tasks);
    expect(store.getDataset("swe", "3")).toBeUndefined();
    expect(store.listDatasets("swe").map((d) => d.version)).toEqual(["1", "2"]);
    expect(store.listDatasets().length).toBe(4);
    expect(store.deleteDataset("swe", "1")).toBe(true);
    expect(store.deleteDataset("swe", "1")).toBe(false);
    expect(store.listDatasets("swe").map((d) => d.version)).toEqual(["2"]);
  });

  it("round-trips tasks by digest", () => {
    const summary = {
      steps: 1, gpus: 0, gpu_types: [], agent_timeout_sec: 600, verifier_timeout_sec: 120,
      network_mode: "public", verifier_mode: "shared", docker_image: null,
    };
    store.putTask({ digest: DIGEST, name: "org/a", stored_at: now(), summary });
    expect(store.getTask(DIGEST)?.summary).toEqual(summary);
    expect(store.listTasks().map((t) => t.digest)).toEqual([DIGEST]);
  });

  it("lists jobs newest first", () => {
    const ids = [newId(), newId(), newId()];
    for (const id of ids) store.putJob({ id, created_at: now(), status: "RUNNING", config: { k: [1, 2] } });
    expect(store.listJobs().map((j) => j.id)).toEqual([...ids].reverse());
    expect(store.listJobs(1).map((j) => j.id)).toEqual([ids[2]]);
    expect(store.getJob(ids[0])?.config).toEqual({ k: [1, 2] });
  });

  it("lists a job's trials through the index, and follows a trial moved to another job", () => {
    const [j1, j2] = [newId(), newId()];
    const [t1, t2, t3] = [newId(), newId(), newId()];
    store.putTrial(trial(t1, j1));
    store.putTrial(trial(t2, j1, { rewards: { reward: 1 }, spend: { live_usd: 0.1, final_usd: null, source: "gateway" } }));
    store.putTrial(trial(t3, j2));
    expect(store.listTrials(j1).map((t) => t.id)).toEqual([t1, t2]);
    expect(store.getTrial(t2)?.rewards).toEqual({ reward: 1 });
    store.putTrial(trial(t2, j2, { status: "SCORED" }));
    expect(store.listTrials(j1).map((t) => t.id)).toEqual([t1]);
    expect(store.listTrials(j2).map((t) => t.id)).toEqual([t2, t3]);
    expect(store.listTrials().length).toBe(3);
  });

  it("refuses to write a record that does not fit its schema", async () => {
    const e = await expectCode(() => store.putTrial({ ...trial(newId(), "j"), agent: "" }), "store_record_invalid");
    expect(e.message).toContain("agent");
  });

  it("assigns gapless positions from 0 and reads from a cursor with a limit", () => {
    const t = newId();
    const other = newId();
    expect(store.lastEventSeq(t)).toBe(-1);
    const first = store.appendEvents(t, [{ type: "prompt", data: { text: "hi" } }, { type: "msg", data: 1 }]);
    expect(first.map((e) => e.seq)).toEqual([0, 1]);
    store.appendEvents(other, [{ type: "x", data: null }]);
    const more = store.appendEvents(t, Array.from({ length: 10 }, (_, i) => ({ type: "chunk", data: { i } })));
    expect(more.map((e) => e.seq)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(store.readEvents(t).length).toBe(12);
    expect(store.readEvents(t, 5, 3)).toEqual([
      { seq: 5, type: "chunk", data: { i: 3 } },
      { seq: 6, type: "chunk", data: { i: 4 } },
      { seq: 7, type: "chunk", data: { i: 5 } },
    ]);
    expect(store.readEvents(t, 12)).toEqual([]);
    expect(store.readEvents(other)).toEqual([{ seq: 0, type: "x", data: null }]);
  });

  it("rolls back every write of a failed transaction", async () => {
    const id = newId();
    await expectCode(
      () =>
        store.transaction(() => {
          store.putJob({ id, created_at: now(), status: "RUNNING", config: null });
          store.appendEvents(id, [{ type: "a", data: 1 }]);
          throw new EvolveError("internal", "boom");
        }),
      "internal",
    );
    expect(store.getJob(id)).toBeUndefined();
    expect(store.readEvents(id)).toEqual([]);
  });
});

describe("store lifecycle", () => {
  it("keeps events and positions across close and reopen", async () => {
    const home = freshHome();
    const s1 = openStore(home);
    s1.appendEvents("t", [{ type: "a", data: 1 }, { type: "b", data: 2 }]);
    await s1.close();
    const s2 = openStore(home);
    expect(s2.appendEvents("t", [{ type: "c", data: 3 }])[0].seq).toBe(2);
    expect(s2.readEvents("t").map((e) => e.type)).toEqual(["a", "b", "c"]);
    await s2.close();
  });

  it("raises store_corrupt for a record that does not fit its schema, and for undecodable bytes", async () => {
    const home = freshHome();
    await openStore(home).close();
    await raw(home, (db) => {
      db("jobs").putSync("bad-shape", { id: "bad-shape", status: 7 });
      db("trials", "binary").putSync("bad-bytes", Buffer.from("{not json"));
      db("events").putSync(["t", 0], { data: 1 });
    });
    const store = openStore(home);
    try {
      const e = await expectCode(() => store.getJob("bad-shape"), "store_corrupt");
      expect(e.message).toContain("jobs");
      expect(e.message.split("\n").length).toBe(1);
      await expectCode(() => store.getTrial("bad-bytes"), "store_corrupt");
      await expectCode(() => store.readEvents("t"), "store_corrupt");
    } finally {
      await store.close();
    }
  });

  it("refuses a store written by a newer evolve, and leaves it as it was", async () => {
    const home = freshHome();
    await openStore(home).close();
    await raw(home, (db) => db("meta").putSync("schema_version", SCHEMA_VERSION + 1));
    const e = await expectCode(() => openStore(home), "store_too_new");
    expect(e.message).toBe(
      `the store at ${join(home, "store")} was written by a newer evolve (schema ${SCHEMA_VERSION + 1}, this build knows ${SCHEMA_VERSION})`,
    );
    expect(e.hint).toBe("upgrade evolve");
    await raw(home, (db) => expect(db("meta").get("schema_version")).toBe(SCHEMA_VERSION + 1));
  });

  it("migrates a version-0 store (no schema stamp, no trials-by-job index)", async () => {
    const home = freshHome();
    mkdirSync(join(home, "store"), { recursive: true });
    await raw(home, (db) => {
      db("trials").putSync("t-old", trial("t-old", "job-old"));
      db("trials").putSync("t-old2", trial("t-old2", "job-old"));
    });
    const store = openStore(home);
    try {
      expect(store.schemaVersion).toBe(SCHEMA_VERSION);
      expect(store.listTrials("job-old").map((t) => t.id)).toEqual(["t-old", "t-old2"]);
    } finally {
      await store.close();
    }
    await raw(home, (db) => expect(db("meta").get("schema_version")).toBe(SCHEMA_VERSION));
  });

  it("says store_unavailable, on one line, when the home cannot hold a store", async () => {
    const file = join(root, `a-file-${++n}`);
    writeFileSync(file, "x");
    const e = await expectCode(() => openStore(file), "store_unavailable");
    expect(e.message).toContain(join(file, "store"));
    expect(e.message.split("\n").length).toBe(1);
    const home = freshHome();
    mkdirSync(home);
    writeFileSync(join(home, "store"), "not a directory");
    await expectCode(() => openStore(home), "store_unavailable");
  });
});
