/**
 * The evolution pages (issue 23 §2, which no anchor has): the served project's rounds and screens (per candidate its
 * gates, t, interval, sign test, rollouts and spend, and per task the parent against the candidate with links to
 * both trials), the gene bank with its lineage as a tree, a candidate's diff against its parent, and a Meta-Harness
 * run (candidates, rounds, means, tampered and invalid ones, the proposer's reports). Read from the records the
 * evolver wrote, through the same readers `harness … --json` and the API use; only the project and the run folder
 * `evolve serve` was started with are read, never a folder a request names.
 */
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { Hono } from "hono";
import { projectPaths } from "../eval/project.ts";
import { signTestEvidence } from "../eval/stats.ts";
import type { Attempt, GateResult } from "../eval/types.ts";
import { buildOverlay, isCandidateId, listCandidates, readCandidate } from "../evolve/candidate.ts";
import { geneBankCells, readGeneBankLines } from "../evolve/genebank.ts";
import { readRounds } from "../evolve/round.ts";
import { readScreen } from "../evolve/screen.ts";
import type { CandidateScreen, GeneBankEntry } from "../evolve/types.ts";
import { statusDocument } from "../metaharness/documents.ts";
import { runPaths } from "../metaharness/layout.ts";
import { loadState } from "../metaharness/state.ts";
import type { Store } from "../store/index.ts";
import { h, type Safe } from "./html.ts";
import { BadRequest, html, NotFound, validId } from "./pages.ts";
import { num, page, usd } from "./views.ts";

/** What the evolution pages read: the store (to link trials that exist), the served project and Meta-Harness run. */
export interface EvolutionDeps {
  store: Store;
  project?: string;
  metaharnessRun?: string;
}

/** The most of one file the candidate diff compares line by line; a bigger file is shown as changed, not diffed. */
const DIFF_FILE_BYTES = 256 * 1024;
/** The largest line-count product the diff's table may take (n × m cells); beyond it a file is replaced whole. */
const DIFF_CELLS = 4_000_000;
/** The most of a proposer's report the Meta-Harness page shows. */
const REPORT_BYTES = 64 * 1024;

