/**
 * `evolve serve` (engine/serve, issue 23 §1) without a container engine: the app answered through app.fetch on a
 * small real store (tests/support/json-store.ts). Every route refuses a request without a live token; a read token
 * starts no job; the bodies are the CLI's own `--json` documents for the same records (run through the CLI host);
 * path tricks are refused on every route that takes a path; a live trace arrives over SSE as it is appended; the
 * OpenAPI document lists exactly the route table; an exposed bind without a token and an unsafe socket folder are
 * refused, and the socket serves this user without a token.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishDataset } from "../engine/dataset.ts";
import { createServeApp } from "../engine/serve/app.ts";
import { startServe } from "../engine/serve/listen.ts";
import { API_BASE, openApiDocument, openApiPath } from "../engine/serve/openapi.ts";
import { NEXT_CURSOR, ROUTES, type Route } from "../engine/serve/routes.ts";
import { createToken, revokeToken } from "../engine/serve/tokens.ts";
import { openStore, trialDir, type Store } from "../engine/store/index.ts";
import { promptEvent } from "../engine/trace/events.ts";
import { openTraceWriter } from "../engine/trace/store.ts";
import { cliHost } from "./support/cli-host.ts";
import { makeJsonStore, writeEvolveProject, type JsonStoreIds } from "./support/json-store.ts";
import { makeMetaRun } from "./support/metaharness-run.ts";

const root = resolve(__dirname, "..");
const host = cliHost();
let home: string;
let ids: JsonStoreIds;
let store: Store;
let app: ReturnType<typeof createServeApp>;
const tokens = { read: "", run: "", revoked: "" };

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-serve-"));
  ids = await makeJsonStore(home);
  store = openStore(home);
  await publishDataset(store, home, join(root, "fixtures/tasks/valid/minimal"), { name: "demo", version: "1.0" });
  tokens.read = createToken(store, { name: "reader" }).token;
  tokens.run = createToken(store, { scope: "run", name: "runner" }).token;
  const gone = createToken(store, { name: "gone" });
  revokeToken(store, gone.record.id);
  tokens.revoked = gone.token;
  // an evolution project with one round (its screen `round-1`), and a Meta-Harness run, for the evolver's routes
  writeEvolveProject(project());
  const made = evolve(["harness", "scaffold", "--project", project(), "--where", "prompt", "--pathology", "p", "--hypothesis", "h", "--marker", "M", "--json"]);
  expect(made.code, made.stderr).toBe(0);
  evolve(["harness", "round", "--on-host", "--project", project(), "--holdout", join(project(), "evolve", "evals")]);
  makeMetaRun(metaRun());
  app = createServeApp({ store, home, version: "0-test", project: project(), metaharnessRun: metaRun() });
});

const project = () => join(home, "evolve-project");
const metaRun = () => join(home, "mh-run");

afterAll(async () => {
  host.close();
  await store?.close();
  rmSync(home, { recursive: true, force: true });
});

function evolve(args: string[]) {
  return host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: home, EVOLVE_AGENTS_DIR: join(home, "agents"), NO_COLOR: "1" }, timeoutMs: 60_000 });
}

/** One request to the app; `token` undefined sends no Authorization header. */
async function call(path: string, o: { token?: string; method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<Response> {
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
  return await app.fetch(new Request(`http://127.0.0.1${API_BASE}${path}`, { method: o.method ?? "GET", headers, ...(o.body !== undefined ? { body: o.body } : {}) }));
}

/** A concrete URL for a route of the table, on the test store's records. */
function concrete(r: Route): string {
  const values: Record<string, string> = { job: ids.doneJob, trial: ids.scored, stream: "verifier", name: "demo", version: "1.0", screen: "round-1" };
  const path = r.path.replace(/:([a-z]+)/g, (_m, k: string) => values[k]!);
  return r.path.includes("/files/content") ? `${path}?path=app/out.txt` : path;
}

const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string; hint: string } }).error;

