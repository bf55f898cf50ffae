/**
 * The gene bank (engine/evolve/genebank.ts): who holds a (where, pathology) cell, and that the file is only ever
 * appended to, a torn last line costing only that line.
 */
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { geneBankCells, offerToGeneBank, readGeneBank, readGeneBankLines } from "./genebank.ts";
import { projectPaths } from "../eval/project.ts";
import type { GeneBankEntry } from "./types.ts";
import { expectCode } from "../../tests/support/expect-code.ts";
import { makeProject } from "../../tests/support/evolve-project.ts";

let scratch: string;
let project: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-genebank-"));
  project = makeProject(join(scratch, "proj"));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

const entry = (harness_id: string, utility: number, o: Partial<GeneBankEntry> = {}): GeneBankEntry => ({
  where: "prompt",
  pathology: "plans too little",
  harness_id,
  utility,
  lineage: ["live", harness_id],
  round: 1,
  at: "2026-12-02T00:00:00.000Z",
  ...o,
});

describe("offerToGeneBank", () => {
  it("makes the first entry of a cell its holder, lets a higher utility win, and keeps the incumbent on a tie or a loss", () => {
    const first = offerToGeneBank(project, entry("c-a", 0.5));
    expect(first).toEqual({ accepted: true, reason: 'c-a (utility 0.5) is the first holder of cell (prompt, "plans too little")' });
    const tie = offerToGeneBank(project, entry("c-b", 0.5));
    expect(tie.accepted).toBe(false);
    expect(tie.incumbent?.harness_id).toBe("c-a");
    expect(tie.reason).toBe('c-b (utility 0.5) ties c-a (utility 0.5), which keeps cell (prompt, "plans too little")');
    const lower = offerToGeneBank(project, entry("c-c", 0.25));
    expect([lower.accepted, lower.reason]).toEqual([false, 'c-c (utility 0.25) is below c-a (utility 0.5), which keeps cell (prompt, "plans too little")']);
    const higher = offerToGeneBank(project, entry("c-d", 0.75, { round: 2 }));
    expect([higher.accepted, higher.incumbent?.harness_id]).toEqual([true, "c-a"]);
    // only the winners were written, one line each, in order
    const lines = readFileSync(projectPaths(project).genebank, "utf8").split("\n");
    expect(lines.map((l) => (l ? JSON.parse(l).harness_id : l))).toEqual(["c-a", "c-d", ""]);
    expect(geneBankCells(readGeneBank(project)).map((e) => e.harness_id)).toEqual(["c-d"]);
  });

  it("keeps cells independent", () => {
    offerToGeneBank(project, entry("c-a", 0.9));
    expect(offerToGeneBank(project, entry("c-b", 0.1, { pathology: "forgets the tests" })).accepted).toBe(true);
    expect(offerToGeneBank(project, entry("c-c", 0.2, { where: "knowledge" })).accepted).toBe(true);
    expect(offerToGeneBank(project, entry("c-d", 0.3, { where: "knowledge" })).accepted).toBe(true);
    expect(geneBankCells(readGeneBank(project)).map((e) => [e.where, e.pathology, e.harness_id])).toEqual([
      ["prompt", "forgets the tests", "c-b"],
      ["prompt", "plans too little", "c-a"],
      ["knowledge", "plans too little", "c-d"],
    ]);
  });

  it("refuses an entry that is not one", async () => {
    await expectCode(() => offerToGeneBank(project, entry("c-a", 1.5)), "genebank_entry_invalid");
    await expectCode(() => offerToGeneBank(project, { ...entry("c-a", 0.5), where: "soul" as never }), "genebank_entry_invalid");
    expect(readGeneBank(project)).toEqual([]);
  });
});

describe("a torn gene bank", () => {
  it("skips a torn last line, counts it, and appends the next entry on a line of its own", () => {
    offerToGeneBank(project, entry("c-a", 0.5));
    appendFileSync(projectPaths(project).genebank, '{"where":"prompt","pathology":"plans too lit');
    expect(readGeneBankLines(project)).toEqual({ entries: [entry("c-a", 0.5)], skipped: 1 });
    expect(offerToGeneBank(project, entry("c-b", 0.6)).accepted).toBe(true);
    const { entries, skipped } = readGeneBankLines(project);
    expect([entries.map((e) => e.harness_id), skipped]).toEqual([["c-a", "c-b"], 1]);
    expect(geneBankCells(entries).map((e) => e.harness_id)).toEqual(["c-b"]);
  });

  it("lets a line appended by hand take a cell only by winning it", () => {
    offerToGeneBank(project, entry("c-a", 0.5));
    appendFileSync(projectPaths(project).genebank, `${JSON.stringify(entry("c-hand", 0.4))}\n`);
    expect(geneBankCells(readGeneBank(project)).map((e) => e.harness_id)).toEqual(["c-a"]);
    expect(readGeneBank(join(scratch, "none"))).toEqual([]);
  });
});
