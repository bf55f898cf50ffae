/**
 * The kept tree (engine/trial/changes.ts) on a real podman box: added, modified and deleted paths with size,
 * sha256, mode and owner; symlinks recorded, never written as links; scratch, caches and evolve's own folders left
 * out with their reason; the byte cap skipping what does not fit, by name. Hostile boxes: a path longer than
 * PATH_MAX, one file over the cap among normal ones, 100,000 files (file cap, memory of the capture measured in a
 * child process by scripts/bench/kept-tree.ts) and a live archive of a 3 GB sparse file (streamed).
 */
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import type { Engine } from "../engine/driver/types.ts";
import { archiveLive, KEPT_CAP_FILES, keepChangedFiles, readKeptFile, type KeptManifest } from "../engine/trial/changes.ts";
import { readTar } from "../engine/driver/untar.ts";
import { gunzipSync } from "node:zlib";

const IMAGE = "debian:bookworm-slim";
const hasPodman = spawnSync("podman", ["image", "exists", IMAGE]).status === 0;
const LABEL = "dev.evolve.test-changes";
let engine: Engine;
let box: string;

const SCRIPT = [
  "set -e",
  "mkdir -p /app/src /app/__pycache__ /root/.cache/pip",
  "printf 'print(1)\\n' > /app/src/main.py",
  "head -c 3000 /dev/zero > /app/big.bin",
  "printf x > /app/__pycache__/m.pyc",
  "printf c > /root/.cache/pip/c",
  "printf t > /tmp/scratch",
  "ln -s src/main.py /app/link",
  "chmod 0750 /app/src/main.py && chown 1000:1000 /app/src/main.py",
  "rm /etc/issue",
  "echo extra >> /etc/motd",
].join("\n");

beforeAll(async () => {
  if (!hasPodman) return;
  engine = await openEngine({ home: mkdtempSync(join(tmpdir(), "evolve-changes-home-")) });
  box = await engine.create({ image: IMAGE, cmd: ["sleep", "infinity"], labels: { [LABEL]: "1" }, network: "none" });
  await engine.start(box);
  const r = await engine.exec(box, ["sh", "-c", SCRIPT], { user: "root" });
  expect(r.exitCode, r.stderr).toBe(0);
});

afterAll(async () => {
  if (!hasPodman) return;
  await engine.remove(box);
  await engine.close();
});

