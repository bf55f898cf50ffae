/**
 * check_spec, the tree digest and the template (engine/metaharness): the rules that decide whether a folder is a
 * complete adapter, each with its stable one-line problem, and the digest that tells a stored candidate changed in
 * place (content or executable bit) or grown a link.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAX_AGENT_FILES } from "../conductor/layout.ts";
import { digestOrReason, digestTree } from "../eval/candidate-store.ts";
import { isCandidateName, runPaths, stepName, taskDirName, templatePaths } from "./layout.ts";
import { checkSpec, SPEC_RULES, templateHermit } from "./spec.ts";
import { TEMPLATE_EVOLVER_MD, TEMPLATE_FILES, writeTemplate } from "./template.ts";
import { expectCode } from "../../tests/support/expect-code.ts";
import { writeTree } from "../../tests/support/evolve-project.ts";

let scratch: string;
let template: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-mh-spec-"));
  template = join(scratch, "template");
  writeTemplate(template);
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

/** A valid adapter at `scratch/<name>` with `files` besides ADAPTER.md. */
function adapter(name: string, files: Record<string, string> = {}): string {
  const dir = join(scratch, name);
  writeTree(dir, { "ADAPTER.md": "Read notes/tips.md before you start.\n", "notes/tips.md": "check your answer\n", ...files });
  return dir;
}

describe("checkSpec", () => {
  it("passes a complete adapter, with or without the template's .hermit/", () => {
    expect(checkSpec(adapter("a"), { template })).toEqual({ ok: true, problems: [] });
    const b = adapter("b");
    writeTemplate(b);
    expect(checkSpec(b, { template })).toEqual({ ok: true, problems: [] });
  });

  it("rejects a folder that is a symbolic link, a missing one and a file, naming it", () => {
    const real = adapter("real");
    symlinkSync(real, join(scratch, "link"));
    expect(checkSpec(join(scratch, "link"), { name: "link" })).toEqual({ ok: false, problems: ["link: is a symbolic link, not a directory of its own"] });
    // a trailing slash does not make it the folder it points to
    expect(checkSpec(join(scratch, "link") + "//", { name: "link" }).ok).toBe(false);
    expect(digestOrReason(join(scratch, "link") + "/")).toEqual({ reason: `${join(scratch, "link")} is a symbolic link` });
    expect(checkSpec(join(scratch, "nope"), { name: "nope" }).problems).toEqual(["nope: does not exist"]);
    writeFileSync(join(scratch, "f"), "x");
    expect(checkSpec(join(scratch, "f")).problems).toEqual([`${join(scratch, "f")}: is not a directory`]);
  });

  it("names every link, FIFO and socket inside, at any depth", () => {
    const dir = adapter("a");
    symlinkSync("/etc/passwd", join(dir, "notes", "passwd"));
    mkdirSync(join(dir, "deep", "er"), { recursive: true });
    symlinkSync("/tmp", join(dir, "deep", "er", "out"));
    execFileSync("mkfifo", [join(dir, "pipe")]);
    expect(checkSpec(dir).problems).toEqual(["deep/er/out: is a symbolic link", "notes/passwd: is a symbolic link", "pipe: is a FIFO"]);
  });

  it("needs ADAPTER.md: a non-empty regular UTF-8 file", () => {
    const dir = adapter("a");
    rmSync(join(dir, "ADAPTER.md"));
    expect(checkSpec(dir).problems).toEqual(["ADAPTER.md: missing (the agent's instructions)"]);
    writeFileSync(join(dir, "ADAPTER.md"), "  \n");
    expect(checkSpec(dir).problems).toEqual(["ADAPTER.md: empty"]);
    writeFileSync(join(dir, "ADAPTER.md"), Buffer.from([0x68, 0xff, 0xfe, 0x69]));
    expect(checkSpec(dir).problems).toEqual(["ADAPTER.md: not UTF-8 text"]);
    rmSync(join(dir, "ADAPTER.md"));
    mkdirSync(join(dir, "ADAPTER.md"));
    expect(checkSpec(dir).problems).toEqual(["ADAPTER.md: not a regular file"]);
    rmSync(join(dir, "ADAPTER.md"), { recursive: true });
    symlinkSync(join(dir, "notes", "tips.md"), join(dir, "ADAPTER.md"));
    expect(checkSpec(dir).problems).toEqual(["ADAPTER.md: is a symbolic link"]);
  });

  it("refuses names with control characters, quoting them so the problem stays one line", () => {
    const dir = adapter("a", { "bad\nname.md": "x" });
    expect(checkSpec(dir).problems).toEqual(['"bad\\nname.md": name is not printable (control characters or not UTF-8)']);
  });

  it("holds a candidate to the agent folder's file limit", () => {
    const dir = adapter("a");
    mkdirSync(join(dir, "many"));
    for (let i = 0; i < MAX_AGENT_FILES; i++) writeFileSync(join(dir, "many", String(i)), "");
    expect(checkSpec(dir).problems).toEqual([`more than ${MAX_AGENT_FILES} files`]);
  });

  it("compares a present .hermit/ with the template's when one is given", () => {
    const dir = adapter("a");
    writeTemplate(dir);
    writeFileSync(join(dir, ".hermit", "EVOLVER.md"), "my own rules\n");
    writeFileSync(join(dir, ".hermit", "extra.md"), "x");
    rmSync(join(dir, ".hermit", "manifest.json"));
    expect(checkSpec(dir, { template }).problems).toEqual([
      ".hermit/EVOLVER.md: differs from the template's",
      ".hermit/manifest.json: missing (.hermit/ must be the template's, or left out)",
      ".hermit/extra.md: not in the template",
    ]);
    // no template given: a proposer's own check leaves .hermit/ alone (it is replaced anyway)
    expect(checkSpec(dir).ok).toBe(true);
  });

  it("refuses a template folder without .hermit/", async () => {
    const e = await expectCode(() => templateHermit(scratch), "metaharness_template_invalid");
    expect(e.message).toBe(`${scratch} holds no .hermit/ folder`);
  });
});