describe("evolve serve: tokens", () => {
  it("refuses every route without a token, with a malformed or unknown one, and with a revoked one (401)", async () => {
    for (const r of ROUTES) {
      for (const [token, code] of [
        [undefined, "serve_token_missing"],
        ["evk_nope", "serve_token_refused"],
        [`evk_01AAAAAAAAAAAAAAAAAAAAAAAA_${"x".repeat(43)}`, "serve_token_refused"],
        [tokens.revoked, "serve_token_refused"],
      ] as const) {
        const res = await call(concrete(r), { token, method: r.method, body: r.method === "POST" ? "{}" : undefined });
        expect(res.status, `${r.method} ${r.path} with ${token ?? "no token"}`).toBe(401);
        expect((await errorOf(res)).code).toBe(code);
      }
    }
  });

  it("answers a path trick without a token with 401 too: a stranger learns nothing about paths", async () => {
    const res = await call(`/trials/..%2f..%2fetc/files/content?path=../../etc/passwd`);
    expect(res.status).toBe(401);
    expect((await errorOf(res)).code).toBe("serve_token_missing");
  });

  it("answers every route to a live token (none of them is unrouted)", async () => {
    for (const r of ROUTES.filter((x) => x.method === "GET")) {
      const res = await call(concrete(r), { token: tokens.read });
      const body = res.status === 200 ? undefined : await errorOf(res);
      expect(res.status, `${r.path}: ${JSON.stringify(body)}`).toBe(200);
      await res.body?.cancel();
    }
  });

  it("lets a read token read but not start a job (403), and a run token past the scope check", async () => {
    const refused = await call("/jobs", { token: tokens.read, method: "POST", body: JSON.stringify({ path: "fixtures/tasks/valid/minimal" }) });
    expect(refused.status).toBe(403);
    expect((await errorOf(refused)).code).toBe("serve_scope_refused");
    // this app was built without a job starter: the run token gets past the scope, to the usage error
    const allowed = await call("/jobs", { token: tokens.run, method: "POST", body: "{}" });
    expect(allowed.status).toBe(400);
    expect((await errorOf(allowed)).code).toBe("usage");
  });

  it("stores only the hash and shows the token once; list and revoke never print it", () => {
    const made = evolve(["auth", "token", "create", "--scope", "run", "--name", "cli", "--json"]);
    expect(made.code).toBe(0);
    const { token, id } = JSON.parse(made.stdout) as { token: string; id: string };
    store.refresh();
    const rec = store.getToken(id)!;
    expect(rec.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(rec)).not.toContain(token.slice(token.indexOf("_", 4) + 1));
    const list = evolve(["auth", "token", "list", "--json"]);
    expect(list.stdout).not.toContain(token);
    expect(JSON.parse(list.stdout).find((r: { id: string }) => r.id === id)).toMatchObject({ scope: "run", name: "cli", revoked_at: null });
    expect(evolve(["auth", "token", "revoke", id]).code).toBe(0);
    const again = evolve(["auth", "token", "revoke", "NOSUCHID"]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("token_not_found");
  });

  it("refuses a token revoked while the server runs, from the next request on", async () => {
    const t = createToken(store, { name: "short" });
    expect((await call("/jobs", { token: t.token })).status).toBe(200);
    revokeToken(store, t.record.id);
    expect((await call("/jobs", { token: t.token })).status).toBe(401);
  });
});

describe("evolve serve: the CLI's documents", () => {
  const same = async (path: string, args: string[]) => {
    const res = await call(path, { token: tokens.read });
    expect(res.status, path).toBe(200);
    const cli = evolve([...args, "--json"]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(await res.json(), path).toEqual(JSON.parse(cli.stdout));
  };

  it("answers jobs, trials, kept files and datasets with exactly the CLI's --json", async () => {
    await same("/jobs", ["job", "list"]);
    await same(`/jobs/${ids.doneJob}`, ["job", "show", ids.doneJob]);
    await same(`/jobs/${ids.doneJob}?status=SCORED`, ["job", "show", ids.doneJob, "--status", "SCORED"]);
    await same("/checks", ["job", "list", "--kind", "check"]);
    await same(`/trials/${ids.scored}`, ["trial", "show", ids.scored]);
    await same(`/trials/${ids.scored}/files?path=app`, ["trial", "files", "ls", ids.scored, "/app"]);
    await same(`/trials/${ids.scored}/files/content?path=app/out.txt`, ["trial", "files", "cat", ids.scored, "/app/out.txt"]);
    await same(`/trials/${ids.scored}/files/changes`, ["trial", "files", "changes", ids.scored]);
    await same(`/trials/${ids.scored}/logs/agent`, ["trial", "logs", ids.scored, "--stream", "agent"]);
    await same(`/trials/${ids.scored}/logs/verifier`, ["trial", "logs", ids.scored, "--stream", "verifier"]);
    await same(`/trials/${ids.scored}/logs/metrics`, ["trial", "logs", ids.scored, "--stream", "metrics"]);
    await same("/evolve/genebank", ["harness", "genebank", "show", "--project", project()]);
    await same("/metaharness/status", ["metaharness", "status", metaRun()]);
    await same("/datasets", ["dataset", "list"]);
    await same("/datasets/demo", ["dataset", "show", "demo"]);
    await same("/datasets/demo/1.0", ["dataset", "show", "demo@1.0"]);
  });

  it("answers the trace with trial trace's lines and filters, and an artifact with its bytes", async () => {
    for (const [q, flags] of [
      ["", []],
      ["?type=error", ["--type", "error"]],
      ["?grep=denied", ["--grep", "denied"]],
      ["?tail=1", ["--tail", "1"]],
      ["?cursor=0", ["--cursor", "0"]],
    ] as const) {
      const res = await call(`/trials/${ids.scored}/trace${q}`, { token: tokens.read });
      expect(res.status).toBe(200);
      expect(await res.text(), q).toBe(evolve(["trial", "trace", ids.scored, ...flags, "--json"]).stdout);
    }
    const bad = await call(`/trials/${ids.scored}/trace?type=nope`, { token: tokens.read });
    expect(bad.status).toBe(400);
    expect((await errorOf(bad)).code).toBe("trace_kind_unknown");
    const verifier = await call(`/trials/${ids.scored}/artifacts/verifier`, { token: tokens.read });
    expect(await verifier.text()).toBe(evolve(["trial", "download", ids.scored, "--stream", "verifier"]).stdout);
    // one larger than the queue between the engine and the client arrives whole, in order
    const log = join(trialDir(home, ids.scored), "verifier", "test-stdout.txt");
    const small = readFileSync(log, "utf8");
    const big = Array.from({ length: 60_000 }, (_, i) => `line ${i} ${"x".repeat(40)}\n`).join("");
    writeFileSync(log, big);
    try {
      expect(await (await call(`/trials/${ids.scored}/artifacts/verifier`, { token: tokens.read })).text()).toBe(big);
    } finally {
      writeFileSync(log, small);
    }
    // one the trial never stored is refused before any byte: a 404 with its code, never an empty 200
    const absent = await call(`/trials/${ids.scored}/artifacts/trace-stderr`, { token: tokens.read });
    expect(absent.status).toBe(404);
    expect((await errorOf(absent)).code).toBe("artifact_not_recorded");
    const parsed = await call(`/trials/${ids.scored}/artifacts/trace-parsed`, { token: tokens.read });
    expect(await parsed.text()).toBe(evolve(["trial", "download", ids.scored, "--stream", "trace-parsed"]).stdout);
    const gone = await call(`/trials/NOSUCHTRIAL`, { token: tokens.read });
    expect(gone.status).toBe(404);
    expect(await errorOf(gone)).toMatchObject({ code: "trial_not_found", hint: expect.any(String) });
  });

  it("answers the evolver's rounds and screens as the round wrote them, and only for the served project", async () => {
    const rounds = (await (await call("/evolve/rounds", { token: tokens.read })).json()) as { round: number; screen_id: string }[];
    expect(rounds.map((r) => [r.round, r.screen_id])).toEqual([[1, "round-1"]]);
    const screen = (await (await call("/evolve/screens/round-1", { token: tokens.read })).json()) as { id: string; candidates: unknown[]; parents: unknown };
    expect(screen.id).toBe("round-1");
    expect(screen.candidates.length).toBe(1);
    const bare = createServeApp({ store, home, version: "0" });
    const res = await bare.fetch(new Request(`http://127.0.0.1${API_BASE}/evolve/genebank?project=/etc`, { headers: { authorization: `Bearer ${tokens.read}` } }));
    expect(res.status).toBe(404);
    expect((await errorOf(res)).code).toBe("evolve_project_missing");
  });

  it("pages lists with limit and cursor, the body staying the CLI's rows", async () => {
    const all = (await (await call("/jobs", { token: tokens.read })).json()) as { id: string }[];
    expect(all.length).toBe(2);
    const first = await call("/jobs?limit=1", { token: tokens.read });
    expect(await first.json()).toEqual([all[0]]);
    const next = first.headers.get(NEXT_CURSOR)!;
    expect(next).toBe(all[0]!.id);
    const second = await call(`/jobs?limit=1&cursor=${next}`, { token: tokens.read });
    expect(await second.json()).toEqual([all[1]]);
    expect(second.headers.get(NEXT_CURSOR)).toBeNull();
    expect((await call("/jobs?limit=100000", { token: tokens.read })).status).toBe(400);
  });

  it("hands out the trial tree and the job archive as .tar.gz", async () => {
    for (const path of [`/trials/${ids.scored}/download`, `/jobs/${ids.doneJob}/download`]) {
      const res = await call(path, { token: tokens.read });
      expect(res.status).toBe(200);
      const bytes = Buffer.from(await res.arrayBuffer());
      expect(bytes[0]).toBe(0x1f);
      expect(bytes[1]).toBe(0x8b);
    }
  });
});

describe("evolve serve: path tricks", () => {
  const withParams = ROUTES.filter((r) => r.path.includes(":"));

  it("refuses an encoded slash, dot, backslash or NUL in every path parameter of every route", async () => {
    expect(withParams.length).toBeGreaterThan(10);
    for (const r of withParams) {
      for (const trick of ["..%2f..%2fetc%2fpasswd", "%2e%2e", "x%00y", "x%5c..%5cy", "%2E%2E%2Fstore"]) {
        const url = r.path.replace(/:([a-z]+)/, trick).replace(/:([a-z]+)/g, "x");
        const res = await call(url, { token: tokens.run, method: r.method, body: r.method === "POST" ? "{}" : undefined });
        const code = (await errorOf(res)).code;
        // a whole segment `%2e%2e` is resolved by the URL parser itself (WHATWG, as every runtime's server does)
        // before routing: the request climbs to a path no route has, and is refused there
        if (trick === "%2e%2e") expect([res.status, code], `${r.path} with ${trick}`).toEqual([404, "serve_route_unknown"]);
        else expect([res.status, code], `${r.path} with ${trick}`).toEqual([400, "path_refused"]);
      }
    }
  });

  it("refuses a climbing, absolute, NUL or backslash tree path on every route that takes one", async () => {
    const takesPath = ROUTES.filter((r) => r.query?.some((q) => q.name === "path"));
    expect(takesPath.length).toBe(2);
    for (const r of takesPath) {
      for (const trick of ["../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "/etc/passwd", "app/%00x", "app/../../x", "app%5c..%5c..%5cx", "%2fetc%2fpasswd"]) {
        const res = await call(`${concrete(r).split("?")[0]}?path=${trick}`, { token: tokens.read });
        expect(res.status, `${r.path}?path=${trick}`).toBe(400);
        expect((await errorOf(res)).code).toBe("path_refused");
      }
    }
  });

  it("never follows a link out of the kept tree", async () => {
    const kept = join(trialDir(home, ids.scored), "fs", "app");
    symlinkSync("/etc/passwd", join(kept, "link.txt"));
    const manifest = join(trialDir(home, ids.scored), "fs-changes.json");
    const m = JSON.parse(await (await import("node:fs/promises")).readFile(manifest, "utf8"));
    m.files.push({ path: "/app/link.txt", kind: "added", type: "file", size: 10, mode: "0644", uid: 0, gid: 0 });
    writeFileSync(manifest, JSON.stringify(m));
    try {
      const res = await call(`/trials/${ids.scored}/files/content?path=app/link.txt`, { token: tokens.read });
      expect(res.status).not.toBe(200);
      const text = await res.text();
      expect(text).not.toContain("root:");
      expect(JSON.parse(text).error.code).toBe("kept_file_unreadable");
    } finally {
      rmSync(join(kept, "link.txt"));
      m.files.pop();
      writeFileSync(manifest, JSON.stringify(m));
    }
  });
});

describe("evolve serve: the live trace", () => {
  it("delivers over SSE the events appended while the client is connected, and ends when the trial settles", async () => {
    const t = store.getTrial(ids.queued)!;
    store.putTrial({ ...t, status: "RUNNING", attempt_phase: "agent", updated_at: new Date().toISOString() });
    const writer = openTraceWriter(home, t.id);
    writer.append([promptEvent("first")]);
    const res = await call(`/trials/${t.id}/trace/stream`, { token: tokens.read });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let got = "";
    const until = async (text: string) => {
      const deadline = Date.now() + 15_000;
      while (!got.includes(text)) {
        if (Date.now() > deadline) throw new Error(`never saw ${text} in ${got}`);
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before ${text}: ${got}`);
        got += dec.decode(value, { stream: true });
      }
    };
    await until('"first"');
    expect(got).toContain("id: 0\nevent: trace\n");
    // appended after the client connected: it arrives on the open stream
    writer.append([promptEvent("second, while connected")]);
    await until("second, while connected");
    expect(got).toContain("id: 1\nevent: trace\n");
    writer.close();
    store.putTrial({ ...store.getTrial(t.id)!, status: "CANCELLED", updated_at: new Date().toISOString() });
    await until("event: end");
    expect(got).toContain('"status":"CANCELLED"');
    // follow=1 on the trace route is the same stream, resumed after a cursor
    const again = await call(`/trials/${t.id}/trace?follow=1&cursor=0`, { token: tokens.read });
    const text = await again.text();
    expect(text).not.toContain('"first"');
    expect(text).toContain("second, while connected");
    expect(text).toContain("event: end");
  });
});

describe("evolve serve: the OpenAPI document", () => {
  it("lists exactly the route table's routes, and the app serves it", async () => {
    const doc = openApiDocument("0-test");
    const listed = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)).sort();
    expect(listed).toEqual(ROUTES.map((r) => `${r.method} ${openApiPath(r.path)}`).sort());
    const served = await call("/openapi.json", { token: tokens.read });
    expect(await served.json()).toEqual(JSON.parse(JSON.stringify(doc)));
    expect(doc.openapi).toBe("3.1.0");
    // and nothing else is routed: a path outside the table is a 404 with its code, not a handler
    const unknown = await call("/jobs/x/nothing", { token: tokens.read });
    expect(unknown.status).toBe(404);
    expect((await errorOf(unknown)).code).toBe("serve_route_unknown");
  });
});

describe("evolve serve: listeners", () => {
  it("refuses to bind beyond loopback while no token exists, and says so", async () => {
    const bare = mkdtempSync(join(tmpdir(), "evolve-serve-bare-"));
    const s = openStore(bare);
    try {
      await expect(startServe({ store: s, home: bare, version: "0" }, { host: "0.0.0.0", port: 0 })).rejects.toMatchObject({ code: "serve_public_without_token" });
      const local = await startServe({ store: s, home: bare, version: "0" }, { host: "127.0.0.1", port: 0 });
      await local.close();
    } finally {
      await s.close();
      rmSync(bare, { recursive: true, force: true });
    }
  });

  it("serves this user on a 0600 socket without a token, and refuses a socket folder others can enter", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-serve-sock-"));
    try {
      const open = join(dir, "open");
      mkdirSync(open, { mode: 0o755 });
      chmodSync(open, 0o755);
      await expect(startServe({ store, home, version: "0" }, { socket: join(open, "s.sock") })).rejects.toMatchObject({ code: "serve_socket_unsafe" });
      const sock = join(dir, "private", "serve.sock");
      const serving = await startServe({ store, home, version: "0" }, { socket: sock });
      try {
        expect(serving.tcp).toBeUndefined();
        expect(statSync(sock).mode & 0o777).toBe(0o600);
        expect(statSync(join(dir, "private")).mode & 0o777).toBe(0o700);
        const body = await new Promise<{ status: number; text: string }>((done, fail) => {
          const req = request({ socketPath: sock, path: `${API_BASE}/trials/${ids.scored}` }, (res) => {
            let text = "";
            res.on("data", (c) => (text += c));
            res.on("end", () => done({ status: res.statusCode!, text }));
          });
          req.on("error", fail);
          req.end();
        });
        expect(body.status).toBe(200);
        expect(JSON.parse(body.text).id).toBe(ids.scored);
      } finally {
        await serving.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("evolve serve: the dashboard behind the token", () => {
  /** The dashboard's pages on the test store, evolution pages included. */
  const pages = () => [
    "/jobs",
    `/jobs/${ids.doneJob}`,
    `/jobs/${ids.openJob}`,
    `/compare?jobs=${ids.doneJob},${ids.openJob}`,
    `/trials/${ids.scored}`,
    `/trials/${ids.scored}/steps`,
    `/trials/${ids.scored}/events?after=-1`,
    "/datasets",
    "/datasets/demo",
    "/evolution",
    "/evolution/screens/round-1",
    "/evolution/genebank",
    "/metaharness",
  ];
  const page = (path: string, headers: Record<string, string> = {}, method = "GET") => app.fetch(new Request(`http://127.0.0.1${path}`, { method, headers }));

  /** Logs in through the form and returns the Cookie header the browser would send after. */
  async function loginCookie(token: string): Promise<{ res: Response; cookie: string }> {
    const res = await app.fetch(new Request("http://127.0.0.1/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://127.0.0.1" }, body: new URLSearchParams({ token, next: "/jobs" }).toString() }));
    const set = res.headers.get("set-cookie") ?? "";
    return { res, cookie: set.split(";")[0]! };
  }

  it("sends every page to the login form without the cookie, and answers it with the cookie", async () => {
    const { res, cookie } = await loginCookie(tokens.read);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/jobs");
    const set = res.headers.get("set-cookie")!;
    expect(set).toMatch(/^evolve_token=evk_/);
    expect(set).toMatch(/HttpOnly/i);
    expect(set).toMatch(/SameSite=Strict/i);
    expect(set).toMatch(/Path=\//);
    for (const path of ["/", ...pages()]) {
      const anon = await page(path);
      expect(anon.status, path).toBe(303);
      expect(anon.headers.get("location"), path).toBe(`/login?next=${encodeURIComponent(path)}`);
      const bad = await page(path, { cookie: `evolve_token=${tokens.revoked}` });
      expect(bad.status, path).toBe(303);
      const ok = await page(path, { cookie });
      expect(ok.status, `${path}: ${ok.status === 200 ? "" : await ok.clone().text()}`).toBe(path === "/" ? 302 : 200);
      await ok.body?.cancel();
    }
    // the API reads with the cookie too (the pages' own fetches), and still answers 401 JSON without it
    expect((await page(`${API_BASE}/jobs`, { cookie })).status).toBe(200);
    expect((await errorOf(await page(`${API_BASE}/jobs`))).code).toBe("serve_token_missing");
  });

  it("logs in by link too, and refuses an unknown token, a cross-site form and a redirect off this server", async () => {
    const byLink = await page(`/login?token=${tokens.read}&next=${encodeURIComponent("/datasets")}`);
    expect(byLink.status).toBe(303);
    expect(byLink.headers.get("location")).toBe("/datasets");
    expect(byLink.headers.get("set-cookie")).toMatch(/^evolve_token=/);
    expect((await page("/login")).status).toBe(200);
    const unknown = await page(`/login?token=${tokens.revoked}`);
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get("set-cookie")).toBeNull();
    const cross = await app.fetch(new Request("http://127.0.0.1/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://evil.example" }, body: `token=${tokens.read}` }));
    expect(cross.status).toBe(403);
    expect(cross.headers.get("set-cookie")).toBeNull();
    for (const next of ["//evil.example/x", "https://evil.example/", "/\\evil.example"]) {
      expect((await page(`/login?token=${tokens.read}&next=${encodeURIComponent(next)}`)).headers.get("location"), next).toBe("/");
    }
  });

  it("puts a Log out form on every page, and posting it clears the cookie and sends the browser to /login", async () => {
    const { cookie } = await loginCookie(tokens.read);
    for (const path of pages()) {
      if (path.includes("/events")) continue; // a fragment, not a page
      const body = await (await page(path, { cookie })).text();
      expect(body, path).toMatch(/<form class="logout" method="post" action="\/logout"><button type="submit">Log out<\/button><\/form>/);
    }
    const out = await page("/logout", { cookie }, "POST");
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe("/login");
    // the browser drops the cookie: expired, empty, on the path it was set on
    expect(out.headers.get("set-cookie")).toMatch(/^evolve_token=;.*Max-Age=0.*Path=\//);
    // and without it a page is the login form again
    expect((await page("/jobs")).headers.get("location")).toBe("/login?next=%2Fjobs");
    // the login form itself has nothing to log out of
    expect(await (await page("/login")).text()).not.toContain('action="/logout"');
  });

  it("never takes the cookie for starting a job (CSRF): a POST needs the Bearer header", async () => {
    const { cookie } = await loginCookie(tokens.run);
    const res = await app.fetch(new Request(`http://127.0.0.1${API_BASE}/jobs`, { method: "POST", headers: { cookie, "content-type": "application/json" }, body: "{}" }));
    expect(res.status).toBe(401);
    expect((await errorOf(res)).code).toBe("serve_token_missing");
    // the same token as a header gets past authentication (to this app's missing job starter)
    expect((await call("/jobs", { token: tokens.run, method: "POST", body: "{}" })).status).toBe(400);
  });

  it("answers an unknown API path as the API does, not as a page", async () => {
    const res = await call("/nope", { token: tokens.read });
    expect(res.status).toBe(404);
    expect((await errorOf(res)).code).toBe("serve_route_unknown");
  });
});
