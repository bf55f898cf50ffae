/**
 * The dashboard (issue 23 §2): server-rendered pages over the store, read through the same engine functions the
 * CLI's `--json` uses (job list rows, job summaries and spend, the stored trace, datasets, paired statistics), so a
 * page and `evolve … --json` never disagree. A hono sub-app with no auth of its own: `evolve serve` mounts it at `/`
 * behind the API's middleware. Every path parameter is checked before the store sees it; every value is escaped.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Hono, type Context } from "hono";
import { streamSSE } from "hono/streaming";
import { readBoxFile } from "../box/fs.ts";
import { TRIAL } from "../box/layout.ts";
import { showDataset, listDatasets } from "../dataset.ts";
import { checkDatasetName } from "../dataset-ref.ts";
import { EvolveError } from "../errors.ts";
import { signTestEvidence } from "../eval/stats.ts";
import { effectiveStatus, jobConfig } from "../job/job.ts";
import { JOB_KINDS, JOB_STATUSES, listJobRows, parseSince, type JobFilter } from "../job/list.ts";
import { attemptSeconds, jobSpend, measuredLane, primaryReward, summarizeJob, taskLabel, trialAttempts, type JobSummary } from "../job/summary.ts";
import { PHASES, trialDir, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { buildTrajectory } from "../trace/atif.ts";
import { followTrace, readTrace, traceCount, traceLines, type StoredLine } from "../trace/store.ts";
import { readKeptFile, readManifest } from "../trial/changes.ts";
import { isSettledStatus } from "../trial/lifecycle.ts";
import { tokenCounts } from "../trial/tokens.ts";
import { JS } from "./assets.ts";
import { compareJobs } from "./compare.ts";
import { evolutionApp } from "./evolution.ts";
import { BadRequest, html, NotFound, validId } from "./pages.ts";
import { h, type Safe } from "./html.ts";
import { eventItems, num, page, seconds, statusTag, trialLive, usd } from "./views.ts";

/** What the dashboard reads: the home (trial folders, traces) and its store, opened once by whoever serves it. */
export interface DashboardDeps {
  home: string;
  store: Store;
  /** How often a live trace is polled for new events (ms); tests shorten it. */
  pollMs?: number;
  /** The evolution project the evolution pages show (`serve --project`), and the Meta-Harness run (`--metaharness-run`). */
  project?: string;
  metaharnessRun?: string;
}

/** Events per trace page: the first is rendered with the page, the rest fetched on scroll. */
export const TRACE_PAGE = 200;
/** ATIF steps per page. */
export const STEPS_PAGE = 100;
/** The most of a log the trial viewer shows (its end). */
const LOG_TAIL = 128 * 1024;
/** The most of a kept file the diff view shows. */
const FILE_VIEW = 1024 * 1024;