describe("digestTree", () => {
  it("changes with a file's content, its executable bit, an added file and a rename; not with timestamps", () => {
    const dir = adapter("a", { "run.sh": "echo hi\n" });
    const d0 = digestTree(dir);
    expect(d0).toMatch(/^sha256:[0-9a-f]{64}$/);
    writeFileSync(join(dir, "run.sh"), "echo hi\n");
    expect(digestTree(dir)).toBe(d0);
    chmodSync(join(dir, "run.sh"), 0o755);
    const dx = digestTree(dir);
    expect(dx).not.toBe(d0);
    chmodSync(join(dir, "run.sh"), 0o744);
    expect(digestTree(dir)).toBe(dx);
    chmodSync(join(dir, "run.sh"), 0o644);
    expect(digestTree(dir)).toBe(d0);
    writeFileSync(join(dir, "notes", "tips.md"), "check your answer!\n");
    expect(digestTree(dir)).not.toBe(d0);
    writeFileSync(join(dir, "notes", "tips.md"), "check your answer\n");
    writeFileSync(join(dir, "new.md"), "");
    expect(digestTree(dir)).not.toBe(d0);
    rmSync(join(dir, "new.md"));
    expect(digestTree(dir)).toBe(d0);
    // the same bytes under another name are another tree
    const b = adapter("b", { "run2.sh": "echo hi\n" });
    expect(digestTree(b)).not.toBe(d0);
  });

  it("never follows a link: one anywhere, or the folder itself, is a tamper reason", async () => {
    const dir = adapter("a");
    symlinkSync("/etc/hostname", join(dir, "notes", "host"));
    const e = await expectCode(() => digestTree(dir), "metaharness_candidate_tampered");
    expect(e.message).toBe(`${join(dir, "notes", "host")} is a symbolic link`);
    expect(digestOrReason(dir)).toEqual({ reason: `${join(dir, "notes", "host")} is a symbolic link` });
    symlinkSync(adapter("b"), join(scratch, "l"));
    expect(digestOrReason(join(scratch, "l"))).toEqual({ reason: `${join(scratch, "l")} is a symbolic link` });
    expect(digestOrReason(join(scratch, "gone"))).toEqual({ reason: `${join(scratch, "gone")} is missing` });
  });
});

describe("the template and the layout", () => {
  it("writes .hermit/manifest.json and the proposer's guide with the check_spec and hard rules", () => {
    const dir = join(scratch, "t2");
    expect(writeTemplate(dir)).toEqual([".hermit/manifest.json", ".hermit/EVOLVER.md"]);
    const tp = templatePaths(dir);
    expect(JSON.parse(readFileSync(tp.manifest, "utf8"))).toMatchObject({ name: "meta-harness-adapter", fixed: [".hermit/"] });
    expect(readFileSync(tp.evolver, "utf8")).toBe(TEMPLATE_FILES.get(".hermit/EVOLVER.md"));
    for (const rule of SPEC_RULES) expect(TEMPLATE_EVOLVER_MD).toContain(rule);
    for (const hard of ["no facts about individual search tasks", "Deliver all k", "Do not run the evaluation", "One mechanism per candidate", "ADAPTER.md` is the agent's instructions"]) {
      expect(TEMPLATE_EVOLVER_MD.replace(/\s+/g, " ")).toContain(hard);
    }
    expect(tp.seed).toBe(join(dir, "seed_adapter"));
  });

  it("names candidates, steps and tasks safely", () => {
    for (const ok of ["seed", "a", "c1.v2_x-y", "0".repeat(64)]) expect(isCandidateName(ok), ok).toBe(true);
    for (const bad of ["", ".", "..", ".hidden", "Upper", "a/b", "a b", "-x", "0".repeat(65), "é"]) expect(isCandidateName(bad), bad).toBe(false);
    expect(stepName(3)).toBe("step_0003");
    expect(stepName(12345)).toBe("step_12345");
    expect(taskDirName("acme/q-01")).toBe("acme__q-01");
    expect(taskDirName("..")).toBe("_..");
    const p = runPaths("/r");
    expect(p.stepTask(1, "acme/q").trajectory).toBe("/r/step_0001/tasks/acme__q/trajectory.json");
    expect(p.stepOutput(2).proposerSession).toBe("/r/step_0002/output/proposer-session.jsonl");
    expect(p.candidateAdapter("c1")).toBe("/r/workspace/state/candidates/c1/adapter");
    expect([p.stateFile, p.summary, p.scratchCandidates, p.runJson]).toEqual([
      "/r/workspace/state/meta_harness_adapter.json",
      "/r/workspace/state/evolution_summary.jsonl",
      "/r/workspace/scratch/candidates",
      "/r/run.json",
    ]);
  });
});
