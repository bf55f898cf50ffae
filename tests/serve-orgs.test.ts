/**
 * Org scopes of `evolve serve` (issue 23 §1, platform-teams.md): a token acts as the user that made it, and every
 * route of the route table answers a record of an org that user is not in exactly as it answers a missing one (same
 * status, same body, same type): the request is made against a store holding bob's team's records and against a store
 * holding nothing, and the two answers must be identical. The table is iterated, so a new route is covered here
 * without a line added. A member of the team reads the same records, and a record from before teams (no org, no
 * creator) is personal to serve's own user.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishDataset } from "../engine/dataset.ts";
import { createInvite, createOrg, joinOrg } from "../engine/org/mod.ts";
import { createJob } from "../engine/job/job.ts";
import { createServeApp } from "../engine/serve/app.ts";
import { API_BASE } from "../engine/serve/openapi.ts";
import { ROUTES, type Route } from "../engine/serve/routes.ts";
import { createToken } from "../engine/serve/tokens.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import { jobConfig } from "./support/job-config.ts";
import { makeJsonStore, writeEvolveProject, type JsonStoreIds } from "./support/json-store.ts";
import { makeMetaRun } from "./support/metaharness-run.ts";

const root = resolve(__dirname, "..");
let full: string;
let empty: string;
let ids: JsonStoreIds;
let fullStore: Store;
let emptyStore: Store;
const tok = { alice: "", bob: "", carol: "" };
const started: string[] = [];
let appFull: ReturnType<typeof createServeApp>;
let appEmpty: ReturnType<typeof createServeApp>;

/** POST /jobs in both apps: records who it was started as, then refuses alike (no job is really started here). */
const startJob = async (_flags: Record<string, unknown>, user: string): Promise<{ id: string }> => {
  started.push(user);
  throw new Error("not started in this test");
};

beforeAll(async () => {
  full = mkdtempSync(join(tmpdir(), "evolve-serve-orgs-"));
  empty = mkdtempSync(join(tmpdir(), "evolve-serve-orgs-empty-"));
  ids = await makeJsonStore(full);
  fullStore = openStore(full);
  // bob's team acme holds every job and the dataset; serve runs as bob, so the project and Meta-Harness run are his
  createOrg(fullStore, "bob", "acme", "Acme Lab");
  for (const j of fullStore.listJobs()) fullStore.putJob({ ...j, org: "acme", created_by: "bob" });
  // and a check job, for /checks
  createJob(fullStore, { ...jobConfig(1), kind: "check" }, undefined, undefined, { org: "acme", created_by: "bob" });
  await publishDataset(fullStore, full, join(root, "fixtures/tasks/valid/minimal"), { name: "demo", version: "1.0", org: "acme", created_by: "bob" });
  const project = join(full, "evolve-project");
  writeEvolveProject(project);
  makeMetaRun(join(full, "mh-run"));
  const alice = createToken(fullStore, { scope: "run", name: "alice", user: "alice" });
  tok.alice = alice.token;
  tok.bob = createToken(fullStore, { scope: "run", name: "bob", user: "bob" }).token;
  const carol = createToken(fullStore, { scope: "run", name: "carol", user: "carol" });
  tok.carol = carol.token;
  // the empty store knows alice's and carol's tokens and nothing else
  emptyStore = openStore(empty);
  emptyStore.putToken(alice.record);
  emptyStore.putToken(carol.record);
  const where = { project, metaharnessRun: join(full, "mh-run"), user: "bob", startJob, version: "0-test" };
  appFull = createServeApp({ store: fullStore, home: full, ...where });
  appEmpty = createServeApp({ store: emptyStore, home: empty, ...where });
});

afterAll(async () => {
  await fullStore?.close();
  await emptyStore?.close();
  rmSync(full, { recursive: true, force: true });
  rmSync(empty, { recursive: true, force: true });
});

/** A concrete URL for a route of the table, on bob's team's records. */
function concrete(r: Route): string {
  const values: Record<string, string> = { job: ids.doneJob, trial: ids.scored, stream: "verifier", name: "demo", version: "1.0", screen: "round-1" };
  const path = r.path.replace(/:([a-z]+)/g, (_m, k: string) => values[k]!);
  return r.path.includes("/files") ? `${path}?path=app/out.txt` : path;
}

async function call(app: ReturnType<typeof createServeApp>, r: Route, token: string) {
  const res = await app.fetch(
    new Request(`http://127.0.0.1${API_BASE}${concrete(r)}`, {
      method: r.method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(r.method === "POST" ? { body: JSON.stringify({ path: "tasks", agent: "oracle", org: "acme" }) } : {}),
    }),
  );
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
}

/** Routes whose answer holds no record of any org: the same for everyone who may call them. */
const NO_RECORD = new Set(["GET /openapi.json", "POST /jobs"]);

