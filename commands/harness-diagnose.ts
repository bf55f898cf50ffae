/**
 * `evolve harness diagnose [--job ID] [--project DIR] [--json]`: the failed runs of a project's episodic memory (or of
 * any job) as `(skill, pathology)` diagnoses (engine/evolve/diagnose.ts). Text: one block per diagnosis with a few
 * evidence lines; `--json`: one document (docs/json.md). No failures says so and exits 0, like a clean `job show`.
 */
import { resolve } from "node:path";
import { EvolveError } from "../engine/errors.ts";
import { diagnoseReport, eachRunOfJob, MAX_EPISODE_BYTES, runsFromEpisodes, type Diagnosis, type DiagnosisReport, type EvidenceEvent } from "../engine/evolve/mod.ts";
import { agentPath, AGENT_PATHS } from "../engine/conductor/mod.ts";
import { projectPaths } from "../engine/eval/project.ts";
import { isTTY } from "../engine/runtime.ts";
import { out, style } from "./output.ts";
import { jobFromArg } from "./job.ts";
import { withStore } from "./store.ts";

/** How much of an evidence event a text line shows. */
const LINE = 140;

/** The options of `harness diagnose`. */
export interface DiagnoseOpts {
  project?: string;
  job?: string;
  json?: boolean;
}

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
const oneLine = (s: string) => s.replace(/\s+/g, " ").trim();
const cut = (s: string, n = LINE) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** One evidence event as a line: its position, kind and what it says (a call's command, a result's first words). */
export function evidenceLine(e: EvidenceEvent): string {
  const d: Record<string, unknown> = isObj(e.data) ? e.data : {};
  const u: Record<string, unknown> = isObj(d.update) ? d.update : {};
  const meta: Record<string, unknown> = isObj(u._meta) ? u._meta : {};
  let what: string;
  if (e.type === "tool_call") {
    const cmd = isObj(u.rawInput) && typeof u.rawInput.command === "string" ? u.rawInput.command : undefined;
    what = `${String(u.name ?? "?")}: ${cmd ?? String(u.title ?? "")}`;
  } else if (e.type === "tool_call_update") {
    const content: unknown[] = Array.isArray(u.content) ? u.content : [];
    const text = content.map((b) => (isObj(b) && isObj(b.content) && typeof b.content.text === "string" ? b.content.text : "")).join(" ");
    const tag = meta.vetoed === true ? " (vetoed)" : typeof meta.malformed === "string" ? ` (malformed: ${meta.malformed})` : "";
    what = `${String(u.status ?? "?")}${tag}: ${text}`;
  } else if (e.type === "error") what = `${u.fatal === false ? "(survived) " : ""}${String(u.message ?? "")}`;
  else if (isObj(u.content) && typeof u.content.text === "string") what = u.content.text;
  else if (e.type === "prompt" && isObj(d._prompt) && typeof d._prompt.text === "string") what = d._prompt.text;
  else what = JSON.stringify(e.data);
  const at = typeof e.seq === "number" ? `#${e.seq}` : "";
  return cut(`${at.padStart(6)}  ${e.type}  ${oneLine(what)}`);
}

/** The `--json` document (snake_case keys spelt here; each event's `data` kept in the trace's own spelling). */
function jsonDoc(r: DiagnosisReport, extra: Record<string, unknown>): unknown {
  return {
    ...extra,
    runs: r.runs,
    failed: r.failed,
    unexplained: r.unexplained,
    skipped: r.skipped,
    diagnoses: r.diagnoses.map((d) => ({
      skill: d.skill,
      pathology: d.pathology,
      title: d.title,
      points_at: d.points_at,
      where: d.where,
      count: d.count,
      runs: d.runs,
      evidence: d.evidence,
    })),
  };
}

function printDiagnosis(d: Diagnosis): void {
  out(`${style.bold(d.pathology)}  skill ${d.skill}  ${d.count} run${d.count === 1 ? "" : "s"}  ${style.dim(`(${d.title})`)}`);
  out(`  points at .agent/${d.points_at} (${d.where})`);
  for (const ev of d.evidence) {
    out(`  run ${ev.run}${ev.task !== ev.run ? ` ${style.dim(ev.task)}` : ""}`);
    for (const e of ev.events) out(`  ${evidenceLine(e)}`);
    if (ev.events.length === 0) out(style.dim("        (its outcome shows it; no trace event does)"));
  }
  if (d.count > d.evidence.length) out(style.dim(`  … and ${d.count - d.evidence.length} more run${d.count - d.evidence.length === 1 ? "" : "s"} (--json names them all)`));
}

function printReport(r: DiagnosisReport, from: string): void {
  const skipped = Object.entries(r.skipped);
  const skippedLine = skipped.length ? `; left out ${skipped.map(([s, n]) => `${n} ${s}`).join(", ")} (not the harness's failures)` : "";
  if (r.failed === 0) {
    out(`no failed runs in ${from} (${r.runs} run${r.runs === 1 ? "" : "s"}${skippedLine})`);
    return;
  }
  out(`${r.failed} failed run${r.failed === 1 ? "" : "s"} of ${r.runs} in ${from}: ${r.diagnoses.length} diagnos${r.diagnoses.length === 1 ? "is" : "es"}${skippedLine}`);
  for (const d of r.diagnoses) {
    out();
    printDiagnosis(d);
  }
  if (r.unexplained.length > 0) {
    out();
    out(style.dim(`${r.unexplained.length} failed run${r.unexplained.length === 1 ? "" : "s"} no pathology explains: ${r.unexplained.slice(0, 10).join(", ")}${r.unexplained.length > 10 ? ", …" : ""}`));
  }
}

/** `evolve harness diagnose`: a job's trials (`--job`) or the project's episodic memory (`--project`, default the working folder). */
export async function diagnoseCommand(opts: DiagnoseOpts): Promise<number> {
  if (opts.job !== undefined && opts.project !== undefined) throw new EvolveError("usage", "harness diagnose takes --job or --project, not both", "--job diagnoses a job's trials; --project a project's episodic memory");
  let report: DiagnosisReport;
  let from: string;
  let extra: Record<string, unknown>;
  if (opts.job !== undefined) {
    const job = opts.job;
    ({ report, from, extra } = await withStore((store, home) => {
      const id = jobFromArg(store, job).id;
      return { report: diagnoseReport(eachRunOfJob(store, home, id)), from: `job ${id}`, extra: { source: "job", job_id: id } };
    }));
  } else {
    const paths = projectPaths(resolve(opts.project ?? "."));
    const e = runsFromEpisodes(paths.agent);
    report = diagnoseReport(e.runs);
    from = agentPath(paths.agent, AGENT_PATHS.episodes);
    extra = { source: "episodes", agent_root: paths.agent, torn_lines: e.skipped, truncated: e.truncated };
    if (!opts.json && (e.skipped > 0 || e.truncated)) {
      out(style.dim(`${e.skipped ? `${e.skipped} unreadable line${e.skipped === 1 ? "" : "s"} skipped` : ""}${e.skipped && e.truncated ? "; " : ""}${e.truncated ? "only the newest episodes were read (the file is over ${MAX_EPISODE_BYTES >> 20} MiB)" : ""}`));
    }
  }
  if (opts.json) {
    process.stdout.write(JSON.stringify(jsonDoc(report, extra), null, isTTY(process.stdout) ? 2 : undefined) + "\n");
    return 0;
  }
  printReport(report, from);
  return 0;
}
