/**
 * The gene bank (`evolve/genebank.jsonl`): one confirmed harness per (where, pathology) cell, with its lineage. The
 * file is append-only, one {@link GeneBankEntry} a line, and a line is appended only when its harness beats the
 * cell's holder, so the newest entry of a cell is its holder and the file is the cell's whole history. A crash can
 * cut only the last line short (each append is one write of a whole line); readers skip such a line.
 */
import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, readSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { EvolveError, diskFullError } from "../errors.ts";
import { projectPaths } from "../eval/project.ts";
import { type GeneBankEntry, WHERE } from "./types.ts";

/** One line on what is wrong with `e` as a gene bank entry, or null when it is one. */
function entryProblem(e: unknown): string | null {
  const o = e as Record<string, unknown>;
  if (!o || typeof o !== "object" || Array.isArray(o)) return "is not an object";
  if (!(WHERE as readonly unknown[]).includes(o.where)) return `has where ${JSON.stringify(o.where)}, not one of ${WHERE.join(", ")}`;
  if (typeof o.pathology !== "string" || !o.pathology.trim()) return "has no pathology";
  if (typeof o.harness_id !== "string" || !o.harness_id) return "has no harness_id";
  if (typeof o.utility !== "number" || !Number.isFinite(o.utility) || o.utility < 0 || o.utility > 1) return `has utility ${JSON.stringify(o.utility)}, not a number from 0 to 1`;
  if (!Array.isArray(o.lineage) || !o.lineage.every((x) => typeof x === "string")) return "has no lineage (a list of harness ids)";
  if (typeof o.round !== "number" || !Number.isInteger(o.round) || o.round < 0) return "has no round number";
  if (typeof o.at !== "string") return "has no at";
  return null;
}

/** The gene bank's entries in file order, and how many lines were skipped (a torn last line, or a line that is no entry). */
export function readGeneBankLines(project: string): { entries: GeneBankEntry[]; skipped: number } {
  let text: string;
  try {
    text = readFileSync(projectPaths(project).genebank, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { entries: [], skipped: 0 };
    throw e;
  }
  const entries: GeneBankEntry[] = [];
  let skipped = 0;
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const e = JSON.parse(line);
      if (entryProblem(e) === null) {
        entries.push(e);
        continue;
      }
    } catch {
      // a torn last line: the crash that cut it lost only that offer
    }
    skipped++;
  }
  return { entries, skipped };
}

/** Every entry of the gene bank in file order; {@link readGeneBankLines} also says how many lines it skipped. */
export function readGeneBank(project: string): GeneBankEntry[] {
  return readGeneBankLines(project).entries;
}

/** The key of an entry's cell. */
function cellKey(e: Pick<GeneBankEntry, "where" | "pathology">): string {
  return JSON.stringify([e.where, e.pathology]);
}

/**
 * The holder of each (where, pathology) cell, sorted by where then pathology: a later entry replaces the holder
 * only by a higher utility (a tie keeps the incumbent), whatever was appended by hand.
 */
export function geneBankCells(entries: readonly GeneBankEntry[]): GeneBankEntry[] {
  const cells = new Map<string, GeneBankEntry>();
  for (const e of entries) {
    const inc = cells.get(cellKey(e));
    if (!inc || e.utility > inc.utility) cells.set(cellKey(e), e);
  }
  return [...cells.values()].sort((a, b) => (a.where === b.where ? (a.pathology < b.pathology ? -1 : a.pathology > b.pathology ? 1 : 0) : WHERE.indexOf(a.where) - WHERE.indexOf(b.where)));
}

/**
 * Offers `entry` to its cell. The competitors are the cell's holder and the entry: the higher utility wins and a tie
 * keeps the holder. Accepted → the entry is appended as one line (one write, O_APPEND; the file is never rewritten).
 * `reason` is one line for people.
 */
export function offerToGeneBank(project: string, entry: GeneBankEntry): { accepted: boolean; incumbent?: GeneBankEntry; reason: string } {
  const problem = entryProblem(entry);
  if (problem) throw new EvolveError("genebank_entry_invalid", `gene bank entry for ${JSON.stringify(entry?.harness_id)} ${problem}`);
  const incumbent = geneBankCells(readGeneBank(project)).find((e) => cellKey(e) === cellKey(entry));
  const cell = `(${entry.where}, ${JSON.stringify(entry.pathology)})`;
  if (incumbent && !(entry.utility > incumbent.utility)) {
    const how = entry.utility === incumbent.utility ? "ties" : "is below";
    return { accepted: false, incumbent, reason: `${entry.harness_id} (utility ${entry.utility}) ${how} ${incumbent.harness_id} (utility ${incumbent.utility}), which keeps cell ${cell}` };
  }
  appendLine(projectPaths(project).genebank, `${JSON.stringify(entry)}\n`);
  return incumbent
    ? { accepted: true, incumbent, reason: `${entry.harness_id} (utility ${entry.utility}) beats ${incumbent.harness_id} (utility ${incumbent.utility}) in cell ${cell}` }
    : { accepted: true, reason: `${entry.harness_id} (utility ${entry.utility}) is the first holder of cell ${cell}` };
}

/** Appends `line` to `path` in one write; after a torn last line it starts on a fresh line, so the torn one stays alone. */
function appendLine(path: string, line: string): void {
  mkdirSync(dirname(path), { recursive: true });
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW, 0o644);
  } catch (e) {
    throw diskFullError(e, path);
  }
  try {
    const size = fstatSync(fd).size;
    let text = line;
    if (size > 0) {
      const last = Buffer.alloc(1);
      readSync(fd, last, 0, 1, size - 1);
      if (last[0] !== 0x0a) text = `\n${line}`;
    }
    const buf = Buffer.from(text);
    const n = writeSync(fd, buf);
    if (n !== buf.length) throw new Error(`short write to ${path} (${n} of ${buf.length} bytes)`);
  } catch (e) {
    throw diskFullError(e, path);
  } finally {
    closeSync(fd);
  }
}