/** The hono app of the dashboard's pages. */
export function dashboardApp(deps: DashboardDeps): Hono {
  const { home, store } = deps;
  const pollMs = deps.pollMs ?? 500;
  const app = new Hono();

  app.onError((e, c) => {
    if (e instanceof NotFound || (e instanceof EvolveError && /not_found|ambiguous/.test(e.code))) return html(c, page("Not found", "", h`<h1>Not found</h1><p>${e.message}</p>`), 404);
    if (e instanceof BadRequest || (e instanceof EvolveError && e.code === "usage")) return html(c, page("Bad request", "", h`<h1>Bad request</h1><p>${e.message}</p>`), 400);
    return html(c, page("Error", "", h`<h1>Something went wrong</h1><pre>${e instanceof Error ? e.message : String(e)}</pre>`), 500);
  });

  /** The record a path id names, after the id is checked. */
  const job = (id: string | undefined): JobRecord => {
    if (!validId(id)) throw new BadRequest("not a job id");
    const j = store.getJob(id);
    if (!j) throw new NotFound(`no job ${id}`);
    return j;
  };
  const trial = (id: string | undefined): TrialRecord => {
    if (!validId(id)) throw new BadRequest("not a trial id");
    const t = store.getTrial(id);
    if (!t) throw new NotFound(`no trial ${id}`);
    return t;
  };

  app.get("/assets/app.js", (c) => c.body(JS, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "max-age=300" }));
  app.get("/", (c) => c.redirect("/jobs"));

  // ---- jobs ----
  app.get("/jobs", (c) => {
    const q = jobQuery(c);
    const rows = jobRows(store, q);
    const counts: Record<string, number> = {};
    for (const r of rows) counts[r.s.status] = (counts[r.s.status] ?? 0) + 1;
    const live = rows.some((r) => r.s.status === "RUNNING");
    const qs = new URL(c.req.url).search;
    const body = h`<h1>Jobs</h1>
<form class="filters" method="get" action="/jobs" aria-label="Filter jobs">
${select("status", "Status", JOB_STATUSES, q.status)}${select("kind", "Kind", JOB_KINDS, q.kind)}
${input("agent", "Agent", q.agent)}${input("model", "Model", q.model)}${input("dataset", "Dataset", q.dataset)}${input("name", "Name", q.name)}${input("since", "Since (2h, 3d, 2026-06-01)", q.since)}
<button type="submit">Filter</button> <a href="/jobs">Clear</a></form>
<p class="counts" aria-label="Jobs by status">${rows.length} jobs: ${Object.entries(counts).map(([k, v]) => h`<span>${statusTag(k)} ${v}</span> `)}</p>
<form method="get" action="/compare"><table><caption class="sr-only">Jobs, newest first</caption>
<thead><tr><th scope="col"><span class="sr-only">Compare</span></th><th scope="col">Job</th><th scope="col">Kind</th><th scope="col">Status</th><th scope="col">Agent</th><th scope="col">Model</th><th scope="col">Source</th><th scope="col" class="num">Trials</th><th scope="col">Counts</th><th scope="col" class="num">Mean</th><th scope="col">pass@k</th><th scope="col" class="num">Spend</th><th scope="col" class="num">Tokens</th><th scope="col">Created</th></tr></thead>
<tbody id="job-rows" data-refresh="/jobs/rows${qs}" data-live="${live ? "1" : "0"}">${jobRowsHtml(rows)}</tbody></table>
<button type="submit">Compare selected</button></form>`;
    return html(c, page("Jobs", "/jobs", body));
  });
  app.get("/jobs/rows", (c) => {
    const rows = jobRows(store, jobQuery(c));
    return html(c, jobRowsHtml(rows).text, 200, { "x-live": rows.some((r) => r.s.status === "RUNNING") ? "1" : "0" });
  });

  app.get("/jobs/:id", (c) => {
    const j = job(c.req.param("id"));
    const trials = store.listTrials(j.id);
    const s = summarizeJob(j, trials);
    const spend = jobSpend(trials, { agent: store.getSpend("job", j.id, "agent"), judge: store.getSpend("job", j.id, "judge") });
    const live = s.status === "RUNNING";
    const body = h`<h1>Job ${s.name ?? s.id}</h1>
<dl class="band"><dt>Id</dt><dd>${s.id}</dd><dt>Kind</dt><dd>${s.kind.toUpperCase()}</dd><dt>Status</dt><dd>${statusTag(s.status)}</dd>
<dt>Agent</dt><dd>${s.agent}${s.model ? ` (${s.model})` : ""}</dd><dt>Source</dt><dd>${s.source}</dd><dt>Created</dt><dd>${s.created_at}</dd>
<dt>Mean reward</dt><dd>${num(s.mean_reward)} <span class="mut">over ${s.counts.SCORED ?? 0} scored</span></dd>
<dt>pass@k</dt><dd>${passAtK(s)}</dd><dt>Spend</dt><dd>${usd(spend.agent_usd, spend.agent_lower_bound)} agent${spend.judge_usd !== null ? `, ${usd(spend.judge_usd, spend.judge_lower_bound)} judge` : ""}</dd>
<dt>Tokens</dt><dd>${tokensOf(trials)}</dd></dl>
${s.all_infrastructure_error ? h`<p role="alert"><strong>Every trial failed for infrastructure (INFRASTRUCTURE_ERROR): nothing was measured about the agent.</strong></p>` : ""}
<p class="counts" aria-label="Trials by status">${s.n_trials} trials: ${Object.entries(s.counts).map(([k, v]) => h`<span>${statusTag(k)} ${v}</span> `)}</p>
<nav class="tabs" aria-label="Job sections"><a href="#trials">Trials</a><a href="#matrix">Task × attempt</a><a href="#exceptions">Exceptions</a><a href="#check">Check</a></nav>
<div id="job-live" data-refresh="/jobs/${s.id}/trials" data-live="${live ? "1" : "0"}">${jobSections(s, trials)}</div>
<section id="check" aria-labelledby="check-h"><h2 id="check-h">Check</h2>${checkTab(store, j, trials)}</section>`;
    return html(c, page(`Job ${s.id}`, "/jobs", body));
  });
  app.get("/jobs/:id/trials", (c) => {
    const j = job(c.req.param("id"));
    const trials = store.listTrials(j.id);
    const s = summarizeJob(j, trials);
    return html(c, jobSections(s, trials).text, 200, { "x-live": s.status === "RUNNING" ? "1" : "0" });
  });

  // ---- compare ----
  app.get("/compare", (c) => {
    const ids = c.req.queries("jobs")?.flatMap((v) => v.split(",")).map((v) => v.trim()).filter(Boolean) ?? [];
    if (ids.length < 2) throw new BadRequest("compare needs two or more jobs: /compare?jobs=<id>,<id>");
    if (ids.length > 12) throw new BadRequest("compare takes at most 12 jobs");
    for (const id of ids) job(id);
    const cmp = compareJobs(store, ids);
    const body = h`<h1>Compare ${ids.length} jobs</h1>
<p>Per task: each job's mean reward over its scored trials. Δ is the difference from the first job (the baseline); the interval is the 95% paired interval over the tasks both scored.</p>
<table id="compare-grid"><caption class="sr-only">Mean reward per task and job</caption><thead><tr><th scope="col">Task</th>${cmp.jobs.map((j, i) => h`<th scope="col" class="num"><a href="/jobs/${j.id}">${j.name ?? j.id}</a><br><span class="mut">${j.agent}${j.model ? ` ${j.model}` : ""}</span>${i === 0 ? h`<br><span class="mut">baseline</span>` : ""}</th>${i > 0 ? h`<th scope="col" class="num">Δ vs baseline</th>` : ""}`)}</tr></thead>
<tbody>${cmp.rows.map((r) => h`<tr><th scope="row">${r.task}</th>${r.cells.map((cell, i) => {
      const base = r.cells[0];
      const d = i > 0 && cell?.mean != null && base?.mean != null ? cell.mean - base.mean : null;
      return h`<td class="num">${cell ? h`<a href="/trials/${cell.trials[0]}">${num(cell.mean)}</a> <span class="mut">(${cell.scored}/${cell.trials.length})</span>` : h`<span class="mut">not run</span>`}</td>${i > 0 ? h`<td class="num diff" data-diff="${d === null ? "" : d.toFixed(3)}">${d === null ? "-" : `${d > 0 ? "+" : ""}${d.toFixed(3)}`}</td>` : ""}`;
    })}</tr>`)}</tbody>
<tfoot><tr><th scope="row">Mean</th>${cmp.jobs.map((j, i) => h`<td class="num">${num(j.mean_reward)}</td>${i > 0 ? h`<td></td>` : ""}`)}</tr></tfoot></table>
<h2>Paired differences</h2><table id="compare-stats"><thead><tr><th scope="col">Job</th><th scope="col">vs</th><th scope="col" class="num">Tasks paired</th><th scope="col" class="num">Mean Δ</th><th scope="col" class="num">95% interval</th><th scope="col" class="num">t</th><th scope="col">Sign test</th></tr></thead>
<tbody>${cmp.diffs.map((d) => h`<tr data-job="${d.job}"><td><a href="/jobs/${d.job}">${d.job}</a></td><td>${d.baseline}</td><td class="num">${d.stats.n}</td><td class="num mean-gain">${d.stats.n > 0 ? `${d.stats.mean_gain > 0 ? "+" : ""}${d.stats.mean_gain.toFixed(3)}` : "-"}</td><td class="num ci">${d.stats.ci95 ? `[${d.stats.ci95[0].toFixed(3)}, ${d.stats.ci95[1].toFixed(3)}]` : "- (fewer than 2 tasks)"}</td><td class="num">${d.stats.t === null ? "-" : Number.isFinite(d.stats.t) ? d.stats.t.toFixed(2) : d.stats.t > 0 ? "+∞" : "−∞"}</td><td>${signTestEvidence(d.stats).detail}</td></tr>`)}</tbody></table>`;
    return html(c, page("Compare", "/jobs", body));
  });

  // ---- trial viewer ----
  app.get("/trials/:id", async (c) => {
    const t = trial(c.req.param("id"));
    const dir = trialDir(home, t.id);
    const first = takeLines(traceLines(home, t.id, {}), TRACE_PAGE + 1);
    const more = first.length > TRACE_PAGE;
    const shown = first.slice(0, TRACE_PAGE);
    const live = trialLive(t.status);
    const lastSeq = shown.length > 0 ? shown[shown.length - 1]!.seq : -1;
    const body = h`<h1>Trial ${t.id}</h1>
<dl class="band"><dt>Job</dt><dd><a href="/jobs/${t.job_id}">${t.job_id}</a></dd><dt>Task</dt><dd>${taskLabel(t)}</dd><dt>Status</dt><dd>${statusTag(t.status)}${t.attempt_phase && !isSettledStatus(t.status) ? ` (phase ${t.attempt_phase})` : ""}${t.failed_phase ? ` (failed in ${t.failed_phase})` : ""}</dd>
<dt>Agent</dt><dd>${t.agent}${t.model ? ` (${t.model})` : ""}</dd><dt>Reward</dt><dd>${num(primaryReward(t.rewards))}</dd><dt>Attempts</dt><dd>${trialAttempts(t).count}</dd><dt>Time</dt><dd>${seconds(attemptSeconds(t))}</dd>
${t.exception ? h`<dt>Exception</dt><dd><strong>${t.exception.type}</strong>: ${t.exception.message.split("\n")[0]}</dd>` : ""}</dl>
<nav class="tabs" aria-label="Trial sections"><a href="#timing">Timing</a><a href="#spend">Spend</a><a href="#rewards">Rewards</a><a href="#trace-h">Trace</a><a href="/trials/${t.id}/steps">ATIF steps</a><a href="#files">Files changed</a><a href="#logs">Logs</a></nav>
<section id="timing" aria-labelledby="timing-h"><h2 id="timing-h">Phases</h2>${timingBar(t)}</section>
<section id="spend" aria-labelledby="spend-h"><h2 id="spend-h">Spend per lane</h2>${spendTable(t)}</section>
<section id="rewards" aria-labelledby="rewards-h"><h2 id="rewards-h">Rewards and verifier</h2>${rewardsTable(t)}
${logBlock("Verifier log", await readLog(dir, join(TRIAL.verifier, TRIAL.testStdout)))}</section>
<section aria-labelledby="trace-h"><h2 id="trace-h">Trace <span class="mut" id="trace-state">${live ? "live" : "settled"}</span></h2>
<p class="mut">${traceCount(home, t.id)} events. Tool calls are folded with their output: open one to read it.</p>
<ol class="trace" id="trace" data-base="/trials/${t.id}" data-after="${lastSeq}" data-more="${more ? "1" : "0"}" data-live="${live ? "1" : "0"}" aria-live="polite">${eventItems(shown)}</ol>
${more ? h`<p><a id="trace-more" href="/trials/${t.id}/events?after=${lastSeq}">Load more events</a></p>` : ""}</section>
<section id="files" aria-labelledby="files-h"><h2 id="files-h">Files the run changed</h2>${await filesTable(dir, t.id)}</section>
<section id="logs" aria-labelledby="logs-h"><h2 id="logs-h">Logs</h2>
${logBlock("Setup (image builds)", await readLog(dir, TRIAL.setup))}${logBlock("Box", await readLog(dir, TRIAL.box))}${await agentLogs(dir).then((logs) => (logs.length === 0 ? logBlock("Agent", undefined) : logs.map((l) => logBlock(`Agent: ${l.name}`, l.text))))}${logBlock("Trial", await readLog(dir, TRIAL.log))}</section>`;
    return html(c, page(`Trial ${t.id}`, "/jobs", body));
  });

  app.get("/trials/:id/events", (c) => {
    const t = trial(c.req.param("id"));
    const after = cursor(c.req.query("after"));
    const lines = takeLines(traceLines(home, t.id, { after }), TRACE_PAGE + 1);
    const more = lines.length > TRACE_PAGE;
    const shown = lines.slice(0, TRACE_PAGE);
    return html(c, eventItems(shown).text, 200, { "x-more": more ? "1" : "0", "x-last-seq": String(shown.at(-1)?.seq ?? after) });
  });

  app.get("/trials/:id/stream", (c) => {
    const t = trial(c.req.param("id"));
    const after = cursor(c.req.query("after"));
    return streamSSE(c, async (stream) => {
      let open = true;
      stream.onAbort(() => {
        open = false;
      });
      const follow = followTrace(home, t.id, { after });
      while (open) {
        // read the record before the trace: a trial seen settled has written its last event already
        const settled = !trialLive(store.getTrial(t.id)?.status ?? "CANCELLED");
        const lines = follow.poll();
        if (lines.length > 0) await stream.writeSSE({ data: eventItems(lines).text, id: String(lines.at(-1)!.seq) });
        if (settled) {
          await stream.writeSSE({ event: "end", data: "settled" });
          break;
        }
        await stream.sleep(pollMs);
      }
    });
  });

  app.get("/trials/:id/steps", (c) => {
    const t = trial(c.req.param("id"));
    const p = pageNumber(c.req.query("page"));
    const traj = buildTrajectory(readTrace(home, t.id), { agent: { name: t.agent, version: "unknown", model_name: t.model }, sessionId: t.id });
    const steps = traj.steps.slice((p - 1) * STEPS_PAGE, p * STEPS_PAGE);
    const pages = Math.max(1, Math.ceil(traj.steps.length / STEPS_PAGE));
    const body = h`<h1>ATIF steps of trial <a href="/trials/${t.id}">${t.id}</a></h1>
<p>${traj.steps.length} steps; prompt ${traj.final_metrics.total_prompt_tokens} tokens, completion ${traj.final_metrics.total_completion_tokens}. Keys: <kbd>j</kbd> or <kbd>↓</kbd> next step, <kbd>k</kbd> or <kbd>↑</kbd> previous. <span id="step-pos" aria-live="polite"></span></p>
<div id="steps">${steps.map((s, i) => h`<article class="step" id="step-${s.step_id}" tabindex="${i === 0 ? "0" : "-1"}" aria-label="Step ${s.step_id}, ${s.source}"${i === 0 ? h` aria-current="true"` : ""}>
<h2>Step ${s.step_id} <span class="mut">${s.source}${s.model_name ? ` · ${s.model_name}` : ""}</span></h2>
${s.reasoning_content ? h`<details><summary>Thinking</summary><pre>${s.reasoning_content}</pre></details>` : ""}${s.message ? h`<pre>${s.message}</pre>` : ""}
${(s.tool_calls ?? []).map((tc) => h`<details><summary>Tool call <strong>${tc.function_name}</strong></summary><pre>${JSON.stringify(tc.arguments, null, 2)}</pre>${(s.observation?.results ?? []).filter((r) => r.source_call_id === tc.tool_call_id).map((r) => h`<pre>${r.content ?? ""}</pre>`)}</details>`)}
${s.metrics ? h`<p class="mut">prompt ${s.metrics.prompt_tokens}, completion ${s.metrics.completion_tokens}</p>` : ""}</article>`)}</div>
<nav aria-label="Step pages">${p > 1 ? h`<a href="?page=${p - 1}">Previous steps</a> ` : ""}page ${p} of ${pages}${p < pages ? h` <a href="?page=${p + 1}">Next steps</a>` : ""}</nav>`;
    return html(c, page(`Steps of ${t.id}`, "/jobs", body));
  });

  app.get("/trials/:id/file", async (c) => {
    const t = trial(c.req.param("id"));
    const path = c.req.query("path") ?? "";
    const dir = trialDir(home, t.id);
    const m = await readManifest(dir);
    // only a path the manifest lists is read: never a name the request made up (`..`, NUL, links)
    const entry = m?.files.find((f) => f.path === path);
    if (!entry) throw new NotFound(`trial ${t.id} kept no file ${path}`);
    let lines: Safe;
    if (entry.kind === "deleted") lines = h`<p>Deleted by the run.</p>`;
    else if (entry.type !== "file") lines = h`<p>${entry.type ?? "entry"}${entry.target ? ` → ${entry.target}` : ""}</p>`;
    else {
      const buf = await readKeptFile(dir, path, FILE_VIEW);
      const textual = !buf.subarray(0, 8000).includes(0);
      lines = textual
        ? h`<div class="diff" role="region" aria-label="Diff">${buf.toString("utf8").split("\n").map((l) => h`<code class="add">+ ${l}</code>`)}</div>`
        : h`<p>Binary file, ${buf.length} bytes.</p>`;
    }
    const body = h`<h1>${path}</h1><p><a href="/trials/${t.id}#files">Back to trial ${t.id}</a> · ${entry.kind}${entry.kind === "modified" ? " (the kept tree holds the new content; the image holds the old)" : ""}</p>${lines}`;
    return html(c, page(path, "/jobs", body));
  });

  // ---- datasets ----
  app.get("/datasets", (c) => {
    const q = (c.req.query("q") ?? "").trim();
    const rows = listDatasets(store).filter((d) => q === "" || d.name.includes(q));
    const body = h`<h1>Datasets</h1>
<form class="filters" method="get" action="/datasets" role="search"><label>Search by name<input name="q" value="${q}"></label><button type="submit">Search</button></form>
<p class="mut">Every dataset here is private to this machine's store. Publishing is <code>evolve dataset publish</code>.</p>
<table><thead><tr><th scope="col">Dataset</th><th scope="col" class="num">Tasks</th><th scope="col">Version</th><th scope="col">Visibility</th><th scope="col">Status</th><th scope="col">Updated</th></tr></thead>
<tbody>${rows.map((d) => h`<tr><td><a href="/datasets/${d.name}?version=${encodeURIComponent(d.version)}">${d.name}</a></td><td class="num">${d.task_count}</td><td>${d.version}</td><td>private</td><td>${d.status}</td><td>${d.updated_at}</td></tr>`)}</tbody></table>
${rows.length === 0 ? h`<p>No dataset${q ? " matches" : " yet"}.</p>` : ""}`;
    return html(c, page("Datasets", "/datasets", body));
  });
  app.get("/datasets/*", (c) => {
    const name = datasetParam(c.req.path.slice("/datasets/".length));
    const version = c.req.query("version");
    if (version !== undefined && (!/^[^\s@/\0]{1,100}$/.test(version) || version.includes(".."))) throw new BadRequest("not a dataset version");
    const { dataset, tasks } = showDataset(store, version ? `${name}@${version}` : name);
    const versions = store.listDatasets(name).sort((a, b) => b.created_at.localeCompare(a.created_at));
    const body = h`<h1>Dataset ${dataset.name}</h1>
<dl class="band"><dt>Visibility</dt><dd>private</dd><dt>Version</dt><dd>${dataset.version}</dd><dt>Tasks</dt><dd>${tasks.length}</dd><dt>Digest</dt><dd><code>${dataset.digest}</code></dd></dl>
<nav class="tabs" aria-label="Dataset sections"><a href="#tasks">Tasks</a><a href="#versions">Versions</a></nav>
<section id="tasks" aria-labelledby="tasks-h"><h2 id="tasks-h">Tasks</h2><table><thead><tr><th scope="col">Task</th><th scope="col" class="num">GPUs</th><th scope="col" class="num">Agent timeout</th><th scope="col" class="num">Verifier timeout</th><th scope="col">Steps</th><th scope="col">Network</th><th scope="col">Providers</th></tr></thead>
<tbody>${tasks.map((t) => h`<tr><td>${t.name}</td><td class="num">${t.summary.gpus}</td><td class="num">${t.summary.agent_timeout_sec === null ? "-" : `${t.summary.agent_timeout_sec}s`}</td><td class="num">${t.summary.verifier_timeout_sec === null ? "-" : `${t.summary.verifier_timeout_sec}s`}</td><td>${t.summary.steps}</td><td>${t.summary.network_mode}</td><td>${t.summary.gpus > 0 ? h`<span title="this machine runs no GPU boxes">local (refused: needs ${t.summary.gpus} GPU)</span>` : "local"}</td></tr>`)}</tbody></table></section>
<section id="versions" aria-labelledby="versions-h"><h2 id="versions-h">Versions</h2><table><thead><tr><th scope="col">Version</th><th scope="col" class="num">Tasks</th><th scope="col">Status</th><th scope="col">Created</th></tr></thead>
<tbody>${versions.map((v) => h`<tr><td>${v.status === "active" ? h`<a href="/datasets/${v.name}?version=${encodeURIComponent(v.version)}">${v.version}</a>` : v.version}</td><td class="num">${v.tasks.length}</td><td>${v.status}</td><td>${v.created_at}</td></tr>`)}</tbody></table></section>`;
    return html(c, page(`Dataset ${dataset.name}`, "/datasets", body));
  });

  app.route("/", evolutionApp(deps));

  app.notFound((c) => html(c, page("Not found", "", h`<h1>Not found</h1><p>No page at this address.</p>`), 404));
  return app;
}

