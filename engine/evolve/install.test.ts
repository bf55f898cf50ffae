/**
 * Install and undo (engine/evolve/install.ts): a confirmed candidate becomes the live `.agent/`, everything it
 * replaced is backed up first, and undo puts the tree back byte for byte, also after an install killed half-way.
 */
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildOverlay, scaffoldCandidate } from "./candidate.ts";
import { installCandidate, listInstalls, prepareInstall, undoInstall } from "./install.ts";
import { projectPaths } from "../eval/project.ts";
import { pairedStats } from "../eval/stats.ts";
import type { RoundRecord } from "./types.ts";
import { expectCode } from "../../tests/support/expect-code.ts";
import { makeProject, snapshot, writeTree } from "../../tests/support/evolve-project.ts";

let scratch: string;
let project: string;
let agent: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-install-"));
  project = makeProject(join(scratch, "proj"));
  agent = join(project, ".agent");
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

const base = { pathology: "plans too little", hypothesis: "a checklist makes it plan" };

/** A candidate that changes PLANNING.md, adds knowledge/new.md and a new folder, removes knowledge/b.md and hooks/. */
function candidate(parent = "live"): string {
  const d = scaffoldCandidate(project, { ...base, parent, where: "prompt", files: ["harness/PLANNING.md"] });
  const dir = projectPaths(project).candidate(d.id);
  writeTree(join(dir, "files"), {
    "harness/PLANNING.md": `# Plan\nMake a checklist (${d.id}).\n`,
    "knowledge/new.md": "gamma\n",
    "protocols/extra/grep.json": '{"name":"grep"}\n',
  });
  const desc = JSON.parse(readFileSync(join(dir, "descriptor.json"), "utf8"));
  writeFileSync(join(dir, "descriptor.json"), JSON.stringify({ ...desc, deleted: ["knowledge/b.md", "hooks"] }));
  return d.id;
}

/** Writes round `n`'s record confirming `confirmed`, with optional holdout results. */
function round(n: number, confirmed: string[], holdout?: Record<string, boolean>): void {
  const rec: RoundRecord = {
    round: n,
    stage: "done",
    candidates: confirmed,
    utility: {},
    confirmed,
    rejected: {},
    ...(holdout
      ? { holdout: { source: "cards-holdout", results: Object.fromEntries(Object.entries(holdout).map(([id, held]) => [id, { ...pairedStats([1, held ? 1 : 0], [0, 1]), held }])) } }
      : {}),
  };
  mkdirSync(projectPaths(project).round(n), { recursive: true });
  writeFileSync(join(projectPaths(project).round(n), "round.json"), JSON.stringify(rec));
}

