/**
 * The candidate store both search strategies share (engine/eval/candidate-store.ts): the digest a stored candidate is
 * checked against (pinned, so a refactor of the walk cannot quietly make every stored Meta-Harness candidate look
 * tampered), the id rule each strategy spells its ids with, and the overlay both build candidate trees with.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAX_AGENT_BYTES } from "../engine/conductor/layout.ts";
import { digestOrReason, digestTree, idPattern, layTrees } from "../engine/eval/candidate-store.ts";
import { isCandidateId } from "../engine/evolve/candidate.ts";
import { CANDIDATE_NAME, isCandidateName } from "../engine/metaharness/layout.ts";
import { expectCode } from "./support/expect-code.ts";
import { writeTree } from "./support/evolve-project.ts";

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-store-"));
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

describe("digestTree", () => {
  it("gives a stored tree the digest it has always had", () => {
    const d = join(scratch, "adapter");
    writeTree(d, { "ADAPTER.md": "# adapter\n", "a/b": "b\n", "a/deep/z.txt": "", "a-c": "a-c\n", "run.sh": "#!/bin/sh\necho hi\n", "é.md": "accent\n" });
    mkdirSync(join(d, "empty"));
    chmodSync(join(d, "run.sh"), 0o755);
    // computed by engine/metaharness/digest.ts before the store existed: `a-c` sorts before `a/b` over whole paths
    expect(digestTree(d)).toBe("sha256:f19c2f9bd51b10b62f4d9d0a6b600e61a710aadaae7ef74caf813c619226957d");
    expect(digestTree(`${d}/`)).toBe(digestTree(d));
  });

  it("calls a link, a special file or a missing folder tampering, with the path", () => {
    const d = join(scratch, "adapter");
    writeTree(d, { "ADAPTER.md": "x\n" });
    expect(digestOrReason(join(scratch, "none"))).toEqual({ reason: `${join(scratch, "none")} is missing` });
    expect(digestOrReason(join(d, "ADAPTER.md"))).toEqual({ reason: `${join(d, "ADAPTER.md")} is a file, not a folder` });
    mkdirSync(join(d, "sub"));
    symlinkSync("/etc/passwd", join(d, "sub", "pw"));
    expect(digestOrReason(d)).toEqual({ reason: `${join(d, "sub", "pw")} is a symbolic link` });
  });
});

describe("ids", () => {
  it("is one rule spelt per strategy: the patterns each had before", () => {
    expect(idPattern({ lowercase: true, max: 64 }).source).toBe("^[a-z0-9][a-z0-9._-]{0,63}$");
    expect(CANDIDATE_NAME.source).toBe("^[a-z0-9][a-z0-9._-]{0,63}$");
    expect(idPattern({ lowercase: false, max: 100 }).source).toBe("^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$");
  });

  it("never lets an id be more than one path segment, in either strategy", () => {
    for (const bad of ["", ".", "..", "../x", "a/b", "-a", ".hidden", "a b", "a\0"]) {
      expect(isCandidateId(bad), bad).toBe(false);
      expect(isCandidateName(bad), bad).toBe(false);
    }
    expect(isCandidateId("c-20260101000000000-ab12")).toBe(true);
    expect(isCandidateId("Live2")).toBe(true);
    expect(isCandidateId("live")).toBe(false);
    expect(isCandidateId("x".repeat(100))).toBe(true);
    expect(isCandidateId("x".repeat(101))).toBe(false);
    expect(isCandidateName("cand-1.v2_b")).toBe(true);
    expect(isCandidateName("Cand")).toBe(false);
    expect(isCandidateName("x".repeat(64))).toBe(true);
    expect(isCandidateName("x".repeat(65))).toBe(false);
  });
});

describe("layTrees", () => {
  it("lays each layer over the last: skipped entries stay out, removals go first, a layer can go into a folder", () => {
    writeTree(join(scratch, "base"), { "keep.md": "base\n", "old.md": "old\n", "memory/ep.jsonl": "{}\n", "dir/a.md": "a\n" });
    chmodSync(join(scratch, "base", "keep.md"), 0o750);
    writeTree(join(scratch, "over"), { "keep.md": "over\n", "dir/b.md": "b\n" });
    writeTree(join(scratch, "hermit"), { "manifest.json": "{}\n" });
    const dest = join(scratch, "dest");
    layTrees(dest, [
      { from: join(scratch, "base"), skip: ["memory"] },
      { from: join(scratch, "over"), remove: ["old.md"] },
      { from: join(scratch, "hermit"), at: ".hermit" },
      { from: join(scratch, "missing") },
    ]);
    expect(readFileSync(join(dest, "keep.md"), "utf8")).toBe("over\n");
    expect(existsSync(join(dest, "old.md"))).toBe(false);
    expect(existsSync(join(dest, "memory"))).toBe(false);
    expect(readFileSync(join(dest, "dir", "a.md"), "utf8")).toBe("a\n");
    expect(readFileSync(join(dest, "dir", "b.md"), "utf8")).toBe("b\n");
    expect(readFileSync(join(dest, ".hermit", "manifest.json"), "utf8")).toBe("{}\n");
    // a replaced file takes the mode of the file laid over it
    expect(statSync(join(dest, "keep.md")).mode & 0o777).toBe(statSync(join(scratch, "over", "keep.md")).mode & 0o777);
  });

  it("charges every layer to one budget and never follows a link", async () => {
    const half = Buffer.alloc(Math.floor(MAX_AGENT_BYTES / 2) + 1);
    mkdirSync(join(scratch, "one"));
    writeFileSync(join(scratch, "one", "big1"), half);
    mkdirSync(join(scratch, "two"));
    writeFileSync(join(scratch, "two", "big2"), half);
    await expectCode(() => layTrees(join(scratch, "dest"), [{ from: join(scratch, "one") }, { from: join(scratch, "two") }]), "agent_dir_too_large");
    mkdirSync(join(scratch, "linked"));
    symlinkSync("/etc", join(scratch, "linked", "etc"));
    await expectCode(() => layTrees(join(scratch, "dest2"), [{ from: join(scratch, "linked") }]), "agent_dir_unsafe");
  });
});