/** The pages, as a hono app the dashboard mounts at `/`. */
export function evolutionApp(deps: EvolutionDeps): Hono {
  const app = new Hono();
  const { store } = deps;

  /** A trial id as a link when the store holds it, else as text (a cards screen's attempt is a log path). */
  const trialLink = (id: string | undefined): Safe => {
    if (id === undefined || id === "") return h`<span class="mut">-</span>`;
    return validId(id) && store.getTrial(id) ? h`<a href="/trials/${id}">${id}</a>` : h`<code>${id}</code>`;
  };

  app.get("/evolution", (c) => {
    const project = deps.project;
    if (project === undefined) return html(c, page("Evolution", "/evolution", noProject()));
    const rounds = readRounds(project);
    const candidates = listCandidates(project);
    const screens = listScreens(project);
    const body = h`<h1>Evolution</h1>
<dl class="band"><dt>Project</dt><dd><code>${project}</code></dd><dt>Rounds</dt><dd>${rounds.length}</dd><dt>Candidates</dt><dd>${candidates.length}</dd><dt>Gene bank</dt><dd><a href="/evolution/genebank">cells and lineage</a></dd></dl>
<section aria-labelledby="rounds-h"><h2 id="rounds-h">Rounds</h2>
${rounds.length === 0 ? h`<p>No round has run: <code>evolve harness round --project ${project}</code>.</p>` : h`<table id="rounds"><thead><tr><th scope="col">Round</th><th scope="col">Stage</th><th scope="col">Screen</th><th scope="col">Candidates</th><th scope="col" class="num">Parent pass@1</th><th scope="col">Utility (pass@1)</th><th scope="col">Confirmed</th><th scope="col">Rejected</th><th scope="col">Held out</th><th scope="col" class="num">Rollouts</th><th scope="col" class="num">Spend</th><th scope="col">Stop</th></tr></thead>
<tbody>${rounds.map((r) => {
      const cost = Object.values(r.cost ?? {});
      return h`<tr data-round="${r.round}"><th scope="row">${r.round}</th><td>${r.stage}</td><td>${r.screen_id ? h`<a href="/evolution/screens/${r.screen_id}">${r.screen_id}</a>` : "-"}</td>
<td>${r.candidates.map((id) => h`<a href="/evolution/candidates/${id}">${id}</a> `)}</td><td class="num">${num(r.parent_utility)}</td>
<td>${Object.entries(r.utility).map(([id, u]) => `${id} ${num(u)}`).join(", ") || "-"}</td><td>${r.confirmed.join(", ") || "-"}</td>
<td>${Object.entries(r.rejected).map(([id, why]) => h`<span title="${why}">${id}: ${why}</span><br>`)}</td>
<td>${r.holdout ? Object.entries(r.holdout.results).map(([id, s]) => `${id} ${s.held ? "held" : "did not hold"} (${s.mean_gain >= 0 ? "+" : ""}${s.mean_gain.toFixed(3)})`).join(", ") : "-"}</td>
<td class="num">${cost.length ? cost.reduce((a, x) => a + (x?.rollouts ?? 0), 0) : "-"}</td><td class="num">${cost.length ? usd(cost.reduce((a, x) => a + (x?.cost_usd ?? 0), 0)) : "-"}</td><td>${r.stop ?? "-"}</td></tr>`;
    })}</tbody></table>`}</section>
<section aria-labelledby="screens-h"><h2 id="screens-h">Screens</h2>
${screens.length === 0 ? h`<p>No screen yet.</p>` : h`<ul>${screens.map((id) => h`<li><a href="/evolution/screens/${id}">${id}</a></li>`)}</ul>`}</section>
<section aria-labelledby="cands-h"><h2 id="cands-h">Candidates</h2>
${candidates.length === 0 ? h`<p>No candidate: <code>evolve harness scaffold --project ${project}</code> makes one.</p>` : h`<table id="candidates"><thead><tr><th scope="col">Candidate</th><th scope="col">Parent</th><th scope="col">Where</th><th scope="col">Pathology</th><th scope="col">Hypothesis</th><th scope="col">Created</th></tr></thead>
<tbody>${candidates.map((d) => h`<tr><td><a href="/evolution/candidates/${d.id}">${d.id}</a></td><td>${d.parent === "live" ? "live" : h`<a href="/evolution/candidates/${d.parent}">${d.parent}</a>`}</td><td>${d.where}</td><td>${d.pathology}</td><td>${d.hypothesis}</td><td>${d.created_at}</td></tr>`)}</tbody></table>`}</section>`;
    return html(c, page("Evolution", "/evolution", body));
  });

  app.get("/evolution/screens/:id", (c) => {
    const project = needProject(deps);
    const id = c.req.param("id");
    if (!validId(id)) throw new BadRequest("not a screen id");
    if (!existsSync(join(projectPaths(project).screen(id), "screen.json"))) throw new NotFound(`no screen ${id}`);
    const rec = readScreen(project, id);
    const body = h`<h1>Screen ${rec.id}</h1>
<dl class="band"><dt>At</dt><dd>${rec.at}</dd><dt>Source</dt><dd>${rec.source}</dd><dt>Sample</dt><dd>${rec.sample.length} tasks</dd>${rec.seed ? h`<dt>Seed</dt><dd>${rec.seed}</dd>` : ""}
${rec.jobs ? h`<dt>Jobs</dt><dd>${Object.entries(rec.jobs).map(([harness, job]) => h`${harness}: ${validId(job) && store.getJob(job) ? h`<a href="/jobs/${job}">${job}</a>` : job} `)}</dd>` : ""}</dl>
${rec.limits.length ? h`<ul class="mut" aria-label="Limits of this screen">${rec.limits.map((l) => h`<li>${l}</li>`)}</ul>` : ""}
<h2>Candidates</h2>
<table id="screen-candidates"><thead><tr><th scope="col">Candidate</th><th scope="col">Parent</th><th scope="col">Verdict</th><th scope="col">Validity</th><th scope="col">Activation</th><th scope="col">Paired gain</th><th scope="col" class="num">n</th><th scope="col" class="num">Mean gain</th><th scope="col" class="num">t</th><th scope="col" class="num">95% interval</th><th scope="col">Sign test</th><th scope="col" class="num">Rollouts</th><th scope="col" class="num">Spend</th></tr></thead>
<tbody>${rec.candidates.map((cs) => h`<tr data-candidate="${cs.candidate}"><th scope="row"><a href="/evolution/candidates/${cs.candidate}">${cs.candidate}</a></th><td>${cs.parent}</td><td>${verdict(cs.passed)}</td>
<td>${gate(cs.gates.validity)}</td><td>${gate(cs.gates.activation)}</td><td>${gate(cs.gates.paired_gain)}</td><td class="num">${cs.stats.n}</td><td class="num">${signed(cs.stats.mean_gain)}</td>
<td class="num">${cs.stats.t === null ? "-" : Number.isFinite(cs.stats.t) ? cs.stats.t.toFixed(2) : cs.stats.t > 0 ? "+∞" : "−∞"}</td><td class="num">${cs.stats.ci95 ? `[${cs.stats.ci95[0].toFixed(3)}, ${cs.stats.ci95[1].toFixed(3)}]` : "-"}</td>
<td>${(cs.sign_test ?? signTestEvidence(cs.stats)).detail}</td><td class="num">${cs.cost.rollouts}</td><td class="num">${usd(cs.cost.cost_usd)}</td></tr>`)}</tbody></table>
${rec.candidates.map((cs) => baselineVsCandidate(cs, trialLink))}`;
    return html(c, page(`Screen ${rec.id}`, "/evolution", body));
  });

  app.get("/evolution/genebank", (c) => {
    const project = needProject(deps);
    const { entries, skipped } = readGeneBankLines(project);
    const cells = geneBankCells(entries);
    const body = h`<h1>Gene bank</h1>
<p>One confirmed harness per (where, pathology) cell: the holder is the highest utility offered to it. ${entries.length} entries${skipped ? `, ${skipped} unreadable lines skipped` : ""}.</p>
<table id="genebank-cells"><thead><tr><th scope="col">Where</th><th scope="col">Pathology</th><th scope="col">Holder</th><th scope="col" class="num">Utility</th><th scope="col" class="num">Round</th><th scope="col">Lineage</th></tr></thead>
<tbody>${cells.map((e) => h`<tr><td>${e.where}</td><td>${e.pathology}</td><td>${candidateLink(e.harness_id)}</td><td class="num">${num(e.utility)}</td><td class="num">${e.round}</td><td>${e.lineage.join(" → ")}</td></tr>`)}</tbody></table>
${cells.length === 0 ? h`<p>The gene bank is empty: a round offers it each candidate that held out.</p>` : ""}
<h2>Lineage</h2>
${lineageTree(entries, new Set(cells.map((e) => e.harness_id)))}`;
    return html(c, page("Gene bank", "/evolution", body));
  });

  app.get("/evolution/candidates/:id", (c) => {
    const project = needProject(deps);
    const id = c.req.param("id");
    if (!isCandidateId(id)) throw new BadRequest("not a candidate id");
    if (!existsSync(projectPaths(project).candidate(id))) throw new NotFound(`no candidate ${id}`);
    const { descriptor: d } = readCandidate(project, id);
    const changes = candidateDiff(project, id, d.parent);
    const body = h`<h1>Candidate ${d.id}</h1>
<dl class="band"><dt>Parent</dt><dd>${candidateLink(d.parent)}</dd><dt>Where</dt><dd>${d.where}</dd><dt>Pathology</dt><dd>${d.pathology}</dd><dt>Hypothesis</dt><dd>${d.hypothesis}</dd><dt>Marker</dt><dd>${d.activation.marker ?? "none"}</dd><dt>Created</dt><dd>${d.created_at}</dd></dl>
<h2>Diff against ${d.parent}</h2>
<p class="mut">The harness as the candidate builds it, against its parent's; ${changes.length} changed paths. Lines marked + were added, − removed.</p>
${changes.length === 0 ? h`<p>No change: the candidate builds the same harness as its parent.</p>` : changes.map((f) => h`<section class="file-diff" aria-label="${f.path}"><h3><code>${f.path}</code> <span class="mut">${f.kind}</span></h3>${f.lines ? h`<div class="diff" role="region" aria-label="Diff of ${f.path}">${f.lines.map(([op, l]) => h`<code class="${op === "+" ? "add" : op === "-" ? "del" : "ctx"}">${op === "-" ? "−" : op} ${l}</code>`)}</div>` : h`<p>${f.note ?? ""}</p>`}</section>`)}`;
    return html(c, page(`Candidate ${d.id}`, "/evolution", body));
  });

  app.get("/metaharness", (c) => {
    const run = deps.metaharnessRun;
    if (run === undefined) return html(c, page("Meta-Harness", "/metaharness", h`<h1>Meta-Harness</h1><p>This server shows no Meta-Harness run: start it with <code>evolve serve --metaharness-run &lt;dir&gt;</code>.</p>`));
    const doc = statusDocument(run);
    const state = loadState(run);
    const paths = runPaths(run);
    const reports = (state.rounds ?? []).map((r) => ({ r, text: boundedText(paths.stepOutput(r.step).proposerReport, REPORT_BYTES) }));
    const body = h`<h1>Meta-Harness run</h1>
<dl class="band"><dt>Run</dt><dd><code>${run}</code></dd><dt>Step</dt><dd>${doc.step}</dd><dt>Round</dt><dd>${doc.round}</dd><dt>Handed back</dt><dd>${doc.handedBack ?? "-"}</dd><dt>Queue</dt><dd>${doc.queue.join(", ") || "empty"}</dd><dt>Finalized</dt><dd>${doc.finalized ?? "not yet"}</dd></dl>
<h2>Candidates</h2>
<table id="mh-candidates"><thead><tr><th scope="col">Candidate</th><th scope="col" class="num">Round</th><th scope="col">Status</th><th scope="col" class="num">Mean</th><th scope="col" class="num">Evaluations</th><th scope="col">Base</th><th scope="col">Hypothesis</th><th scope="col">Problems</th></tr></thead>
<tbody>${doc.candidates.map((m) => h`<tr data-candidate="${m.id}"><th scope="row">${m.id}${m.id === doc.finalized ? h` <span class="status ok">finalized</span>` : ""}</th><td class="num">${m.round}</td><td>${metaStatus(m.status)}</td><td class="num">${num(m.mean)}</td><td class="num">${m.evaluations}</td><td>${m.base ?? "-"}</td><td>${m.hypothesis}</td><td>${m.problems.join("; ") || "-"}</td></tr>`)}</tbody></table>
<h2>Rounds</h2>
<table id="mh-rounds"><thead><tr><th scope="col" class="num">Round</th><th scope="col" class="num">Step</th><th scope="col" class="num">Rollouts</th><th scope="col" class="num">Rollout spend</th><th scope="col" class="num">Proposer spend</th><th scope="col" class="num">Proposer tokens</th></tr></thead>
<tbody>${doc.spend.map((s) => h`<tr><td class="num">${s.round}</td><td class="num">${s.step ?? "-"}</td><td class="num">${s.rollouts}</td><td class="num">${usd(s.rollouts_usd)}</td><td class="num">${usd(s.proposer_usd)}${s.proposer_cost_source ? h` <span class="mut">(${s.proposer_cost_source})</span>` : ""}</td><td class="num">${s.proposer_tokens}</td></tr>`)}</tbody></table>
<h2>Proposer sessions and reports</h2>
${reports.length === 0 ? h`<p>No proposal round has run.</p>` : reports.map(({ r, text }) => h`<section aria-label="Proposal round ${r.round}"><h3>Round ${r.round} <span class="mut">(step ${r.step}, exit ${r.exit_code ?? "-"}, ${r.at})</span></h3>
<p>Trial ${trialLink(r.trial_id ?? undefined)} · queued ${r.queued.join(", ") || "none"} · rejected ${r.rejected.join(", ") || "none"}</p>
${text === undefined ? h`<p class="mut">No proposer report.</p>` : h`<details><summary>The proposer's report</summary><pre>${text}</pre></details>`}</section>`)}`;
    return html(c, page("Meta-Harness", "/metaharness", body));
  });

  return app;
}