// ---- helpers of the pages ----

interface JobQuery {
  status?: string;
  kind?: string;
  agent?: string;
  model?: string;
  dataset?: string;
  name?: string;
  since?: string;
}

function jobQuery(c: Context): JobQuery {
  const get = (k: string) => {
    const v = c.req.query(k)?.trim();
    return v ? v : undefined;
  };
  return { status: get("status"), kind: get("kind"), agent: get("agent"), model: get("model"), dataset: get("dataset"), name: get("name"), since: get("since") };
}

interface ListedJob {
  s: JobSummary;
  spend: ReturnType<typeof jobSpend>;
  tokens: string;
}

/** The jobs a query keeps: `job list`'s own filter (listJobRows), then the model, which `job list` has no flag for. */
function jobRows(store: Store, q: JobQuery): ListedJob[] {
  if (q.status && !(JOB_STATUSES as readonly string[]).includes(q.status)) throw new BadRequest(`status must be one of ${JOB_STATUSES.join(", ")}`);
  if (q.kind && !(JOB_KINDS as readonly string[]).includes(q.kind)) throw new BadRequest(`kind must be one of ${JOB_KINDS.join(", ")}`);
  const filter: JobFilter = {
    status: q.status ? [q.status as JobSummary["status"]] : undefined,
    kind: q.kind ? [q.kind as JobSummary["kind"]] : undefined,
    agent: q.agent,
    dataset: q.dataset,
    name: q.name,
    since: q.since !== undefined ? parseSince(q.since) : undefined,
    limit: 0,
  };
  const out: ListedJob[] = [];
  for (const row of listJobRows(store, filter).jobs) {
    if (q.model !== undefined && row.model !== q.model) continue;
    const j = store.getJob(row.id)!;
    const trials = store.listTrials(row.id);
    out.push({ s: summarizeJob(j, trials), spend: jobSpend(trials, { agent: store.getSpend("job", row.id, "agent"), judge: store.getSpend("job", row.id, "judge") }), tokens: tokensOf(trials) });
  }
  return out;
}

