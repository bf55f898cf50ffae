/**
 * The evolver's records as `harness screen|round|genebank show --json` print them and the local API (engine/serve)
 * answers them: one function per document, so both are the same.
 */
import { geneBankCells, readGeneBankLines } from "./genebank.ts";
import { roundToJson, type RoundsResult } from "./round.ts";
import { parentCost, screenToJson } from "./screen.ts";
import type { ScreenRecord } from "./types.ts";

/** A screen record as written, with each parent's cost. */
export function screenDocument(project: string, rec: ScreenRecord): Record<string, unknown> {
  return { ...(screenToJson(rec) as Record<string, unknown>), parents: parentCost(project, rec) };
}

/** `harness round --json`: the plan of a dry run, or the rounds run with the screens they made. */
export function roundsResultDocument(r: RoundsResult, project: string): Record<string, unknown> {
  const rounds = r.rounds.map(roundToJson);
  const screens = Object.fromEntries(Object.values(r.screens).map((s) => [s.id, screenDocument(project, s)]));
  return r.plan ? { dry_run: true, plan: r.plan } : { dry_run: false, stop: r.stop, rounds, screens };
}

/** `harness genebank show --json`: the holder of each cell, and how many lines were read and skipped. */
export function geneBankDocument(project: string) {
  const { entries, skipped } = readGeneBankLines(project);
  return { cells: geneBankCells(entries), entries: entries.length, skipped_lines: skipped };
}