function noProject(): Safe {
  return h`<h1>Evolution</h1><p>This server shows no evolution project: start it with <code>evolve serve --project &lt;dir&gt;</code>.</p>`;
}

function needProject(deps: EvolutionDeps): string {
  if (deps.project === undefined) throw new NotFound("this server shows no evolution project (evolve serve --project <dir>)");
  return deps.project;
}

/** The screens of the project, newest first (ids sort by time). */
function listScreens(project: string): string[] {
  const dir = projectPaths(project).screens;
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => validId(n) && existsSync(join(dir, n, "screen.json")))
    .sort()
    .reverse();
}

function candidateLink(id: string): Safe {
  return id === "live" || !isCandidateId(id) ? h`${id}` : h`<a href="/evolution/candidates/${id}">${id}</a>`;
}

/** A verdict in words with a shape, so it never rests on colour. */
function verdict(passed: boolean): Safe {
  return passed ? h`<span class="status ok">passed</span>` : h`<span class="status bad">failed</span>`;
}

function gate(g: GateResult): Safe {
  const cls = g.status === "pass" ? "ok" : g.status === "fail" ? "bad" : "warn";
  return h`<span class="status ${cls}" title="${g.detail}">${g.status}</span> <span class="mut">${g.detail}</span>`;
}

