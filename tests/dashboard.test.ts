/**
 * The dashboard's pages over a store built as the runner writes it (tests/support/dashboard-store.ts), through
 * app.fetch: each page answers with the figures the engine computes, markup in the data renders as text, and a
 * path parameter that is not an id is refused before the store sees it.
 */
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { dashboardApp } from "../engine/dashboard/app.ts";
import { pairedStats } from "../engine/eval/stats.ts";
import { chunkEvent } from "../engine/trace/events.ts";
import { openTraceWriter } from "../engine/trace/store.ts";
import { dashboardFixture, HOSTILE } from "./support/dashboard-store.ts";

const fx = dashboardFixture();
const app = dashboardApp({ home: fx.home, store: fx.store, pollMs: 20 });
afterAll(async () => {
  await fx.store.close();
  rmSync(fx.home, { recursive: true, force: true });
});

async function get(path: string): Promise<{ status: number; body: string; headers: Headers }> {
  const r = await app.fetch(new Request(`http://dash${path}`));
  return { status: r.status, body: await r.text(), headers: r.headers };
}

/** Markup from the data never reaches the page as markup. */
function expectEscaped(body: string) {
  expect(body).not.toContain("<script>window.__pwned");
  expect(body).not.toContain("<img src=x");
}

describe("jobs", () => {
  it("lists every job with its status counts, mean, pass@k, spend and tokens", async () => {
    const { status, body } = await get("/jobs");
    expect(status).toBe(200);
    for (const n of ["baseline", "candidate", "live-one", "check-demo"]) expect(body).toContain(n);
    expect(body).toMatch(/4 jobs:/);
    const row = body.slice(body.indexOf(`data-job="${fx.base}"`));
    const baseRow = row.slice(0, row.indexOf("</tr>"));
    expect(baseRow).toContain("SCORED 6");
    expect(baseRow).toContain("0.500"); // mean over 6: 1+0+0+0+1+1
    expect(baseRow).toContain("@1 0.500");
    expect(baseRow).toContain("$0.06");
    expect(baseRow).toContain("600 in / 60 out");
    expect(body).toContain('data-live="1"'); // a job runs: the rows refresh
  });

  it("filters by status, kind, agent, model and name", async () => {
    expect((await get("/jobs?status=RUNNING")).body).toContain("live-one");
    expect((await get("/jobs?status=RUNNING")).body).not.toContain(">baseline<");
    expect((await get("/jobs?kind=check")).body).toMatch(/1 jobs:/);
    expect((await get("/jobs?agent=codex")).body).toMatch(/1 jobs:/);
    const m = await get("/jobs?model=opus");
    expect(m.body).toMatch(/1 jobs:/);
    expect(m.body).toContain("candidate");
    expect((await get("/jobs?name=baseline")).body).toMatch(/1 jobs:/);
    expect((await get("/jobs?status=NOPE")).status).toBe(400);
  });

  it("serves the rows alone for live refresh, saying whether to keep polling", async () => {
    const r = await get("/jobs/rows?status=COMPLETED");
    expect(r.status).toBe(200);
    expect(r.headers.get("x-live")).toBe("0");
    expect(r.body.startsWith("<tr")).toBe(true);
    expect((await get("/jobs/rows")).headers.get("x-live")).toBe("1");
  });
});

describe("one job", () => {
  it("shows the trials, the task × attempt matrix and the exception summary, escaped", async () => {
    const { status, body } = await get(`/jobs/${fx.cand}`);
    expect(status).toBe(200);
    expect(body).toContain(`/trials/${fx.cand}Talpha0`);
    expect(body).toContain("#3"); // alpha ran three times: three attempt columns
    expect(body).toMatch(/EngineError<\/td><td class="num">1</);
    expect(body).toContain("&lt;script&gt;window.__pwned");
    expectEscaped(body);
  });

  it("CHECK tab: a job's dataset checks, a check job's own rows, the command when none exists", async () => {
    const run = await get(`/jobs/${fx.base}`);
    expect(run.body).toContain("solvable");
    expect(run.body).toContain(`/jobs/${fx.check}`);
    const check = await get(`/jobs/${fx.check}`);
    expect(check.body).toContain("reward 0.000: not solved");
    const fresh = await get(`/jobs/${fx.running}`);
    expect(fresh.body).toContain("solvable"); // same dataset: the check of demo@1.1 shows there too
  });

  it("refuses ids that are not ids, and 404s ids that are", async () => {
    for (const p of ["/jobs/..%2F..%2Fetc", "/jobs/a%00b", "/jobs/%2e%2e%2fetc", "/jobs/a..b", "/trials/..%2Fx", "/trials/x%00", "/trials/%2e%2e%2fetc/events"]) {
      const r = await get(p);
      expect([400, 404], p).toContain(r.status);
    }
    expect((await get("/jobs/NOSUCHJOB")).status).toBe(404);
    expect((await get("/trials/NOSUCHTRIAL")).status).toBe(404);
  });
});