describe("evolve serve: org scopes", () => {
  it("answers every route for a record of another org exactly as for a missing record", async () => {
    expect(ROUTES.length).toBeGreaterThan(20);
    const leaks: string[] = [];
    const unseen: string[] = [];
    for (const r of ROUTES) {
      const key = `${r.method} ${r.path}`;
      const outsider = await call(appFull, r, tok.alice);
      const missing = await call(appEmpty, r, tok.alice);
      if (JSON.stringify(outsider) !== JSON.stringify(missing)) leaks.push(`${key}: ${JSON.stringify(outsider).slice(0, 200)} vs ${JSON.stringify(missing).slice(0, 200)}`);
      if (NO_RECORD.has(key)) continue;
      // and the record is really there: bob, in acme, gets something else (the record, or its listing)
      const member = await call(appFull, r, tok.bob);
      if (JSON.stringify(member) === JSON.stringify(outsider)) unseen.push(`${key}: ${JSON.stringify(member).slice(0, 200)}`);
    }
    expect(leaks).toEqual([]);
    expect(unseen).toEqual([]);
  });

  it("answers the dashboard's pages of another org's records exactly as for missing ones", async () => {
    const page = async (app: ReturnType<typeof createServeApp>, path: string, token: string) => {
      const res = await app.fetch(new Request(`http://127.0.0.1${path}`, { headers: { cookie: `evolve_token=${token}` } }));
      return { status: res.status, body: await res.text() };
    };
    for (const path of [`/jobs/${ids.doneJob}`, `/trials/${ids.scored}`, "/datasets/demo"]) {
      const outsider = await page(appFull, path, tok.alice);
      expect(outsider, path).toEqual(await page(appEmpty, path, tok.alice));
      expect(outsider.status, path).toBe(404);
      // bob, in acme, sees the page
      expect((await page(appFull, path, tok.bob)).status, path).toBe(200);
    }
    // the jobs list names none of acme's jobs to an outsider
    expect((await page(appFull, "/jobs", tok.alice)).body).not.toContain(ids.doneJob);
    expect((await page(appFull, "/jobs", tok.bob)).body).toContain(ids.doneJob);
  });

  it("a listing holds another org's jobs and datasets for nobody outside it", async () => {
    const get = async (path: string, token: string) => (await appFull.fetch(new Request(`http://127.0.0.1${API_BASE}${path}`, { headers: { authorization: `Bearer ${token}` } }))).json();
    expect(await get("/jobs?limit=100", tok.carol)).toEqual([]);
    expect(await get("/datasets", tok.carol)).toEqual([]);
    const bobs = (await get("/jobs?limit=100", tok.bob)) as { id: string }[];
    expect(bobs.map((j) => j.id)).toContain(ids.doneJob);
  });

  it("a member who joined with an invite reads the team's records; a prefix of another org's id resolves to nothing", async () => {
    const r = (path: string, token: string) => appFull.fetch(new Request(`http://127.0.0.1${API_BASE}${path}`, { headers: { authorization: `Bearer ${token}` } }));
    const before = await r(`/jobs/${ids.doneJob.slice(0, 20)}`, tok.carol);
    expect(before.status).toBe(404);
    expect(((await before.json()) as { error: { code: string } }).error.code).toBe("job_not_found");
    const { token } = createInvite(fullStore, "bob", "acme");
    joinOrg(fullStore, "carol", token);
    expect((await r(`/jobs/${ids.doneJob}`, tok.carol)).status).toBe(200);
    expect((await r(`/trials/${ids.scored}/trace`, tok.carol)).status).toBe(200);
    expect((await r(`/datasets/demo`, tok.carol)).status).toBe(200);
    expect(((await (await r("/jobs?limit=100&scope=shared", tok.carol)).json()) as { id: string }[]).map((j) => j.id)).toContain(ids.doneJob);
    expect(await (await r("/jobs?limit=100&scope=my", tok.carol)).json()).toEqual([]);
  });

  it("starts a job over the API as the token's user", async () => {
    started.length = 0;
    await appFull.fetch(new Request(`http://127.0.0.1${API_BASE}/jobs`, { method: "POST", headers: { authorization: `Bearer ${tok.alice}` }, body: JSON.stringify({ path: "x" }) }));
    expect(started).toEqual(["alice"]);
  });
});

describe("records from before teams", () => {
  it("a job without an org or creator is personal to serve's own user; an old token acts as that user", async () => {
    const home = mkdtempSync(join(tmpdir(), "evolve-serve-orgs-old-"));
    try {
      const ids = await makeJsonStore(home);
      const store = openStore(home);
      // tokens made before teams carry no user
      const old = createToken(store, { name: "old" }).token;
      const dave = createToken(store, { name: "dave", user: "dave" }).token;
      const app = createServeApp({ store, home, version: "0-test", user: "erin" });
      const get = (path: string, token: string) => app.fetch(new Request(`http://127.0.0.1${API_BASE}${path}`, { headers: { authorization: `Bearer ${token}` } }));
      expect((await get(`/jobs/${ids.doneJob}`, old)).status).toBe(200);
      expect((await get(`/jobs/${ids.doneJob}`, dave)).status).toBe(404);
      await store.close();
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