function metaStatus(s: string): Safe {
  const cls = s === "evaluated" ? "ok" : s === "queued" ? "live" : "bad";
  return h`<span class="status ${cls}">${s}</span>`;
}

const signed = (x: number) => `${x > 0 ? "+" : ""}${x.toFixed(3)}`;

/** Per task of the sample: the parent's and the candidate's attempts side by side, each linked to its trial. */
function baselineVsCandidate(cs: CandidateScreen, trialLink: (id: string | undefined) => Safe): Safe {
  const tasks = new Map<string, { parent: Attempt[]; cand: Attempt[] }>();
  for (const a of cs.attempts.parent) tasks.set(a.task, { parent: [...(tasks.get(a.task)?.parent ?? []), a], cand: tasks.get(a.task)?.cand ?? [] });
  for (const a of cs.attempts.candidate) tasks.set(a.task, { parent: tasks.get(a.task)?.parent ?? [], cand: [...(tasks.get(a.task)?.cand ?? []), a] });
  const mean = (as: Attempt[]) => {
    const s = as.filter((a) => a.valid && a.score !== null).map((a) => a.score!);
    return s.length ? s.reduce((x, y) => x + y, 0) / s.length : null;
  };
  const cell = (as: Attempt[]) => h`${as.map((a) => h`<div>${a.valid ? num(a.score) : h`<span class="status bad">invalid</span> <span class="mut">${a.invalid_reason ?? ""}</span>`} ${trialLink(a.log)}${a.marker_seen ? h` <span class="mut">(marker seen)</span>` : ""}</div>`)}`;
  return h`<section aria-labelledby="bvc-${cs.candidate}"><h2 id="bvc-${cs.candidate}">${cs.parent} vs ${cs.candidate}, per task</h2>
<table class="bvc" data-candidate="${cs.candidate}"><thead><tr><th scope="col">Task</th><th scope="col">Parent (${cs.parent})</th><th scope="col">Candidate (${cs.candidate})</th><th scope="col" class="num">Δ</th></tr></thead>
<tbody>${[...tasks.entries()].map(([task, v]) => {
    const p = mean(v.parent);
    const q = mean(v.cand);
    return h`<tr><th scope="row">${task}</th><td>${cell(v.parent)}</td><td>${cell(v.cand)}</td><td class="num diff">${p === null || q === null ? "-" : signed(q - p)}</td></tr>`;
  })}</tbody></table></section>`;
}