function jobRowsHtml(rows: readonly ListedJob[]): Safe {
  if (rows.length === 0) return h`<tr><td colspan="14">No job matches these filters.</td></tr>`;
  return h`${rows.map(({ s, spend, tokens }) => h`<tr data-job="${s.id}"><td><input type="checkbox" name="jobs" value="${s.id}" aria-label="Compare job ${s.id}"></td><td><a href="/jobs/${s.id}">${s.name ?? s.id}</a>${s.name ? h`<br><span class="mut">${s.id}</span>` : ""}</td><td>${s.kind.toUpperCase()}</td><td>${statusTag(s.status)}${s.all_infrastructure_error ? h` <span class="status bad">all infra errors</span>` : ""}</td><td>${s.agent}</td><td>${s.model ?? "-"}</td><td>${s.source}</td><td class="num">${s.n_trials}</td><td>${Object.entries(s.counts).map(([k, v]) => `${k} ${v}`).join(", ")}</td><td class="num">${num(s.mean_reward)}</td><td>${passAtK(s)}</td><td class="num">${usd(spend.agent_usd, spend.agent_lower_bound)}</td><td class="num">${tokens}</td><td>${s.created_at}</td></tr>`)}`;
}

function passAtK(s: JobSummary): string {
  return s.pass_at_k ? Object.entries(s.pass_at_k).map(([k, v]) => `@${k} ${num(v)}`).join("  ") : "-";
}

