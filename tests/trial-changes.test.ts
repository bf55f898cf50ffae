/**
 * The kept tree (engine/trial/changes.ts) on a real podman box: added, modified and deleted paths with size,
 * sha256, mode and owner; symlinks recorded, never written as links; scratch, caches and evolve's own folders left
 * out with their reason; the byte cap skipping what does not fit, by name.
 */
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/driver/select.ts";
import type { Engine } from "../engine/driver/types.ts";
import { keepChangedFiles, type KeptManifest } from "../engine/trial/changes.ts";

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

  it("skips, by name and reason, what does not fit under the byte cap", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-kept-cap-"));
    const m = (await keepChangedFiles(engine, box, dir, () => {}, 1000)) as KeptManifest;
    expect(m.kept_bytes).toBeLessThanOrEqual(1000);
    expect(m.skipped).toContainEqual(expect.objectContaining({ path: "/app/big.bin", reason: expect.stringMatching(/cap/) }));
    expect(existsSync(join(dir, "fs/app/big.bin"))).toBe(false);
  });
});
