/**
 * The persist sweep (engine/trial/sweep.ts) against trees a hostile box leaves behind, on the host's real file
 * system: planted names of evolve's old temp files, a 100 GB sparse file, paths deeper than PATH_MAX, trees deeper
 * than any walk should go, a persist past its deadline. Nothing here throws, nothing stays in plain text, and what
 * was not kept as written is recorded.
 */
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync, chmodSync, writeFileSync, ftruncateSync, constants } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { emptyBoxDir, removeTree, sweepTree } from "./sweep.ts";

const SECRET = "sw33p-s3cret-9d1f";
const dirs: string[] = [];
function trialDir(): string {
  const d = mkdtempSync(join(tmpdir(), "evolve-sweep-"));
  dirs.push(d);
  mkdirSync(join(d, "agent"));
  mkdirSync(join(d, "artifacts"));
  return d;
}
afterEach(() => {
  // rm -rf walks with descriptors (fts), so the deep trees these tests make go too
  for (const d of dirs.splice(0)) execFileSync("rm", ["-rf", d]);
});

/** Every file under `dir` holding `needle`, found by grep (descriptor-relative: deeper than PATH_MAX included). */
function holding(dir: string, needle: string): string[] {
  try {
    return execFileSync("grep", ["-rlaF", needle, dir], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch (e) {
    if ((e as { status?: number }).status === 1) return [];
    throw e;
  }
}

/**
 * Makes `levels` nested folders named `name` under `root` and writes `file` = `content` at the bottom, by
 * descriptor-relative paths (/proc/self/fd/N/…) so the full path may pass PATH_MAX. Returns a reader of that file.
 */
function deepFile(root: string, levels: number, name: string, file: string, content: string, mode = 0o644): () => string | undefined {
  let fd = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY);
  for (let i = 0; i < levels; i++) {
    mkdirSync(`/proc/self/fd/${fd}/${name}`);
    const next = openSync(`/proc/self/fd/${fd}/${name}`, constants.O_RDONLY | constants.O_DIRECTORY);
    closeSync(fd);
    fd = next;
  }
  writeFileSync(`/proc/self/fd/${fd}/${file}`, content, { mode });
  closeSync(fd);
  return () => {
    let d: number;
    try {
      d = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch {
      return undefined;
    }
    try {
      for (let i = 0; i < levels; i++) {
        const next = openSync(`/proc/self/fd/${d}/${name}`, constants.O_RDONLY | constants.O_DIRECTORY);
        closeSync(d);
        d = next;
      }
      return readFileSync(`/proc/self/fd/${d}/${file}`, "utf8");
    } catch {
      return undefined;
    } finally {
      closeSync(d);
    }
  };
}

describe("the persist sweep", () => {
  it("redacts beside planted files named like evolve's temp files (its pid among them), and no message carries a pid", async () => {
    const d = trialDir();
    writeFileSync(join(d, "agent", "said.txt"), `token=${SECRET}\n`);
    // the old temp name was `.said.txt.evolve-redact-<pid>` beside the file: the box plants the whole pid range
    // (the engine test, trial-persist, plants the whole range; here a sample and evolve's own pid)
    for (let p = 1; p <= 1000; p++) writeFileSync(join(d, "agent", `.said.txt.evolve-redact-${p}`), "");
    writeFileSync(join(d, "agent", `.said.txt.evolve-redact-${process.pid}`), "");
    const r = await sweepTree(d, { secrets: [SECRET] });
    expect(readFileSync(join(d, "agent", "said.txt"), "utf8")).toBe("token=[redacted]\n");
    expect(r.redacted).toBe(1);
    expect(r.skippedCount).toBe(0);
    // the planted files are the box's and stay; evolve's own temp folder is gone
    expect(existsSync(join(d, "agent", `.said.txt.evolve-redact-${process.pid}`))).toBe(true);
    expect(readdirSync(d).filter((n) => n.startsWith(".evolve-tmp-"))).toEqual([]);
    expect(JSON.stringify(r)).not.toContain(String(process.pid));
  }, 120_000);

  it("never reads a 100 GB sparse file: one holding data is removed and recorded, one all hole is kept, in no time", async () => {
    const d = trialDir();
    const big = join(d, "agent", "big.bin");
    writeFileSync(big, `token=${SECRET}\n`);
    let fd = openSync(big, "r+");
    ftruncateSync(fd, 100 * 1024 ** 3);
    closeSync(fd);
    const hole = join(d, "artifacts", "hole.bin");
    fd = openSync(hole, "w");
    ftruncateSync(fd, 100 * 1024 ** 3);
    closeSync(fd);
    writeFileSync(join(d, "agent", "small.txt"), `also ${SECRET}`);
    const t0 = Date.now();
    const r = await sweepTree(d, { secrets: [SECRET] });
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(existsSync(big)).toBe(false);
    expect(statSync(hole).size).toBe(100 * 1024 ** 3);
    expect(readFileSync(join(d, "agent", "small.txt"), "utf8")).toBe("also [redacted]");
    expect(r.skipped).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: "agent/big.bin", reason: "too_large", action: "removed", bytes: 100 * 1024 ** 3 }),
        expect.objectContaining({ path: "artifacts/hole.bin", reason: "all_hole", action: "kept", allocated: 0 }),
      ]),
    );
    rmSync(hole); // grep would read its 100 GB of zeros
    expect(holding(d, SECRET)).toEqual([]);
  }, 30_000);

  it("redacts, defuses and sweeps files deeper than PATH_MAX by descriptors", async () => {
    const d = trialDir();
    const name = "d".repeat(250);
    // 20 levels of 251 bytes: the file's path is over 5,000 bytes, past PATH_MAX (4,096)
    const read = deepFile(join(d, "agent"), 20, name, "deep.txt", `token=${SECRET}\n`);
    deepFile(join(d, "artifacts"), 20, name, "rootsh", "#!/bin/sh\n", 0o755);
    // set the set-uid bit and plant a FIFO down there the same way
    let fd = openSync(join(d, "artifacts"), constants.O_RDONLY | constants.O_DIRECTORY);
    for (let i = 0; i < 20; i++) {
      const next = openSync(`/proc/self/fd/${fd}/${name}`, constants.O_RDONLY | constants.O_DIRECTORY);
      closeSync(fd);
      fd = next;
    }
    chmodSync(`/proc/self/fd/${fd}/rootsh`, 0o4755);
    // mkfifo gets the folder as its fd 3: /proc/self is the child there
    execFileSync("mkfifo", ["/proc/self/fd/3/fifo"], { stdio: ["ignore", "ignore", "inherit", fd] });
    const bottom = `/proc/self/fd/${fd}`;
    expect(statSync(`${bottom}/rootsh`).mode & 0o4000).toBe(0o4000);
    expect(holding(d, SECRET).length).toBe(1);

    const r = await sweepTree(d, { secrets: [SECRET] });
    expect(read()).toBe("token=[redacted]\n");
    expect(holding(d, SECRET)).toEqual([]);
    expect(statSync(`${bottom}/rootsh`).mode & 0o6000).toBe(0);
    expect(existsSync(`${bottom}/fifo`)).toBe(false);
    closeSync(fd);
    expect(r.setid).toHaveLength(1);
    expect(r.special).toHaveLength(1);
    expect(r.redacted).toBe(1);
  }, 30_000);

  it("removes a tree deeper than its depth limit whole, without walking it by path, and records it", async () => {
    const d = trialDir();
    const read = deepFile(join(d, "agent"), 400, "d", "deep.txt", `token=${SECRET}\n`);
    expect(read()).toContain(SECRET);
    const r = await sweepTree(d, { secrets: [SECRET] });
    // the folders down to the limit stay (empty: persist prunes them after), the rest is gone
    expect(read()).toBeUndefined();
    expect(holding(d, SECRET)).toEqual([]);
    expect(readdirSync(d).filter((n) => n.startsWith(".evolve-tmp-"))).toEqual([]);
    expect(r.skipped).toEqual([expect.objectContaining({ reason: "too_deep", action: "removed" })]);
    expect(r.skipped[0]!.path.split("/")).toHaveLength(1 + 256); // agent/ and 256 levels below it were walked, the rest went whole
  }, 60_000);

  it("settles past its deadline with what it has: the box's unread entries are removed and recorded, evolve's own files kept", async () => {
    const d = trialDir();
    writeFileSync(join(d, "trial.log"), `line ${SECRET}\n`);
    writeFileSync(join(d, "agent", "a.txt"), `x ${SECRET}`);
    writeFileSync(join(d, "artifacts", "b.txt"), "nothing secret");
    const r = await sweepTree(d, { secrets: [SECRET], deadline: Date.now() - 1 });
    expect(r.deadlineHit).toBe(true);
    expect(readFileSync(join(d, "trial.log"), "utf8")).toBe("line [redacted]\n");
    expect(existsSync(join(d, "agent"))).toBe(false);
    expect(r.skipped.map((s) => [s.path, s.reason]).sort()).toEqual([
      ["agent", "deadline"],
      ["artifacts", "deadline"],
    ]);
    expect(holding(d, SECRET)).toEqual([]);
  });

  it("takes a secret out of names and link targets, and removes what it cannot read", async () => {
    const d = trialDir();
    writeFileSync(join(d, "agent", `key-${SECRET}.txt`), "plain");
    execFileSync("ln", ["-s", `/nowhere/${SECRET}`, join(d, "agent", "link")]);
    writeFileSync(join(d, "agent", "locked.txt"), `x ${SECRET}`, { mode: 0o000 });
    const r = await sweepTree(d, { secrets: [SECRET] });
    const names = readdirSync(join(d, "agent"));
    expect(names).toContain("key-[redacted].txt");
    expect(names).not.toContain("link");
    expect(names.join()).not.toContain(SECRET);
    expect(r.skipped.map((s) => s.reason).sort()).toContain("secret_in_name");
    expect(JSON.stringify(r)).not.toContain(SECRET);
    // root reads a 0000 file anyway; as another user it is unreadable and removed: either way no plain secret stays
    expect(holding(d, SECRET)).toEqual([]);
  });

  it("reads nothing and records nothing when there is no secret, but still defuses", async () => {
    const d = trialDir();
    const f = join(d, "agent", "big.bin");
    const fd = openSync(f, "w");
    writeFileSync(fd, "data");
    ftruncateSync(fd, 10 * 1024 ** 3);
    closeSync(fd);
    writeFileSync(join(d, "agent", "suid"), "x", { mode: 0o755 });
    execFileSync("chmod", ["4755", join(d, "agent", "suid")]);
    const r = await sweepTree(d, { secrets: [] });
    expect(existsSync(f)).toBe(true);
    expect(r.bytesRead).toBe(0);
    expect(r.skippedCount).toBe(0);
    expect(statSync(join(d, "agent", "suid")).mode & 0o6000).toBe(0);
  });

  it("empties a box's folder and removes an attempt's outputs whatever their depth (Node's rm stops at PATH_MAX)", async () => {
    const d = trialDir();
    const name = "d".repeat(250);
    const inVerifier = deepFile(join(d, "agent"), 20, name, "reward.txt", "1");
    const inArtifacts = deepFile(join(d, "artifacts"), 20, name, "x", "x");
    execFileSync("ln", ["-s", "/etc", join(d, "agent", "etc")]);
    await emptyBoxDir(join(d, "agent"));
    expect(inVerifier()).toBeUndefined();
    expect(readdirSync(join(d, "agent"))).toEqual([]);
    expect(existsSync("/etc/passwd")).toBe(true);
    await removeTree(join(d, "artifacts"));
    expect(inArtifacts()).toBeUndefined();
    expect(readdirSync(d)).toEqual(["agent"]);
  });
});