/** A job's agent tokens, input and output, as every reader counts them (tokenCounts); `-` when no trial kept any. */
function tokensOf(trials: readonly TrialRecord[]): string {
  let prompt = 0;
  let output = 0;
  let any = false;
  for (const t of trials) {
    const c = tokenCounts(t.tokens);
    if (!c) continue;
    any = true;
    prompt += c.prompt;
    output += c.output;
  }
  return any ? `${prompt} in / ${output} out` : "-";
}

/** The trials table, the task × attempt matrix and the exception summary: what a running job's page refreshes. */
function jobSections(s: JobSummary, trials: readonly TrialRecord[]): Safe {
  const live = s.status === "RUNNING";
  const byTask = new Map<string, TrialRecord[]>();
  for (const t of [...trials].sort((a, b) => a.created_at.localeCompare(b.created_at))) {
    const key = `${t.task_digest}\0${t.task_path ?? ""}`;
    byTask.set(key, [...(byTask.get(key) ?? []), t]);
  }
  const width = Math.max(0, ...[...byTask.values()].map((v) => v.length));
  const exc = Object.entries(s.exceptions).sort((a, b) => b[1] - a[1]);
  return h`<section id="trials" aria-labelledby="trials-h"><h2 id="trials-h">Trials</h2>
<table><thead><tr><th scope="col">Trial</th><th scope="col">Task</th><th scope="col">Status</th><th scope="col" class="num">Reward</th><th scope="col" class="num">Time</th><th scope="col" class="num">Attempts</th><th scope="col">Exception</th><th scope="col" class="num">Spend</th></tr></thead>
<tbody>${trials.map((t) => {
    const lane = measuredLane(t.spend);
    return h`<tr data-trial="${t.id}"><td><a href="/trials/${t.id}">${t.id}</a></td><td>${taskLabel(t)}</td><td>${statusTag(t.status)}</td><td class="num">${num(primaryReward(t.rewards))}</td><td class="num">${seconds(attemptSeconds(t, Date.now(), live))}</td><td class="num">${trialAttempts(t).count}</td><td>${t.exception ? `${t.exception.type}: ${t.exception.message.split("\n")[0]!.slice(0, 200)}` : ""}</td><td class="num">${lane ? usd(lane.final_usd ?? lane.live_usd, lane.final_usd === null) : "-"}</td></tr>`;
  })}</tbody></table></section>
<section id="matrix" aria-labelledby="matrix-h"><h2 id="matrix-h">Task × attempt</h2>
<table><thead><tr><th scope="col">Task</th>${Array.from({ length: width }, (_, i) => h`<th scope="col">#${i + 1}</th>`)}</tr></thead>
<tbody>${[...byTask.values()].map((ts) => h`<tr><th scope="row">${taskLabel(ts[0]!)}</th>${Array.from({ length: width }, (_, i) => {
    const t = ts[i];
    return t ? h`<td><a href="/trials/${t.id}">${statusTag(t.status)} ${t.status === "SCORED" ? num(primaryReward(t.rewards)) : ""}</a></td>` : h`<td class="mut">-</td>`;
  })}</tr>`)}</tbody></table></section>
<section id="exceptions" aria-labelledby="exceptions-h"><h2 id="exceptions-h">Exceptions</h2>
${exc.length === 0 ? h`<p>No trial ended with an exception.</p>` : h`<table><thead><tr><th scope="col">Exception</th><th scope="col" class="num">Trials</th><th scope="col">First message</th></tr></thead><tbody>${exc.map(([type, n]) => h`<tr><td>${type}</td><td class="num">${n}</td><td>${trials.find((t) => t.exception?.type === type)?.exception?.message.split("\n")[0]?.slice(0, 300) ?? ""}</td></tr>`)}</tbody></table>`}</section>`;
}

/**
 * The CHECK tab (platform-dashboard-checks.md): a check job lists its own task checks; another job lists the checks
 * of its dataset, or, before any exists, the command that would start one.
 */
function checkTab(store: Store, j: JobRecord, trials: readonly TrialRecord[]): Safe {
  const config = jobConfig(j);
  const isCheck = (config.kind ?? "run") === "check";
  const dataset = j.dataset ?? (config.source.kind === "dataset" ? config.source.ref : undefined);
  const checks: TrialRecord[] = isCheck
    ? [...trials]
    : dataset
      ? store
          .listJobs()
          .filter((o) => o.id !== j.id && jobConfig(o).kind === "check" && (o.dataset ?? (jobConfig(o).source as { ref?: string }).ref) === dataset)
          .flatMap((o) => store.listTrials(o.id))
      : [];
  if (checks.length === 0) {
    const target = dataset ? `-d ${dataset}` : `-p ${config.source.kind === "path" ? config.source.path : "<task dir>"}`;
    return h`<p>No task of this job has been checked.</p><p>Check its tasks (each task's reference solution, run by the oracle) with:</p><pre><code>evolve check ${target}</code></pre>`;
  }
  return h`<table><thead><tr><th scope="col">Task</th><th scope="col">Dataset</th><th scope="col">Result</th><th scope="col">Check</th></tr></thead>
<tbody>${checks.map((t) => h`<tr><td><a href="/trials/${t.id}">${taskLabel(t)}</a></td><td>${t.source ?? dataset ?? "-"}</td><td>${statusTag(t.status)} ${t.status === "SCORED" ? (primaryReward(t.rewards) === 1 ? "solvable" : `reward ${num(primaryReward(t.rewards))}: not solved`) : ""}</td><td><a href="/jobs/${t.job_id}">${t.job_id}</a></td></tr>`)}</tbody></table>`;
}