describe.skipIf(!hasPodman)("keepChangedFiles (needs podman)", () => {
  it("copies out what the run added or modified, lists deletions, and leaves out scratch and caches with the reason", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-kept-"));
    const m = (await keepChangedFiles(engine, box, dir, () => {}))!;
    const at = (p: string) => m.files.find((f) => f.path === p);
    expect(at("/app/src/main.py")).toMatchObject({ kind: "added", type: "file", size: 9, mode: "0750", uid: 1000, gid: 1000, sha256: createHash("sha256").update("print(1)\n").digest("hex") });
    expect(readFileSync(join(dir, "fs/app/src/main.py"), "utf8")).toBe("print(1)\n");
    expect(at("/app/big.bin")).toMatchObject({ size: 3000 });
    expect(at("/etc/issue")).toEqual({ path: "/etc/issue", kind: "deleted" });
    expect(at("/etc/motd")).toMatchObject({ kind: "modified", type: "file" });
    expect(readFileSync(join(dir, "fs/etc/motd"), "utf8")).toMatch(/extra\n$/);
    // a symlink is a manifest entry with its target, never a link in the trial folder
    expect(at("/app/link")).toMatchObject({ type: "symlink", target: "src/main.py" });
    expect(existsSync(join(dir, "fs/app/link"))).toBe(false);
    expect(m.files.some((f) => f.path.includes("__pycache__") || f.path.startsWith("/root/.cache") || f.path.startsWith("/tmp"))).toBe(false);
    expect(m.excluded).toEqual(expect.arrayContaining([expect.objectContaining({ path: "/tmp", reason: "scratch space" }), expect.objectContaining({ path: "/app/__pycache__", reason: "cache" })]));
    expect(m.skipped).toEqual([]);
    expect(JSON.parse(readFileSync(join(dir, "fs-changes.json"), "utf8"))).toEqual(m);
    expect(lstatSync(join(dir, "fs/app/src")).isDirectory()).toBe(true);
  });

  it.runIf(process.getuid?.() === 0)("reads owners from the box's own layer, with no process in the box, as the box's ids in a user namespace", async () => {
    const execs: string[][] = [];
    const counted: Engine = Object.assign(Object.create(engine), { exec: (id: string, cmd: string[], o?: object) => (execs.push(cmd), engine.exec(id, cmd, o)) });
    const mapped = await engine.create({ image: IMAGE, cmd: ["sleep", "infinity"], labels: { [LABEL]: "1" }, network: "none", userns: { hostId: 300000, size: 65536 } });
    try {
      await engine.start(mapped);
      const r = await engine.exec(mapped, ["sh", "-c", SCRIPT], { user: "root" });
      expect(r.exitCode, r.stderr).toBe(0);
      for (const id of [box, mapped]) {
        execs.length = 0;
        const m = (await keepChangedFiles(counted, id, mkdtempSync(join(tmpdir(), "evolve-kept-")), () => {}))!;
        const at = (p: string) => m.files.find((f) => f.path === p);
        expect(at("/app/src/main.py")).toMatchObject({ uid: 1000, gid: 1000 });
        expect(at("/app/link")).toMatchObject({ type: "symlink", uid: 0, gid: 0 });
        expect(at("/etc/motd")).toMatchObject({ uid: 0, gid: 0 });
        expect(execs).toEqual([]);
      }
    } finally {
      await engine.remove(mapped);
    }
  });

  it("skips, by name and reason, what does not fit under the byte cap", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-kept-cap-"));
    const m = (await keepChangedFiles(engine, box, dir, () => {}, 1000)) as KeptManifest;
    expect(m.kept_bytes).toBeLessThanOrEqual(1000);
    // only the file that does not fit: the others (before and after it) are kept, not marked "over the cap"
    expect(m.skipped).toEqual([{ path: "/app/big.bin", kind: "added", reason: "3000 bytes, over the 1000-byte cap of the kept tree" }]);
    expect(existsSync(join(dir, "fs/app/big.bin"))).toBe(false);
    expect(readFileSync(join(dir, "fs/app/src/main.py"), "utf8")).toBe("print(1)\n");
    expect(readFileSync(join(dir, "fs/etc/motd"), "utf8")).toMatch(/extra\n$/);
  });

  it("a live archive is a .tar.gz of the path; past its byte limit it stops with archive_too_large and leaves no file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-live-archive-"));
    const file = join(dir, "a.tar.gz");
    expect(await archiveLive(engine, box, "/app", file)).toBe(true);
    const names = readTar(gunzipSync(readFileSync(file))).map((e) => e.header.name);
    expect(names).toEqual(expect.arrayContaining(["app/src/main.py", "app/big.bin"]));
    await expect(archiveLive(engine, box, "/app", file, 1024)).rejects.toMatchObject({ code: "archive_too_large", message: "/app in the live box is over the 1024-byte limit of an archive" });
    expect(existsSync(file)).toBe(false);
    expect(await archiveLive(engine, box, "/nope", file)).toBe(false);
    expect(existsSync(file)).toBe(false);
  });

  it("an archive reader that refuses the stream (a tar limit) ends the engine call with its error, nothing left uncaught", async () => {
    await expect(engine.archiveGet(box, "/app", () => { throw new Error("refused by the reader"); })).rejects.toThrow("refused by the reader");
    // and an already-aborted signal is an engine_aborted rejection, not a crash
    await expect(engine.archiveGet(box, "/app", () => {}, AbortSignal.abort())).rejects.toMatchObject({ code: "engine_aborted" });
  });

  it("a capture out of time records what it did not reach, by name, and still writes the manifest", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-kept-time-"));
    const m = (await keepChangedFiles(engine, box, dir, () => {}, { timeMs: 1 }))!;
    expect(m.skipped.length).toBeGreaterThan(0);
    expect(new Set(m.skipped.map((s) => s.reason))).toEqual(new Set(["not reached within the capture's 1ms"]));
    // nothing is both kept and skipped
    const kept = new Set(m.files.map((f) => f.path));
    expect(m.skipped.filter((s) => kept.has(s.path))).toEqual([]);
    expect(JSON.parse(readFileSync(join(dir, "fs-changes.json"), "utf8"))).toEqual(m);
  });
});

