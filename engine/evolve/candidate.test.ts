/**
 * Candidates and overlays (engine/evolve/candidate.ts): what `scaffold` writes for a person to edit, the harness a
 * two-level lineage builds, and the refusals that keep a candidate from reading or writing outside the project.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { WHERE_FILES, buildOverlay, lineage, listCandidates, readCandidate, scaffoldCandidate } from "./candidate.ts";
import { projectPaths } from "../eval/project.ts";
import { expectCode } from "../../tests/support/expect-code.ts";
import { makeProject, snapshot, writeTree } from "../../tests/support/evolve-project.ts";

let scratch: string;
let project: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-candidate-"));
  project = makeProject(join(scratch, "proj"));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

const base = { pathology: "plans too little", hypothesis: "a checklist makes it plan" };

describe("scaffoldCandidate", () => {
  it("writes a descriptor and copies of the files its kind edits, taken from the live harness", () => {
    const d = scaffoldCandidate(project, { ...base, where: "prompt", marker: "CHECKLIST-7" });
    expect(d.id).toMatch(/^c-\d{17}-[0-9a-f]{4}$/);
    expect(d).toMatchObject({ parent: "live", where: "prompt", ...base, activation: { marker: "CHECKLIST-7" } });
    const dir = projectPaths(project).candidate(d.id);
    expect(JSON.parse(readFileSync(join(dir, "descriptor.json"), "utf8"))).toEqual(d);
    expect(snapshot(join(dir, "files"))).toEqual({ harness: "dir", "harness/PLANNING.md": "file 644 # Plan\nThink first.\n" });
    expect(readCandidate(project, d.id)).toEqual({ descriptor: d, filesDir: join(dir, "files") });

    const rt = scaffoldCandidate(project, { ...base, where: "runtime" });
    expect(rt.activation.marker).toBeNull();
    const files = snapshot(join(projectPaths(project).candidate(rt.id), "files"));
    expect(Object.keys(files)).toEqual(["harness", "harness/seats.json", "hooks", "hooks/pre_tool_call", "protocols", "protocols/tool_schemas", "protocols/tool_schemas/shell.json"]);
    expect(files["hooks/pre_tool_call"]).toMatch(/^file 755 /); // the hook stays executable
    expect(WHERE_FILES.knowledge).toEqual(["knowledge"]);
    expect(listCandidates(project).map((c) => c.id)).toEqual([d.id, rt.id].sort());
  });

  it("copies from a parent candidate's harness, and makes only the folder of a file the parent lacks", () => {
    rmSync(join(project, ".agent/harness/PLANNING.md"));
    const p = scaffoldCandidate(project, { ...base, where: "prompt" });
    const pFiles = join(projectPaths(project).candidate(p.id), "files");
    expect(snapshot(pFiles)).toEqual({ harness: "dir" }); // an empty PLANNING.md would replace the built-in frame
    writeFileSync(join(pFiles, "harness/PLANNING.md"), "parent plan\n");
    const c = scaffoldCandidate(project, { ...base, parent: p.id, where: "prompt", files: ["harness/PLANNING.md", "knowledge/"] });
    const cFiles = join(projectPaths(project).candidate(c.id), "files");
    expect(readFileSync(join(cFiles, "harness/PLANNING.md"), "utf8")).toBe("parent plan\n");
    expect(readFileSync(join(cFiles, "knowledge/a.md"), "utf8")).toBe("alpha\n");
    expect(lineage(project, c.id)).toEqual(["live", p.id, c.id]);
    expect(lineage(project, "live")).toEqual(["live"]);
  });

  it("refuses a bad where, an unknown parent, empty fields and paths out of .agent/ or into memory/, leaving nothing behind", async () => {
    await expectCode(() => scaffoldCandidate(project, { ...base, where: "planning" }), "candidate_where_invalid");
    await expectCode(() => scaffoldCandidate(project, { ...base, where: "prompt", parent: "c-nope" }), "candidate_unknown");
    await expectCode(() => scaffoldCandidate(project, { ...base, where: "prompt", parent: "../x" }), "candidate_unknown");
    await expectCode(() => scaffoldCandidate(project, { ...base, where: "prompt", hypothesis: "  " }), "candidate_field_empty");
    for (const f of ["../outside.txt", "/etc/passwd", "harness/../../x", "", "memory/episodes.jsonl"]) {
      const e = await expectCode(() => scaffoldCandidate(project, { ...base, where: "prompt", files: [f] }), "candidate_path_invalid");
      expect(e.message.split("\n")).toHaveLength(1);
    }
    await expectCode(() => scaffoldCandidate(join(scratch, "empty"), { ...base, where: "prompt" }), "agent_dir_missing");
    expect(existsSync(projectPaths(project).candidates) ? listCandidates(project) : []).toEqual([]);
  });

  it("refuses a link in the live harness, and removes its half-made candidate", async () => {
    symlinkSync("/etc/passwd", join(project, ".agent/knowledge/c.md"));
    const e = await expectCode(() => scaffoldCandidate(project, { ...base, where: "knowledge" }), "agent_dir_unsafe");
    expect(e.message).toContain("knowledge/c.md is a symbolic link");
    expect(listCandidates(project)).toEqual([]);
    expect(snapshot(projectPaths(project).candidates)).toEqual({});
  });
});

describe("readCandidate", () => {
  it("names a missing or malformed descriptor in one line", async () => {
    await expectCode(() => readCandidate(project, "c-missing"), "candidate_unknown");
    await expectCode(() => readCandidate(project, "../../etc"), "candidate_unknown");
    await expectCode(() => readCandidate(project, "live"), "candidate_unknown");
    const dir = projectPaths(project).candidate("c-hand");
    mkdirSync(dir, { recursive: true });
    await expectCode(() => readCandidate(project, "c-hand"), "candidate_invalid");
    writeFileSync(join(dir, "descriptor.json"), "{not json");
    const e1 = await expectCode(() => readCandidate(project, "c-hand"), "candidate_invalid");
    expect(e1.message).toMatch(/^candidate c-hand: descriptor.json cannot be read as JSON/);
    const good = { id: "c-hand", parent: "live", where: "prompt", ...base, activation: { marker: null }, created_at: "2026-01-01T00:00:00Z" };
    for (const [bad, why] of [
      [{ ...good, where: "soul" }, "has where"],
      [{ ...good, id: "c-other" }, "has id"],
      [{ ...good, parent: "c-hand" }, "is its own parent"],
      [{ ...good, deleted: ["../x"] }, "has deleted"],
      [{ ...good, activation: {} }, "activation.marker"],
    ] as const) {
      writeFileSync(join(dir, "descriptor.json"), JSON.stringify(bad));
      const e = await expectCode(() => readCandidate(project, "c-hand"), "candidate_invalid");
      expect(e.message).toContain(why);
      expect(e.message.includes("\n")).toBe(false);
    }
    writeFileSync(join(dir, "descriptor.json"), JSON.stringify(good));
    expect(readCandidate(project, "c-hand").descriptor).toEqual(good);
  });

  it("refuses a lineage that loops", async () => {
    const write = (id: string, parent: string) => {
      mkdirSync(projectPaths(project).candidate(id), { recursive: true });
      writeFileSync(join(projectPaths(project).candidate(id), "descriptor.json"), JSON.stringify({ id, parent, where: "prompt", ...base, activation: { marker: null }, created_at: "x" }));
    };
    write("c-a", "c-b");
    write("c-b", "c-a");
    const e = await expectCode(() => lineage(project, "c-a"), "candidate_invalid");
    expect(e.message).toContain("loops");
    await expectCode(() => buildOverlay(project, "c-a", join(scratch, "o")), "candidate_invalid");
  });
});

describe("buildOverlay", () => {
  it("lays a two-level lineage over a fresh copy of the live harness, without memory/", () => {
    const p = scaffoldCandidate(project, { ...base, where: "knowledge" });
    const pFiles = join(projectPaths(project).candidate(p.id), "files");
    writeFileSync(join(pFiles, "knowledge/a.md"), "alpha from parent\n");
    writeFileSync(join(pFiles, "knowledge/new.md"), "new from parent\n");
    const c = scaffoldCandidate(project, { ...base, parent: p.id, where: "prompt", files: ["harness/PLANNING.md", "knowledge/new.md"] });
    const cDir = projectPaths(project).candidate(c.id);
    expect(readFileSync(join(cDir, "files/knowledge/new.md"), "utf8")).toBe("new from parent\n");
    writeFileSync(join(cDir, "files/harness/PLANNING.md"), "child plan\n");
    writeFileSync(join(cDir, "files/knowledge/new.md"), "new from child\n");
    // the child also deletes a knowledge file its lineage kept
    const desc = JSON.parse(readFileSync(join(cDir, "descriptor.json"), "utf8"));
    writeFileSync(join(cDir, "descriptor.json"), JSON.stringify({ ...desc, deleted: ["knowledge/b.md"] }));

    const before = snapshot(join(project, ".agent"));
    const out = buildOverlay(project, c.id, join(scratch, "ov"));
    expect(out).toBe(join(scratch, "ov", ".agent"));
    expect(snapshot(out)).toEqual({
      harness: "dir",
      "harness/PLANNING.md": "file 644 child plan\n",
      "harness/config.json": 'file 644 {"max_turns": 30}\n',
      "harness/seats.json": "file 644 {}\n",
      hooks: "dir",
      "hooks/pre_tool_call": "file 755 #!/bin/sh\nexit 0\n",
      knowledge: "dir",
      "knowledge/a.md": "file 644 alpha from parent\n",
      "knowledge/new.md": "file 644 new from child\n",
      protocols: "dir",
      "protocols/tool_schemas": "dir",
      "protocols/tool_schemas/shell.json": 'file 644 {"name":"shell"}\n',
    });
    // the parent's overlay alone, and the live harness untouched
    expect(snapshot(buildOverlay(project, p.id, join(scratch, "ov-p")))["knowledge/b.md"]).toBe("file 644 beta\n");
    expect(snapshot(join(project, ".agent"))).toEqual(before);
    // built again at the same place: fresh, not merged with the last build
    writeFileSync(join(out, "stray.txt"), "x");
    expect(snapshot(buildOverlay(project, "live", join(scratch, "ov")))).toEqual(
      Object.fromEntries(Object.entries(before).filter(([k]) => !k.startsWith("memory"))),
    );
  });

  it("refuses a link, a FIFO or a memory/ folder in a candidate's files", async () => {
    const c = scaffoldCandidate(project, { ...base, where: "knowledge" });
    const files = join(projectPaths(project).candidate(c.id), "files");
    symlinkSync("/etc/passwd", join(files, "knowledge/leak.md"));
    const e = await expectCode(() => buildOverlay(project, c.id, join(scratch, "o1")), "agent_dir_unsafe");
    expect(e.message).toContain("leak.md is a symbolic link");
    rmSync(join(files, "knowledge/leak.md"));
    execFileSync("mkfifo", [join(files, "knowledge/pipe.md")]);
    const e2 = await expectCode(() => buildOverlay(project, c.id, join(scratch, "o2")), "agent_dir_unsafe");
    expect(e2.message).toContain("pipe.md is a FIFO");
    rmSync(join(files, "knowledge/pipe.md"));
    // a link to a folder: its files are not read through it
    symlinkSync("/etc", join(files, "etc"));
    await expectCode(() => buildOverlay(project, c.id, join(scratch, "o3")), "agent_dir_unsafe");
    rmSync(join(files, "etc"));
    writeTree(files, { "memory/episodes.jsonl": "{}\n" });
    await expectCode(() => buildOverlay(project, c.id, join(scratch, "o4")), "candidate_invalid");
    rmSync(join(files, "memory"), { recursive: true });
    expect(statSync(buildOverlay(project, c.id, join(scratch, "o5"))).isDirectory()).toBe(true);
  });

  it("refuses a live .agent/ that is itself a link", async () => {
    const real = join(scratch, "real-agent");
    execFileSync("mv", [join(project, ".agent"), real]);
    symlinkSync(real, join(project, ".agent"));
    await expectCode(() => buildOverlay(project, "live", join(scratch, "o")), "agent_dir_unsafe");
  });
});