/** The phases of the latest attempt as a bar, each segment's width its share of the time, named and timed in text. */
function timingBar(t: TrialRecord): Safe {
  const now = Date.now();
  const spans = PHASES.flatMap((p) => {
    const pt = t.phase_timings[p];
    if (!pt) return [];
    const start = Date.parse(pt.started_at);
    const end = pt.finished_at ? Date.parse(pt.finished_at) : now;
    return [{ p, sec: Math.max(0, end - start) / 1000, open: !pt.finished_at }];
  });
  if (spans.length === 0) return h`<p>No phase has started.</p>`;
  const total = spans.reduce((a, s) => a + s.sec, 0) || 1;
  return h`<div class="timing" role="img" aria-label="${spans.map((s) => `${s.p} ${seconds(s.sec)}`).join(", ")}">${spans.map((s) => h`<div style="flex:${Math.max(s.sec / total, 0.02).toFixed(4)}" title="${s.p}: ${seconds(s.sec)}">${s.p} ${seconds(s.sec)}${s.open ? " (running)" : ""}</div>`)}</div>
<table><thead><tr><th scope="col">Phase</th><th scope="col" class="num">Time</th></tr></thead><tbody>${spans.map((s) => h`<tr><td>${s.p}</td><td class="num">${seconds(s.sec)}${s.open ? " so far" : ""}</td></tr>`)}</tbody></table>`;
}

