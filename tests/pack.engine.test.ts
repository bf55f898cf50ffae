/**
 * A pack made here runs its tasks on an air-gapped machine with no build (issue 22 §4, §6), through the real CLI on
 * real podman: a dataset of two tasks (our minimal fixture, each with an environment of its own on one base) is
 * packed with a vendored agent; its task images are removed; a fresh EVOLVE_HOME and agents folder unpack it; and
 * the oracle runs there with a `podman` on PATH that fails any build and records that it was asked, scoring 1 on
 * both tasks. The far machine's dataset has the source's digest, and a job run there packs again (a folder run's
 * tasks as dataset job-<id>@1).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
let work: string;
/** The task images the test built, removed however it ends. */
let refs: string[] = [];

function evolve(home: string, agents: string, args: string[], path?: string) {
  const env = { ...process.env, EVOLVE_HOME: home, EVOLVE_AGENTS_DIR: agents, NO_COLOR: "1", ...(path ? { PATH: path } : {}) };
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], { cwd: work, encoding: "utf8", env, timeout: 300_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A vendored agent tree of one small file, with the manifest `agent pull` would write for it. */
function fakeVendored(agentsDir: string, harness: string, version: string): void {
  const dir = join(agentsDir, harness, version);
  mkdirSync(join(dir, "bin"), { recursive: true });
  const body = "#!/bin/sh\necho packed agent\n";
  writeFileSync(join(dir, "bin", harness), body);
  chmodSync(join(dir, "bin", harness), 0o755);
  const manifest = {
    harness, version, packages: [], node_version: null, entry: `bin/${harness}`, created_at: new Date().toISOString(),
    files: [{ path: `bin/${harness}`, size: body.length, sha256: createHash("sha256").update(body).digest("hex"), mode: 0o755 }],
    links: [],
  };
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "evolve-pack-engine-"));
});
afterAll(() => {
  if (refs.length > 0) spawnSync("podman", ["rmi", ...refs]);
  rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!hasPodman)("a pack runs on a fresh machine with no build (needs podman and debian:bookworm-slim)", () => {
  it("packs a dataset and an agent, unpacks them into a fresh home with the images removed, and runs the oracle with no build", () => {
    const src = join(work, "src");
    const far = join(work, "far");
    const srcAgents = join(work, "src-agents");
    const farAgents = join(work, "far-agents");
    const ds = join(work, "ds");
    // tasks whose environments are unique to this run: removing their images touches no other test's
    const marker = `${process.pid}-${Date.now()}`;
    for (const t of ["ta", "tb"]) {
      cpSync(join(root, "fixtures/tasks/valid/minimal"), join(ds, t), { recursive: true });
      writeFileSync(join(ds, t, "environment", "Dockerfile"), `FROM debian:bookworm-slim\nRUN mkdir -p /app && echo ${marker}-${t} > /pack-marker\nWORKDIR /app\n`);
    }
    fakeVendored(srcAgents, "codex", "0.0.1");
    expect(evolve(src, srcAgents, ["dataset", "publish", ds, "--name", "packed", "--version", "1.0"]).code).toBe(0);
    const srcDigest = JSON.parse(evolve(src, srcAgents, ["dataset", "show", "packed@1.0", "--json"]).stdout).dataset.digest;

    const packFile = join(work, "packed.evolvepack");
    const p = evolve(src, srcAgents, ["pack", "packed@1.0", "-o", packFile, "--agent", "codex", "--json"]);
    expect(p.code, p.stderr).toBe(0);
    const packed = JSON.parse(p.stdout);
    expect(packed.images).toHaveLength(2);
    expect(packed.agents).toEqual([{ harness: "codex", version: "0.0.1" }]);
    // one archive, the base layers the two images share stored once
    expect(packed.images_archive_bytes).toBeLessThan(packed.image_bytes);
    expect(packed.bytes).toBe(readFileSync(packFile).length);

    // the far machine: none of the task images, a fresh home and agents folder
    refs = packed.images.map((i: { ref: string }) => i.ref);
    expect(spawnSync("podman", ["rmi", ...refs]).status).toBe(0);
    const u = evolve(far, farAgents, ["unpack", packFile, "--json"]);
    expect(u.code, u.stderr).toBe(0);
    const unpacked = JSON.parse(u.stdout);
    expect(unpacked.manifest_sha256).toBe(packed.manifest_sha256);
    expect(unpacked.dataset).toMatchObject({ name: "packed", version: "1.0", digest: srcDigest, status: "published" });
    expect(unpacked.agents.imported).toEqual([{ harness: "codex", version: "0.0.1" }]);
    expect(JSON.parse(evolve(far, farAgents, ["agent", "show", "codex", "--json"]).stdout)).toBeTruthy();
    expect(existsSync(join(farAgents, "codex", "0.0.1", "bin", "codex"))).toBe(true);
    for (const r of refs) expect(spawnSync("podman", ["image", "exists", r]).status).toBe(0);

    // a podman that refuses to build and says it was asked: the run must find every image by its key
    const fake = join(work, "fakebin");
    const asked = join(work, "build-asked");
    mkdirSync(fake);
    writeFileSync(join(fake, "podman"), `#!/bin/sh\nif [ "$1" = build ]; then echo "$@" >> ${asked}; echo "no builds on this machine" >&2; exit 97; fi\nexec ${spawnSync("sh", ["-c", "command -v podman"], { encoding: "utf8" }).stdout.trim()} "$@"\n`);
    chmodSync(join(fake, "podman"), 0o755);
    const run = evolve(far, farAgents, ["run", "-d", "packed@1.0", "-a", "oracle", "-o", join(work, "jobs"), "--json"], `${fake}:${process.env.PATH}`);
    expect(run.code, run.stderr).toBe(0);
    expect(existsSync(asked)).toBe(false);
    const lines = run.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const settled = lines.filter((l) => l.kind === "trial_settled").map((l) => l.trial as { status: string; rewards?: Record<string, number> | null });
    expect(settled.map((t) => t.status)).toEqual(["SCORED", "SCORED"]);
    expect(settled.map((t) => t.rewards?.reward)).toEqual([1, 1]);
    const jobId = lines.find((l) => l.kind === "job").job_id as string;

    // the job packs again on the far machine (its dataset, no build)
    const again = evolve(far, farAgents, ["pack", jobId, "-o", join(work, "job.evolvepack"), "--json"], `${fake}:${process.env.PATH}`);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ source: { kind: "job" }, dataset: { name: "packed", version: "1.0", digest: srcDigest } });
    expect(existsSync(asked)).toBe(false);

    // a folder run (-p) has no dataset: its pack publishes the job's tasks as dataset job-<id>@1 (the images are here)
    const folderRun = evolve(far, farAgents, ["run", "-p", join(ds, "ta"), "-a", "oracle", "-o", join(work, "jobs"), "--json"], `${fake}:${process.env.PATH}`);
    expect(folderRun.code, folderRun.stderr).toBe(0);
    const folderJob = folderRun.stdout.trim().split("\n").map((l) => JSON.parse(l)).find((l) => l.kind === "job").job_id as string;
    const fp = evolve(far, farAgents, ["pack", folderJob, "-o", join(work, "folder.evolvepack"), "--json"], `${fake}:${process.env.PATH}`);
    expect(fp.code, fp.stderr).toBe(0);
    expect(JSON.parse(fp.stdout)).toMatchObject({ source: { kind: "job", ref: folderJob }, dataset: { name: `job-${folderJob.toLowerCase()}`, version: "1", tasks: 1 }, images: [{ ref: refs[0] }] });
    const third = join(work, "third");
    const u3 = evolve(third, join(work, "third-agents"), ["unpack", join(work, "folder.evolvepack")]);
    expect(u3.code, u3.stderr).toBe(0);
    expect(evolve(third, join(work, "third-agents"), ["dataset", "show", `job-${folderJob.toLowerCase()}@1`]).code).toBe(0);
    expect(existsSync(asked)).toBe(false);
  }, 600_000);
});
