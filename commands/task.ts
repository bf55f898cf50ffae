/**
 * `evolve task validate` and `evolve task init`: argument handling and printing only.
 */
import { existsSync } from "node:fs";
import { basename } from "node:path";
import { loadConfig } from "../engine/config.ts";
import { type Finding, scaffoldTask, type TaskReport, validateTasks } from "../engine/task/mod.ts";
import { EvolveError } from "../engine/errors.ts";
import { out, outJson, reportError, style } from "./output.ts";

/** Counts findings by severity across reports. */
function tally(reports: TaskReport[]) {
  const t = { tasks: reports.length, ok: 0, refused: 0, errors: 0, warnings: 0, notes: 0 };
  for (const r of reports) {
    r.ok ? t.ok++ : t.refused++;
    for (const f of r.findings) {
      if (f.severity === "error") t.errors++;
      else if (f.severity === "warning") t.warnings++;
      else t.notes++;
    }
  }
  return t;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

function printFinding(f: Finding): void {
  const sev =
    f.severity === "error" ? style.red("error  ") : f.severity === "warning" ? style.yellow("warning") : style.blue("note   ");
  const where = f.line ? `${f.file}:${f.line}` : f.file;
  out(`  ${sev} ${style.bold(f.code)}  ${style.dim(where)}  ${f.message}`);
  if (f.hint) out(`          ${style.dim(`hint: ${f.hint}`)}`);
}

/** Prints validation reports grouped by task, as `task validate` and `dataset publish` show them. */
export function printReports(reports: TaskReport[], opts: { onlyProblems?: boolean } = {}): void {
  for (const r of reports) {
    if (opts.onlyProblems && r.ok && r.findings.length === 0) continue;
    const shown = r.dir; // as the user typed it
    const label = r.name && r.name !== basename(r.dir) ? `${shown} ${style.dim(`(${r.name})`)}` : shown;
    out(`${r.ok ? style.green("✓") : style.red("✗")} ${label}`);
    const order = { error: 0, warning: 1, note: 2 } as const;
    for (const f of [...r.findings].sort((a, b) => order[a.severity] - order[b.severity])) printFinding(f);
  }
}

/** `evolve task validate <dir>…` */
export async function validateCommand(
  dirs: string[],
  opts: { json?: boolean; secret: string[]; strict?: boolean },
): Promise<number> {
  const config = loadConfig();
  const reports = await validateTasks(dirs, { ceilings: config.ceilings, secrets: new Set(opts.secret) });
  const t = tally(reports);
  const strictFailed = opts.strict === true && t.warnings > 0;
  const failed = t.refused > 0 || strictFailed;
  if (opts.json) {
    outJson({ ok: !failed, summary: t, tasks: reports });
  } else {
    printReports(reports);
    const parts = [plural(t.tasks, "task"), `${t.ok} ok`, `${t.refused} refused`];
    const counts = [plural(t.errors, "error"), plural(t.warnings, "warning"), plural(t.notes, "note")].join(", ");
    out(`\n${parts.join(", ")} (${counts})`);
    // "1 ok" and exit 1 would contradict each other without this line
    if (strictFailed) {
      const warned = reports.filter((r) => r.findings.some((f) => f.severity === "warning")).length;
      out(style.red(`failed under --strict: warnings count as failures (${plural(t.warnings, "warning")} in ${plural(warned, "task")})`));
    }
  }
  // a path that does not exist is a mistake on the command line (exit 2), not a task found wanting; a file where a
  // task folder should be stays a refused task (not_a_directory, exit 1)
  const missing = reports.filter((r) => r.findings.some((f) => f.code === "not_a_directory") && !existsSync(r.dir)).map((r) => r.dir);
  if (missing.length > 0) {
    return reportError(new EvolveError("usage", `${missing.join(", ")}: no such directory`, "pass the path of a task directory (the folder holding task.toml)"));
  }
  return failed ? 1 : 0;
}

/** `evolve task init <dir>` */
export async function initCommand(dir: string, opts: { steps?: number; name?: string }): Promise<number> {
  const written = await scaffoldTask(dir, { steps: opts.steps, name: opts.name });
  out(`${style.green("created")} ${dir} ${style.dim(`(${written.length} files)`)}`);
  for (const f of written) out(`  ${f}`);
  out(`\nnext: edit ${dir}/instruction.md${opts.steps ? " (per step)" : ""}, then \`evolve task validate ${dir}\``);
  return 0;
}