function spendTable(t: TrialRecord): Safe {
  const agent = measuredLane(t.spend);
  const judge = measuredLane(t.spend?.judge);
  const c = tokenCounts(t.tokens);
  const row = (name: string, l: { live_usd: number; final_usd: number | null; calls?: number } | undefined, tokens: string) =>
    h`<tr><td>${name}</td><td class="num">${l ? usd(l.final_usd ?? l.live_usd, l.final_usd === null) : "-"}</td><td class="num">${l?.calls ?? "-"}</td><td>${tokens}</td></tr>`;
  return h`<table><thead><tr><th scope="col">Lane</th><th scope="col" class="num">Spend</th><th scope="col" class="num">Calls</th><th scope="col">Tokens</th></tr></thead><tbody>
${row("agent", agent, c ? `prompt ${c.prompt}, output ${c.output}, cached ${c.cached_read}` : "-")}${row("judge", judge, judge && t.spend?.judge?.tokens ? Object.entries(t.spend.judge.tokens).map(([k, v]) => `${k} ${v}`).join(", ") : "-")}</tbody></table>`;
}

function rewardsTable(t: TrialRecord): Safe {
  const r = t.rewards ?? {};
  const steps = t.step_results ?? [];
  return h`${Object.keys(r).length === 0 ? h`<p>No reward.</p>` : h`<table><thead><tr><th scope="col">Key</th><th scope="col" class="num">Value</th></tr></thead><tbody>${Object.entries(r).map(([k, v]) => h`<tr><td>${k}</td><td class="num">${num(v)}</td></tr>`)}</tbody></table>`}
${steps.length > 0 ? h`<h3>Steps</h3><table><thead><tr><th scope="col">Step</th><th scope="col" class="num">Reward</th></tr></thead><tbody>${steps.map((s) => h`<tr><td>${s.name}</td><td class="num">${num(typeof s.reward === "number" ? s.reward : primaryReward(s.rewards as Record<string, number> | undefined))}</td></tr>`)}</tbody></table>` : ""}`;
}

