/**
 * `evolve serve` benchmark (issue 23 §3). Not run in CI.
 *
 *   bun scripts/bench/serve.ts [--trials 10000] [--events 1000000] [--page-events 100000] [--requests 30] [--no-browser]
 *
 * Builds a scratch store holding a job of `--trials` SCORED trials, a trial with a `--events` trace and one with a
 * `--page-events` trace, starts the real `evolve serve` (`bun main.ts serve --port 0`, a process of its own, so the
 * client does not share its event loop) and prints one JSON document:
 * - `job_listing`: `GET /api/v1/jobs/<job>` (`job show --json`: summary and every trial) over HTTP, p50/p99 ms of
 *   `--requests` requests, beside `direct`: the same document built from the store in this process
 *   (jobShowDocument + JSON.stringify), in the same run; `ratio` = API p50 / direct p50.
 * - `trace_page_first` and `trace_page_deep`: `GET /api/v1/trials/<id>/trace` (10000 events, the API's page) from
 *   the start and from a cursor 10000 events before the end of the `--events` trace, beside reading the same lines
 *   through traceLines in this process.
 * - `dashboard_trial`: the trial page of the `--page-events` trace: the server's whole response time (the page
 *   renders its first 200 events, the rest load on scroll), p50/p99; and, when Debian's chromium is there
 *   (EVOLVE_CHROMIUM, default /usr/bin/chromium), first-contentful-paint and load in a real browser, logged in.
 *   Goal: first paint ≤ 1000 ms.
 * A missed goal never fails the run (numbers depend on the machine).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createJob } from "../../engine/job/job.ts";
import { jobShowDocument } from "../../engine/job/documents.ts";
import { jsonKeys } from "../../engine/json-keys.ts";
import { createToken } from "../../engine/serve/tokens.ts";
import { openStore, type Store } from "../../engine/store/index.ts";
import { chunkEvent, toolCallEvent, toolResultEvent, usageEvent } from "../../engine/trace/events.ts";
import { openTraceWriter, traceCount, traceLines } from "../../engine/trace/store.ts";
import { quantile } from "./startup.ts";

const ROOT = resolve(import.meta.dir, "../..");
const args = process.argv.slice(2);
const flag = (name: string, dflt: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const TRIALS = flag("--trials", 10_000);
const EVENTS = flag("--events", 1_000_000);
const PAGE_EVENTS = flag("--page-events", 100_000);
const REQUESTS = flag("--requests", 30);
const BROWSER = !args.includes("--no-browser");
const CHROMIUM = process.env.EVOLVE_CHROMIUM ?? "/usr/bin/chromium";
/** The API's trace page (routes.ts MAX_TRACE_PAGE). */
const TRACE_PAGE = 10_000;
/** First contentful paint of the 100k-event trial page must come within this. */
const GOAL_FIRST_PAINT_MS = 1000;

const round = (x: number) => Math.round(x * 100) / 100;
const stats = (ms: number[]) => {
  const s = [...ms].sort((a, b) => a - b);
  return { p50_ms: round(quantile(s, 0.5)), p99_ms: round(quantile(s, 0.99)), n: s.length };
};