describe("installCandidate and undoInstall", () => {
  it("backs up what it replaces, makes the live harness the overlay (memory/ kept), and undo restores the tree exactly", () => {
    const id = candidate();
    round(1, [id]);
    const before = snapshot(agent);
    const overlay = snapshot(buildOverlay(project, id, join(scratch, "ov")));

    const rec = installCandidate(project, id);
    expect(rec).toMatchObject({ candidate: id, confirmed_in_round: 1, forced: false, holdout_overridden: false, undone_at: null });
    expect(rec.completed_at).not.toBeNull();
    expect(rec.files).toEqual([
      { path: "harness/PLANNING.md", existed: true, action: "write" },
      { path: "hooks/pre_tool_call", existed: true, action: "remove" },
      { path: "knowledge/b.md", existed: true, action: "remove" },
      { path: "knowledge/new.md", existed: false, action: "write" },
      { path: "protocols/extra/grep.json", existed: false, action: "write" },
    ]);
    expect(rec.dirs_created).toEqual(["protocols/extra"]);
    expect(rec.dirs_removed).toEqual(["hooks"]);
    // the live harness is the overlay plus the episodes it had
    const after = snapshot(agent);
    expect(after).toEqual({ ...overlay, memory: "dir", "memory/episodes.jsonl": before["memory/episodes.jsonl"] });
    // the backup holds exactly the replaced and removed files, with their permissions
    const backup = join(projectPaths(project).backups, rec.backup);
    expect(snapshot(join(backup, "files"))).toEqual({
      harness: "dir",
      "harness/PLANNING.md": before["harness/PLANNING.md"],
      hooks: "dir",
      "hooks/pre_tool_call": before["hooks/pre_tool_call"],
      knowledge: "dir",
      "knowledge/b.md": before["knowledge/b.md"],
    });
    expect(JSON.parse(readFileSync(join(backup, "install.json"), "utf8"))).toEqual(rec);

    // an episode the live harness records after the install is not undone with it
    appendFileSync(join(agent, "memory/episodes.jsonl"), '{"episode":2}\n');
    const undone = undoInstall(project);
    expect(undone.backup).toBe(rec.backup);
    expect(undone.undone_at).not.toBeNull();
    expect(snapshot(agent)).toEqual({ ...before, "memory/episodes.jsonl": 'file 644 {"episode":1}\n{"episode":2}\n' });
    expect(listInstalls(project)[0].undone_at).toBe(undone.undone_at);
    const e = await_(() => undoInstall(project));
    expect(e).toMatch(/install_nothing_to_undo/);
  });

  it("undoes installs newest first", () => {
    const a = candidate();
    const b = candidate(a);
    round(1, [a]);
    round(2, [b]);
    const t0 = snapshot(agent);
    installCandidate(project, a);
    const t1 = snapshot(agent);
    installCandidate(project, b);
    expect(readFileSync(join(agent, "harness/PLANNING.md"), "utf8")).toContain(b);
    expect(listInstalls(project).map((r) => r.candidate)).toEqual([b, a]);
    expect(undoInstall(project).candidate).toBe(b);
    expect(snapshot(agent)).toEqual(t1);
    expect(undoInstall(project).candidate).toBe(a);
    expect(snapshot(agent)).toEqual(t0);
  });

  it("installs a child with its whole lineage, even when the parent was never installed", () => {
    const a = candidate();
    const b = scaffoldCandidate(project, { ...base, parent: a, where: "config" }).id;
    writeFileSync(join(projectPaths(project).candidate(b), "files/harness/config.json"), '{"max_turns": 10}\n');
    round(1, [b]);
    installCandidate(project, b);
    expect(readFileSync(join(agent, "harness/config.json"), "utf8")).toBe('{"max_turns": 10}\n');
    expect(readFileSync(join(agent, "harness/PLANNING.md"), "utf8")).toContain(a);
  });

  it("refuses a candidate no round confirmed unless forced", async () => {
    const id = candidate();
    const before = snapshot(agent);
    const e = await expectCode(() => installCandidate(project, id), "candidate_not_confirmed");
    expect(e.message).toBe(`candidate ${id} is confirmed in no round`);
    round(1, ["c-other"]);
    await expectCode(() => installCandidate(project, id), "candidate_not_confirmed");
    expect(snapshot(agent)).toEqual(before);
    expect(existsSync(projectPaths(project).backups)).toBe(false);
    expect(installCandidate(project, id, { force: true })).toMatchObject({ forced: true, confirmed_in_round: null });
    await expectCode(() => installCandidate(project, "c-nope", { force: true }), "candidate_unknown");
  });

  it("refuses a candidate whose gain did not hold on the holdout unless overridden", async () => {
    const id = candidate();
    round(1, [id], { [id]: false });
    const before = snapshot(agent);
    const e = await expectCode(() => installCandidate(project, id), "holdout_not_held");
    expect(e.message).toMatch(new RegExp(`^candidate ${id}'s gain did not hold on the holdout cards-holdout in round 1 \\(mean gain -?[0-9.]+, n = 2\\)$`));
    await expectCode(() => installCandidate(project, id, { force: true }), "holdout_not_held");
    expect(snapshot(agent)).toEqual(before);
    expect(installCandidate(project, id, { overrideHoldout: true }).holdout_overridden).toBe(true);
    // one that held is installed without a flag
    const other = candidate();
    round(2, [other], { [other]: true });
    expect(installCandidate(project, other).holdout_overridden).toBe(false);
  });

  it("refuses when a round record cannot be read", async () => {
    const id = candidate();
    mkdirSync(projectPaths(project).round(3), { recursive: true });
    writeFileSync(join(projectPaths(project).round(3), "round.json"), "{torn");
    await expectCode(() => installCandidate(project, id), "round_record_invalid");
  });

  it("undoes an install killed after its backup, before or while it wrote the live files", () => {
    const id = candidate();
    round(1, [id]);
    const before = snapshot(agent);
    // killed right after the backup: nothing live touched yet
    const p1 = prepareInstall(project, id);
    rmSync(p1.scratch, { recursive: true, force: true });
    expect(snapshot(agent)).toEqual(before);
    expect(p1.record.completed_at).toBeNull();
    expect(undoInstall(project).backup).toBe(p1.record.backup);
    expect(snapshot(agent)).toEqual(before);
    // killed half-way through the writes: one file written, one new folder made, one removal done
    const p2 = prepareInstall(project, id);
    writeFileSync(join(agent, "harness/PLANNING.md"), readFileSync(join(p2.overlay, "harness/PLANNING.md")));
    mkdirSync(join(agent, "protocols/extra"));
    writeFileSync(join(agent, "protocols/extra/grep.json"), "{");
    rmSync(join(agent, "knowledge/b.md"));
    rmSync(p2.scratch, { recursive: true, force: true });
    expect(snapshot(agent)).not.toEqual(before);
    undoInstall(project);
    expect(snapshot(agent)).toEqual(before);
    // a backup folder an install was still building (no install.json yet) is not something to undo
    mkdirSync(join(projectPaths(project).backups, ".20990101T000000000Z-0000/files"), { recursive: true });
    expect(await_(() => undoInstall(project))).toMatch(/install_nothing_to_undo/);
  });
});

/** The code of the EvolveError `f` throws (synchronously), or "" when it does not throw. */
function await_(f: () => unknown): string {
  try {
    f();
    return "";
  } catch (e) {
    return String((e as { code?: string }).code);
  }
}