async function filesTable(dir: string, id: string): Promise<Safe> {
  const m = await readManifest(dir);
  if (!m) return h`<p>No kept tree: the trial kept no changed files (it never booted, or was cancelled).</p>`;
  const shown = m.files.slice(0, 2000);
  return h`<p class="mut">${m.files.length} changed paths, ${m.kept_bytes} bytes kept${m.skipped.length ? `, ${m.skipped.length} not kept` : ""}.</p>
<table><thead><tr><th scope="col">Path</th><th scope="col">Change</th><th scope="col" class="num">Size</th></tr></thead><tbody>${shown.map((f) => h`<tr><td><a href="/trials/${id}/file?path=${encodeURIComponent(f.path)}">${f.path}</a></td><td>${f.kind}</td><td class="num">${f.size ?? "-"}</td></tr>`)}</tbody></table>${m.files.length > shown.length ? h`<p>… and ${m.files.length - shown.length} more (see <code>evolve trial files changes ${id}</code>).</p>` : ""}`;
}

/** The end of a log in the trial folder, read as a box-written file (no links, regular files only, bounded). */
async function readLog(dir: string, rel: string): Promise<string | undefined> {
  try {
    return await readBoxFile(dir, join(dir, rel), { limit: LOG_TAIL, tail: true });
  } catch {
    return undefined;
  }
}

/** How many of the agent folder's files the viewer shows, and which kinds (its streams and logs, not its trajectory). */
const AGENT_LOGS = 6;
const AGENT_LOG_RE = /\.(txt|log)$/;

/**
 * The agent's own output: the text files the harness wrote at the top of `agent/` (its stdout and stderr streams,
 * by whatever name the harness gives them), each its end, at most AGENT_LOGS of them.
 */
async function agentLogs(dir: string): Promise<{ name: string; text: string }[]> {
  let names: string[];
  try {
    names = readdirSync(join(dir, TRIAL.agent), { withFileTypes: true })
      .filter((e) => e.isFile() && AGENT_LOG_RE.test(e.name))
      .map((e) => e.name)
      .sort()
      .slice(0, AGENT_LOGS);
  } catch {
    return [];
  }
  const out: { name: string; text: string }[] = [];
  for (const name of names) {
    const text = await readLog(dir, join(TRIAL.agent, name));
    if (text !== undefined) out.push({ name, text });
  }
  return out;
}

function logBlock(title: string, s: string | undefined): Safe {
  if (s === undefined) return h`<h3>${title}</h3><p class="mut">none</p>`;
  return h`<details><summary><h3 style="display:inline">${title}</h3> <span class="mut">(${s.length} characters${s.length >= LOG_TAIL ? ", the end" : ""})</span></summary><pre>${s}</pre></details>`;
}

function takeLines(it: Generator<StoredLine>, n: number): StoredLine[] {
  const out: StoredLine[] = [];
  for (const l of it) {
    out.push(l);
    if (out.length >= n) break;
  }
  // leaving the loop early runs the generator's finally, which closes the trace file
  it.return(undefined);
  return out;
}

function cursor(v: string | undefined): number {
  if (v === undefined || v === "") return -1;
  if (!/^-?\d{1,12}$/.test(v)) throw new BadRequest("after must be a whole number");
  return Math.max(-1, Number(v));
}

function pageNumber(v: string | undefined): number {
  if (v === undefined) return 1;
  if (!/^\d{1,6}$/.test(v) || Number(v) < 1) throw new BadRequest("page must be a whole number ≥ 1");
  return Number(v);
}

/** A dataset name from the path: the store's own name rule, and no `..` segment or encoded trick past it. */
function datasetParam(raw: string): string {
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    throw new BadRequest("not a dataset name");
  }
  if (name.split("/").some((p) => p === ".." || p === ".") || name.includes("\0")) throw new BadRequest("not a dataset name");
  try {
    checkDatasetName(name);
  } catch {
    throw new BadRequest("not a dataset name");
  }
  return name;
}

function select(name: string, label: string, options: readonly string[], value: string | undefined): Safe {
  return h`<label>${label}<select name="${name}"><option value="">any</option>${options.map((o) => h`<option${o === value ? h` selected` : ""}>${o}</option>`)}</select></label>`;
}

function input(name: string, label: string, value: string | undefined): Safe {
  return h`<label>${label}<input name="${name}" value="${value ?? ""}"></label>`;
}
