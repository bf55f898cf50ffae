/**
 * Smoke tests of the single binary `dist/evolve` as a user gets it: copied alone into an empty directory (no
 * repository, no node_modules), and inside a Debian container with no network. They prove the embedded LMDB
 * addon loads and the lazily imported command modules are bundled. Skipped until `npm run build` has run.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = resolve(__dirname, "..");
const built = join(root, "dist/evolve");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const hasBinary = existsSync(built);

/** A fixture task directory of a kind (the preferred one when present), or undefined when none is written yet. */
function firstFixture(kind: "valid" | "invalid", prefer: string): string | undefined {
  const dir = join(root, "fixtures/tasks", kind);
  if (!existsSync(dir)) return undefined;
  const names = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
  if (names.includes(prefer)) return join(dir, prefer);
  return names.length ? join(dir, names[0]) : undefined;
}
const validTask = firstFixture("valid", "minimal");
const invalidTask = firstFixture("invalid", "task_name_invalid");

/** Podman usable with the local base image built by scripts/ci/base-images.sh? */
function podmanReady(): boolean {
  const r = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"], { stdio: "ignore" });
  return r.status === 0;
}

/** A test title that says why it is skipped, only when it is. */
const title = (name: string, skip: boolean, reason: string): string => (skip ? `${name} (skipped: ${reason})` : name);
const noFixture = "no fixture task in fixtures/tasks/";

let dir: string; // holds only the binary and copies of fixtures
let home: string;

function evolve(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(join(dir, "evolve"), args, {
    cwd: dir,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, EVOLVE_HOME: home, NO_COLOR: "1", ...env },
    timeout: 30_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Copies a fixture task next to the binary, so nothing it reads lives in the repository. */
function copyTask(src: string): string {
  const dest = join(dir, "tasks", src.split("/").slice(-1)[0]);
  cpSync(src, dest, { recursive: true });
  return dest;
}

describe.skipIf(!hasBinary)(title("dist/evolve", !hasBinary, "dist/evolve not built; run npm run build"), () => {
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "evolve-bin-"));
    home = mkdtempSync(join(tmpdir(), "evolve-bin-home-"));
    copyFileSync(built, join(dir, "evolve"));
    chmodSync(join(dir, "evolve"), 0o755);
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("prints the package version", () => {
    const r = evolve(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(pkg.version);
  });

  it("prints help naming the command groups", () => {
    const r = evolve(["--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/task/);
    expect(r.stdout).toMatch(/dataset/);
  });

  it("refuses an unknown command with exit 2 and a one-line coded error", () => {
    const r = evolve(["frobnicate"]);
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split("\n");
    expect(lines[0]).toMatch(/^error\[[a-z0-9_]+\]: \S/);
    expect(lines[1]).toMatch(/hint:/);
  });

  it.skipIf(!validTask)(title("validates a valid task", !validTask, noFixture + "valid"), () => {
    const r = evolve(["task", "validate", copyTask(validTask!)]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
  });

  it.skipIf(!invalidTask)(title("refuses an invalid task with exit 1", !invalidTask, noFixture + "invalid"), () => {
    const r = evolve(["task", "validate", copyTask(invalidTask!), "--json"]);
    expect(r.code).toBe(1);
    expect(() => JSON.parse(r.stdout)).not.toThrow();
  });

  it("opens the embedded LMDB store: an empty home lists no datasets", () => {
    const r = evolve(["dataset", "list", "--json"], { EVOLVE_HOME: mkdtempSync(join(tmpdir(), "evolve-bin-empty-")) });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    const list = Array.isArray(doc) ? doc : Object.values(doc).find(Array.isArray);
    expect(list).toEqual([]);
  });

  it.skipIf(!validTask)(title("stores a published dataset and lists it", !validTask, noFixture + "valid"), () => {
    const tasks = join(dir, "publish");
    cpSync(validTask!, join(tasks, "one"), { recursive: true });
    const pub = evolve(["dataset", "publish", tasks, "--name", "smoke", "--version", "1.0"]);
    expect(pub.code, pub.stderr).toBe(0);
    const r = evolve(["dataset", "list", "--json"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("smoke");
  });

  const noBox = !podmanReady();
  const boxTitle = title("in a Debian container without network", noBox, "no podman or no image debian:bookworm-slim");
  describe.skipIf(noBox)(boxTitle, () => {
    function inBox(args: string[]) {
      const r = spawnSync(
        "podman",
        ["run", "--rm", "--network=none", "-e", "EVOLVE_HOME=/tmp/h", "-e", "NO_COLOR=1", "-v", `${dir}:/x:ro`,
          "debian:bookworm-slim", "/x/evolve", ...args],
        { encoding: "utf8", timeout: 60_000 },
      );
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    }

    it("runs --version", () => {
      const r = inBox(["--version"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(pkg.version);
    });

    it("opens the store", () => {
      const r = inBox(["dataset", "list", "--json"]);
      expect(r.code, r.stderr).toBe(0);
      expect(() => JSON.parse(r.stdout)).not.toThrow();
    });
  });
});