/** Times `fn` `n` times after one untimed warm-up. */
async function timed(n: number, fn: () => Promise<unknown> | unknown): Promise<number[]> {
  await fn();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

function storeTrace(home: string, trialId: string, n: number) {
  const w = openTraceWriter(home, trialId);
  const batch = 10_000;
  for (let i = 0; i < n; i += batch) {
    w.append(
      Array.from({ length: Math.min(batch, n - i) }, (_, j) => {
        const k = i + j;
        switch (k % 10) {
          case 3:
            return toolCallEvent({ toolCallId: `c${k}`, name: "Bash", title: "ls -la /app", kind: "execute", status: "pending", rawInput: { command: "ls -la /app" } });
          case 4:
            return toolResultEvent(`c${k - 1}`, "completed", "total 8\ndrwxr-xr-x 2 root root 4096 main.py");
          case 7:
            return usageEvent("call", { promptTokens: 1200 + k, completionTokens: 64 }, { messageId: `m${k}` });
          default:
            return chunkEvent("agent_message_chunk", `Looking at the files under /app to find what event ${k} needs.`, `m${k - (k % 10)}`);
        }
      }),
    );
  }
  w.close();
}

/** The store: one job of TRIALS scored trials; the first carries the long trace, the second the page's. */
function build(home: string): { store: Store; job: string; long: string; paged: string } {
  const store = openStore(home);
  const tasks = Array.from({ length: TRIALS }, (_, i) => ({ name: `task-${i}`, digest: `sha256:${String(i).padStart(64, "0")}` }));
  const job = createJob(store, { agent: { name: "oracle" }, attempts: 1, concurrency: 1, timeout_multiplier: 1, secret_names: [], force_build: false, max_retries: 0, source: { kind: "path", path: "/nowhere" }, tasks });
  const trials = store.listTrials(job.id);
  store.transaction(() => {
    for (const [i, t] of trials.entries()) store.putTrial({ ...t, status: "SCORED", rewards: { reward: i % 3 === 0 ? 1 : 0 } });
  });
  store.putJob({ ...store.getJob(job.id)!, status: "COMPLETED" });
  storeTrace(home, trials[0]!.id, EVENTS);
  storeTrace(home, trials[1]!.id, PAGE_EVENTS);
  return { store, job: job.id, long: trials[0]!.id, paged: trials[1]!.id };
}

/** Starts `bun main.ts serve --port 0` on `home`; resolves with its base URL once it listens. */
function serve(home: string): Promise<{ base: string; proc: ChildProcess }> {
  const proc = spawn(join(ROOT, "node_modules/.bin/bun"), [join(ROOT, "main.ts"), "serve", "--port", "0"], { cwd: ROOT, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((done, fail) => {
    let seen = "";
    const timer = setTimeout(() => fail(new Error(`serve never listened: ${seen}`)), 60_000);
    proc.stdout!.on("data", (b) => {
      seen += b;
      const m = /listening on (http:\/\/\S+)\/api\/v1/.exec(seen);
      if (m) {
        clearTimeout(timer);
        done({ base: m[1]!, proc });
      }
    });
  });
}

/** First contentful paint and load of `url` in chromium, logged in with `token` first; undefined without chromium. */
async function browserPaint(base: string, token: string, path: string): Promise<Record<string, number> | { skipped: string }> {
  if (!BROWSER) return { skipped: "--no-browser" };
  if (!existsSync(CHROMIUM)) return { skipped: `${CHROMIUM} is missing` };
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"] });
  try {
    const ctx = await browser.newContext();
    const login = await ctx.newPage();
    await login.goto(`${base}/login?token=${encodeURIComponent(token)}&next=/jobs`);
    await login.close();
    const runs: { fcp: number | null; load: number }[] = [];
    for (let i = 0; i < 4; i++) {
      const page = await ctx.newPage();
      await page.goto(`${base}${path}`, { waitUntil: "load" });
      // the paint entry may be queued after load: wait for it (buffered), a bounded while
      const m = await page.evaluate(
        () =>
          new Promise<{ fcp: number | null; load: number }>((done) => {
            const nav = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
            const finish = (fcp: number | null) => done({ fcp, load: nav.loadEventEnd });
            const timer = setTimeout(() => finish(null), 3000);
            new PerformanceObserver((list) => {
              const e = list.getEntriesByName("first-contentful-paint")[0];
              if (e) {
                clearTimeout(timer);
                finish(e.startTime);
              }
            }).observe({ type: "paint", buffered: true });
          }),
      );
      await page.close();
      if (i > 0) runs.push(m); // the first warms the browser's caches
    }
    const fcp = runs.flatMap((r) => (r.fcp === null ? [] : [r.fcp])).sort((a, b) => a - b);
    const load = runs.map((r) => r.load).sort((a, b) => a - b);
    return { ...(fcp.length ? { first_contentful_paint_ms: round(quantile(fcp, 0.5)) } : {}), load_ms: round(quantile(load, 0.5)), runs: runs.length, painted: fcp.length };
  } finally {
    await browser.close();
  }
}

async function main() {
  const home = mkdtempSync(join(tmpdir(), "evolve-bench-serve-"));
  let proc: ChildProcess | undefined;
  try {
    const t0 = performance.now();
    const { store, job, long, paged } = build(home);
    const { token } = createToken(store, { name: "bench" });
    const build_s = round((performance.now() - t0) / 1000);
    const stored = { long: traceCount(home, long), paged: traceCount(home, paged) };
    const s = await serve(home);
    proc = s.proc;
    const auth = { authorization: `Bearer ${token}` };
    const get = async (path: string, headers: Record<string, string> = auth) => {
      const r = await fetch(`${s.base}${path}`, { headers });
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
      return await r.text();
    };

    // job listing: the API against the same document built here
    const apiJob = await timed(REQUESTS, () => get(`/api/v1/jobs/${job}`));
    const directJob = await timed(REQUESTS, () => {
      store.refresh();
      return JSON.stringify(jsonKeys(jobShowDocument(store, store.getJob(job)!).document));
    });
    const jobBytes = (await get(`/api/v1/jobs/${job}`)).length;

    // a trace page of the long trace: its start, and 10000 events before its end
    const direct = (after: number) => () => {
      const lines: string[] = [];
      const it = traceLines(home, long, { after });
      for (const l of it) {
        lines.push(l.json);
        if (lines.length === TRACE_PAGE) break;
      }
      it.return(undefined);
      return lines.map((l) => l + "\n").join("");
    };
    const deep = EVENTS - TRACE_PAGE - 1;
    const apiFirst = await timed(REQUESTS, () => get(`/api/v1/trials/${long}/trace?limit=${TRACE_PAGE}`));
    const directFirst = await timed(REQUESTS, direct(-1));
    const apiDeep = await timed(REQUESTS, () => get(`/api/v1/trials/${long}/trace?limit=${TRACE_PAGE}&cursor=${deep}`));
    const directDeep = await timed(REQUESTS, direct(deep));

    // the dashboard's trial page of the 100k-event trace: the server's render, then a browser's first paint
    const cookie = { cookie: `evolve_token=${token}` };
    const page = await timed(REQUESTS, () => get(`/trials/${paged}`, cookie));
    const pageBytes = (await get(`/trials/${paged}`, cookie)).length;
    const browser = await browserPaint(s.base, token, `/trials/${paged}`).catch((e: Error) => ({ skipped: e.message.split("\n")[0]! }));

    const pair = (api: number[], dir: number[], extra: Record<string, unknown> = {}) => {
      const a = stats(api);
      const d = stats(dir);
      return { api: a, direct: d, ratio_p50: round(a.p50_ms / Math.max(d.p50_ms, 0.01)), ratio_p99: round(a.p99_ms / Math.max(d.p99_ms, 0.01)), ...extra };
    };
    const fcp = "first_contentful_paint_ms" in browser ? browser.first_contentful_paint_ms : undefined;
    const out = {
      trials: TRIALS,
      events: EVENTS,
      page_events: PAGE_EVENTS,
      requests: REQUESTS,
      build_s,
      events_stored: stored,
      job_listing: pair(apiJob, directJob, { bytes: jobBytes }),
      trace_page_first: pair(apiFirst, directFirst, { events: TRACE_PAGE }),
      trace_page_deep: pair(apiDeep, directDeep, { events: TRACE_PAGE, cursor: deep }),
      dashboard_trial: { server: stats(page), bytes: pageBytes, browser },
      goals_met: { first_paint_le_1s: fcp === undefined ? null : fcp <= GOAL_FIRST_PAINT_MS, server_render_le_1s: stats(page).p99_ms <= GOAL_FIRST_PAINT_MS },
    };
    console.log(JSON.stringify(out, null, 2));
    await store.close();
  } finally {
    proc?.kill("SIGTERM");
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