/**
 * The lineage of every gene bank entry as one tree rooted at `live`: each harness under the one it was made from,
 * the cells' holders marked, each node with the entries it had (utility, round).
 */
function lineageTree(entries: readonly GeneBankEntry[], holders: ReadonlySet<string>): Safe {
  interface Node {
    id: string;
    kids: Map<string, Node>;
    entries: GeneBankEntry[];
  }
  const root: Node = { id: "live", kids: new Map(), entries: [] };
  for (const e of entries) {
    let at = root;
    for (const id of e.lineage[0] === "live" ? e.lineage.slice(1) : e.lineage) {
      let next = at.kids.get(id);
      if (!next) at.kids.set(id, (next = { id, kids: new Map(), entries: [] }));
      at = next;
    }
    if (at.id === e.harness_id) at.entries.push(e);
  }
  const render = (n: Node): Safe =>
    h`<li data-harness="${n.id}">${candidateLink(n.id)}${holders.has(n.id) ? h` <span class="status ok">holds a cell</span>` : ""}${n.entries.map((e) => h` <span class="mut">${e.where}/${e.pathology} ${num(e.utility)} (round ${e.round})</span>`)}${n.kids.size ? h`<ul>${[...n.kids.values()].map(render)}</ul>` : ""}</li>`;
  return h`<ul class="tree" id="lineage" aria-label="Lineage from the live harness">${render(root)}</ul>`;
}