/** A fresh box with `script` run in it as root; removed after the test. */
async function hostileBox(script: string): Promise<string> {
  const id = await engine.create({ image: IMAGE, cmd: ["sleep", "infinity"], labels: { [LABEL]: "1" }, network: "none" });
  await engine.start(id);
  const r = await engine.exec(id, ["bash", "-c", `set -e\n${script}`], { user: "root", timeoutMs: 300_000 });
  expect(r.exitCode, r.stderr).toBe(0);
  return id;
}

const BUN = join(__dirname, "..", "node_modules", ".bin", "bun");
const BENCH = join(__dirname, "..", "scripts", "bench", "kept-tree.ts");

/** One case of scripts/bench/kept-tree.ts in a child process: its JSON, peak RSS included. */
function benchCase(name: string): Record<string, any> {
  const r = spawnSync(BUN, [BENCH, "--case", name, "--image", IMAGE], { encoding: "utf8", timeout: 600_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe.skipIf(!hasPodman)("keepChangedFiles on hostile boxes (needs podman)", () => {
  it("a path longer than PATH_MAX is skipped by name; everything else the run changed is kept", async () => {
    const id = await hostileBox(
      'mkdir -p /app/deep && echo a > /app/a.txt && echo b > /app/z.txt && cd /app/deep && for i in $(seq 1 22); do n=$(printf "%0200d" $i); mkdir $n && cd $n; done && echo deep > f.txt',
    );
    try {
      const dir = mkdtempSync(join(tmpdir(), "evolve-kept-deep-"));
      const lines: string[] = [];
      const m = (await keepChangedFiles(engine, id, dir, (l) => lines.push(l)))!;
      expect(m).toBeDefined();
      expect(readFileSync(join(dir, "fs/app/a.txt"), "utf8")).toBe("a\n");
      expect(readFileSync(join(dir, "fs/app/z.txt"), "utf8")).toBe("b\n");
      // one skipped entry: the top of the too-long subtree, not each folder below it
      expect(m.skipped).toHaveLength(1);
      expect(m.skipped[0]).toMatchObject({ reason: "path longer than 2048 bytes" });
      expect(m.skipped[0].path.startsWith("/app/deep/")).toBe(true);
      expect(Buffer.byteLength(m.skipped[0].path)).toBeGreaterThan(2048);
      expect(JSON.parse(readFileSync(join(dir, "fs-changes.json"), "utf8")).skipped).toEqual(m.skipped);
      expect(lines.join("\n")).toMatch(/not kept: \/app\/deep\/.*path longer than 2048 bytes/);
      // podman's changes API fails on such a path: the list came from the box, and the manifest says so
      if (m.changes_from === "box") expect(m.changes_note).toMatch(/could not list the changes.*file name too long/);
    } finally {
      await engine.remove(id);
    }
  });

  // read past: the big file's bytes are dropped as the folder's archive streams; split: the archive stops at it and
  // the folder is fetched again in parts around it
  it.each([
    ["read past", 256 * 1024 * 1024],
    ["split around", 1024 * 1024],
  ])("one file over the byte cap among normal files (%s): only it is skipped, the folder and the rest are kept", async (_, readPastBytes) => {
    const id = await hostileBox("mkdir -p /app/proj/sub && for i in $(seq 1 20); do echo $i > /app/proj/f$i.txt; echo $i > /app/proj/sub/g$i.txt; done && head -c 3000000 /dev/urandom > /app/proj/big.bin");
    try {
      const dir = mkdtempSync(join(tmpdir(), "evolve-kept-one-big-"));
      const lines: string[] = [];
      const m = (await keepChangedFiles(engine, id, dir, (l) => lines.push(l), { bytes: 1024 * 1024, readPastBytes }))!;
      expect(m.skipped).toEqual([{ path: "/app/proj/big.bin", kind: "added", reason: `3000000 bytes, over the ${1024 * 1024}-byte cap of the kept tree` }]);
      const files = m.files.filter((f) => f.type === "file").map((f) => f.path);
      expect(files).toHaveLength(40);
      expect(m.files.find((f) => f.path === "/app/proj")).toMatchObject({ type: "dir" });
      expect(readdirSync(join(dir, "fs/app/proj/sub"))).toHaveLength(20);
      expect(readFileSync(join(dir, "fs/app/proj/f7.txt"), "utf8")).toBe("7\n");
      expect(lines).toContain(`not kept: /app/proj/big.bin: 3000000 bytes, over the ${1024 * 1024}-byte cap of the kept tree`);
    } finally {
      await engine.remove(id);
    }
  });

  it("the file cap keeps the first files, records the rest by name and stops", async () => {
    const id = await hostileBox("mkdir -p /app/m && cd /app/m && seq 1 300 | xargs touch && echo x > /app/z.txt");
    try {
      const dir = mkdtempSync(join(tmpdir(), "evolve-kept-count-"));
      const lines: string[] = [];
      const m = (await keepChangedFiles(engine, id, dir, (l) => lines.push(l), { files: 100 }))!;
      expect(m.files.filter((f) => f.type === "file")).toHaveLength(100);
      expect(m.skipped.length).toBeGreaterThanOrEqual(200);
      expect(new Set(m.skipped.map((s) => s.reason))).toEqual(new Set(["over the 100-file cap of the kept tree"]));
      expect(m.cap_files).toBe(100);
      // one log line for all of them, not 200
      expect(lines.filter((l) => l.startsWith("not kept:"))).toHaveLength(1);
      expect(lines.find((l) => l.startsWith("not kept:"))).toMatch(/^not kept: \d+ paths, over the 100-file cap of the kept tree \(/);
    } finally {
      await engine.remove(id);
    }
  });

  it("100,000 files: 20,000 kept, the rest recorded, in bounded memory (peak RSS of the capture's own process)", { timeout: 600_000 }, () => {
    const r = benchCase("many");
    expect(r.kept_files).toBe(KEPT_CAP_FILES);
    expect(r.skipped).toBeGreaterThanOrEqual(100_000 - KEPT_CAP_FILES);
    expect(r.skipped_reasons).toEqual([`over the ${KEPT_CAP_FILES}-file cap of the kept tree`]);
    expect(r.peak_rss_mb).toBeLessThan(400);
  });

  it("a live archive of a 3 GB sparse file streams to disk instead of buffering it", { timeout: 600_000 }, () => {
    const r = benchCase("sparse");
    expect(r.archive_bytes).toBeGreaterThan(0);
    expect(r.peak_rss_mb).toBeLessThan(400);
  });
});

describe("readKeptFile", () => {
  it("refuses a link or a FIFO in the kept tree by name, never reading the target", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-kept-read-"));
    const fs = join(dir, "fs", "app");
    spawnSync("mkdir", ["-p", fs]);
    writeFileSync(join(dir, "secret"), "do not print");
    spawnSync("ln", ["-s", join(dir, "secret"), join(fs, "link")]);
    spawnSync("mkfifo", [join(fs, "fifo")]);
    writeFileSync(join(fs, "ok.txt"), "fine");
    await expect(readKeptFile(dir, "/app/link")).rejects.toThrow(/kept copy of \/app\/link is a link/);
    await expect(readKeptFile(dir, "/app/fifo")).rejects.toThrow(/kept copy of \/app\/fifo is not a regular file/);
    await expect(readKeptFile(dir, "/app/ok.txt", 2)).rejects.toThrow(/4 bytes, over the 2-byte cap/);
    expect((await readKeptFile(dir, "/app/ok.txt")).toString()).toBe("fine");
  });
});