describe("compare", () => {
  it("puts jobs side by side per task with the paired difference and its interval", async () => {
    const { status, body } = await get(`/compare?jobs=${fx.base},${fx.cand}`);
    expect(status).toBe(200);
    // per task: alpha .5 → 1 (+.5), bravo 0 → .5 (+.5), charlie 1 → 1 (0)
    expect([...body.matchAll(/data-diff="([^"]*)"/g)].map((m) => m[1])).toEqual(["0.500", "0.500", "0.000"]);
    const s = pairedStats([1, 0.5, 1], [0.5, 0, 1]);
    expect(body).toContain(`+${s.mean_gain.toFixed(3)}`);
    expect(body).toContain(`[${s.ci95![0].toFixed(3)}, ${s.ci95![1].toFixed(3)}]`);
    expect(body).toContain("sign test"); // the evidence line of evolve's statistics
  });

  it("needs two jobs that exist", async () => {
    expect((await get(`/compare?jobs=${fx.base}`)).status).toBe(400);
    expect((await get(`/compare?jobs=${fx.base},NOPE`)).status).toBe(404);
    expect((await get(`/compare?jobs=${fx.base},..%2Fx`)).status).toBe(400);
  });
});

describe("trial viewer", () => {
  it("renders the first page of the trace, folded tool calls, logs, rewards, files and phases — as text", async () => {
    const { status, body } = await get(`/trials/${fx.rich}`);
    expect(status).toBe(200);
    expectEscaped(body);
    expect(body).toContain("&lt;script&gt;window.__pwned = 1&lt;/script&gt;");
    expect(body).toContain('data-call="call-1"');
    expect(body).toContain('data-result-for="call-1"');
    expect(body).toContain("500 events");
    expect(body).toContain('data-more="1"');
    expect(body).toContain('data-seq="199"');
    expect(body).not.toContain('data-seq="200"'); // the rest comes on scroll
    expect(body).toContain("1 passed"); // the verifier log
    expect(body).toContain("STEP 1/3 FROM debian");
    expect(body).toContain("Agent: claude-code.txt");
    expect(body).toContain("/app/main.py");
    expect(body).toContain("deleted");
    expect(body).toMatch(/agent 8\.0s/);
  });

  it("pages the rest of the trace by cursor", async () => {
    const p = await get(`/trials/${fx.rich}/events?after=199`);
    expect(p.status).toBe(200);
    expect(p.body).toContain('data-seq="200"');
    expect(p.headers.get("x-more")).toBe("1");
    const last = await get(`/trials/${fx.rich}/events?after=399`);
    expect(last.headers.get("x-more")).toBe("0");
    expect(last.headers.get("x-last-seq")).toBe("499");
    expect((await get(`/trials/${fx.rich}/events?after=abc`)).status).toBe(400);
  });

  it("shows the ATIF steps with keyboard hints, and a kept file as a diff", async () => {
    const s = await get(`/trials/${fx.rich}/steps`);
    expect(s.status).toBe(200);
    expect(s.body).toContain('class="step"');
    expect(s.body).toContain("<kbd>j</kbd>");
    expectEscaped(s.body);
    const f = await get(`/trials/${fx.rich}/file?path=${encodeURIComponent("/app/main.py")}`);
    expect(f.status).toBe(200);
    expect(f.body).toContain("+ print(&quot;fixed&quot;)");
    for (const bad of ["../../etc/passwd", "/etc/passwd", "/app/../../../etc/passwd", "/app/main.py%00"]) {
      expect((await get(`/trials/${fx.rich}/file?path=${encodeURIComponent(bad)}`)).status, bad).toBe(404);
    }
  });

  it("streams events appended while connected, and ends once the trial settles", async () => {
    const r = await app.fetch(new Request(`http://dash/trials/${fx.runningTrial}/stream?after=0`));
    expect(r.headers.get("content-type")).toContain("text/event-stream");
    const reader = r.body!.getReader();
    const w = openTraceWriter(fx.home, fx.runningTrial);
    w.append([chunkEvent("agent_message_chunk", `appended live ${HOSTILE}`)]);
    let text = "";
    const dec = new TextDecoder();
    while (!text.includes("appended live")) text += dec.decode((await reader.read()).value);
    expect(text).toContain('data-seq="1"');
    expect(text).not.toContain("<script>");
    w.close();
    fx.store.putTrial({ ...fx.store.getTrial(fx.runningTrial)!, status: "SCORED", rewards: { reward: 1 } });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value);
    }
    expect(text).toContain("event: end");
  });
});

describe("datasets", () => {
  it("lists the catalogue and shows one dataset's tasks and versions", async () => {
    const l = await get("/datasets");
    expect(l.status).toBe(200);
    expect(l.body).toContain("demo");
    expect((await get("/datasets?q=zzz")).body).toContain("No dataset matches");
    const d = await get("/datasets/demo");
    expect(d.status).toBe(200);
    expect(d.body).toContain("charlie");
    expect(d.body).toContain("600s");
    expect(d.body).toMatch(/1\.0<\/a><\/td><td class="num">2/);
    const old = await get("/datasets/demo?version=1.0");
    expect(old.body).not.toContain("charlie");
    expect((await get("/datasets/nope")).status).toBe(404);
    for (const p of ["/datasets/..%2F..%2Fetc", "/datasets/%2e%2e%2fetc", "/datasets/a%2f..%2f..", "/datasets/a%00", "/datasets/demo?version=..%2F1"]) expect((await get(p)).status, p).toBe(400);
  });
});

it("serves its script from the binary, with no CDN", async () => {
  const r = await get("/assets/app.js");
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toContain("javascript");
  expect((await get("/jobs")).body).not.toMatch(/https?:\/\//);
});