interface FileChange {
  path: string;
  kind: "added" | "removed" | "modified";
  lines?: ["+" | "-" | " ", string][];
  note?: string;
}

/** The files whose content differs between the parent's built harness and the candidate's, each with a line diff. */
function candidateDiff(project: string, id: string, parent: string): FileChange[] {
  const tmp = mkdtempSync(join(tmpdir(), "evolve-dash-diff-"));
  try {
    const a = buildOverlay(project, parent, join(tmp, "parent"));
    const b = buildOverlay(project, id, join(tmp, "candidate"));
    const fa = files(a);
    const fb = files(b);
    const out: FileChange[] = [];
    for (const path of [...new Set([...fa, ...fb])].sort()) {
      const x = fa.has(path) ? read(join(a, path)) : undefined;
      const y = fb.has(path) ? read(join(b, path)) : undefined;
      if (x !== undefined && y !== undefined && x.equals(y)) continue;
      const kind = x === undefined ? "added" : y === undefined ? "removed" : "modified";
      const text = (buf: Buffer | undefined) => (buf === undefined ? [] : buf.toString("utf8").split("\n"));
      const binary = [x, y].some((buf) => buf !== undefined && (buf.length > DIFF_FILE_BYTES || buf.subarray(0, 8000).includes(0)));
      out.push(binary ? { path: `.agent/${path}`, kind, note: "Binary or large file: not diffed." } : { path: `.agent/${path}`, kind, lines: lineDiff(text(x), text(y)) });
    }
    return out;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Regular files under `dir`, relative to it (a built overlay holds no links: buildOverlay refuses them). */
function files(dir: string): Set<string> {
  const out = new Set<string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.add(relative(dir, p));
    }
  };
  if (existsSync(dir) && lstatSync(dir).isDirectory()) walk(dir);
  return out;
}

function read(p: string): Buffer {
  return readFileSync(p);
}

/** A line diff by longest common subsequence; too big a table (n × m) shows the old lines removed and the new added. */
export function lineDiff(a: readonly string[], b: readonly string[]): ["+" | "-" | " ", string][] {
  const n = a.length;
  const m = b.length;
  if (n * m > DIFF_CELLS) return [...a.map((l) => ["-", l] as ["-", string]), ...b.map((l) => ["+", l] as ["+", string])];
  // lcs[i][j]: the longest common subsequence of a[i:] and b[j:], in one flat array
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i * w + j] = a[i] === b[j] ? lcs[(i + 1) * w + j + 1]! + 1 : Math.max(lcs[(i + 1) * w + j]!, lcs[i * w + j + 1]!);
  const out: ["+" | "-" | " ", string][] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) out.push([" ", a[i++]!]), j++;
    else if (lcs[(i + 1) * w + j]! >= lcs[i * w + j + 1]!) out.push(["-", a[i++]!]);
    else out.push(["+", b[j++]!]);
  }
  while (i < n) out.push(["-", a[i++]!]);
  while (j < m) out.push(["+", b[j++]!]);
  return out;
}

/** The start of a text file, or undefined when it is absent or not a regular file. */
function boundedText(path: string, limit: number): string | undefined {
  try {
    const st = lstatSync(path);
    if (!st.isFile()) return undefined;
    const buf = readFileSync(path);
    return buf.length > limit ? `${buf.subarray(0, limit).toString("utf8")}\n… (${buf.length - limit} more bytes)` : buf.toString("utf8");
  } catch {
    return undefined;
  }
}
