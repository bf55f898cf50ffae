/**
 * `evolve upload`, `evolve job imports` and `evolve job import` through the real CLI (platform-upload.md): the
 * provider printed as `ported`, `scored N of M trial(s)` (a warning when zero of many), `--no-wait` returning the
 * import id with `job import --watch` following it, `job show` naming the origin, and `job resume` refusing an
 * uploaded job (`job_uploaded`). No container engine.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
const FIXTURES = join(root, "fixtures", "harbor-jobs");
let home: string;

const host = cliHost();
afterAll(() => host.close());

function evolve(args: string[]) {
  return host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeoutMs: 60_000 });
}

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-upload-cli-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

describe("evolve upload", () => {
  it("prints the job, `ported` as the provider and `scored N of M trial(s)`; job show and job imports agree", () => {
    const r = evolve(["upload", join(FIXTURES, "mixed-job")]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("provider: ported");
    expect(r.stdout).toContain("scored 2 of 4 trial(s)");
    const jobId = /job (\S+) imported/.exec(r.stdout)![1];
    const show = evolve(["job", "show", jobId]);
    expect(show.stdout).toContain("provider ported: uploaded");
    expect(show.stdout).toContain("(mixed-job)");
    const json = JSON.parse(evolve(["job", "show", jobId, "--json"]).stdout);
    expect(json).toMatchObject({ provider: "ported", upload: { original_job_name: "mixed-job" }, n_trials: 4 });
    const list = JSON.parse(evolve(["job", "imports", "--status", "COMPLETED", "--json"]).stdout);
    expect(list).toEqual([expect.objectContaining({ status: "COMPLETED", job_id: jobId, trials: 4, scored: 2 })]);
    // resume, retry and regrade refuse it
    const resume = evolve(["job", "resume", jobId]);
    expect(resume.code).toBe(1);
    expect(resume.stderr).toContain("error[job_uploaded]");
    const again = evolve(["upload", join(FIXTURES, "mixed-job")]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("error[job_already_uploaded]");
    expect(JSON.parse(evolve(["job", "imports", "--status", "failed", "--json"]).stdout)).toEqual([expect.objectContaining({ error: expect.objectContaining({ code: "job_already_uploaded" }) })]);
  });

  it("warns when zero of many trials carry a reward", () => {
    const dir = join(home, "no-rewards");
    cpSync(join(FIXTURES, "mixed-job"), dir, { recursive: true });
    for (const t of readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory())) {
      const p = join(dir, t.name, "result.json");
      const r = JSON.parse(readFileSync(p, "utf8"));
      r.verifier_result = null;
      writeFileSync(p, JSON.stringify(r));
    }
    const r = evolve(["upload", dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("scored 0 of 4 trial(s)");
    expect(r.stderr).toMatch(/warning: no trial carries a reward: check verifier_result\.rewards/);
  });

  it("--no-wait returns the import id at once; job import --watch follows it to its job", () => {
    const r = evolve(["upload", join(FIXTURES, "oracle-job"), "--no-wait", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const { import_id } = JSON.parse(r.stdout);
    const w = evolve(["job", "import", import_id, "--watch"]);
    expect(w.code, w.stdout + w.stderr).toBe(0);
    expect(w.stdout).toContain("scored 1 of 1 trial(s)");
    expect(w.stdout).toContain("provider: ported");
    expect(evolve(["job", "import", "01NOSUCHIMPORT"]).stderr).toContain("error[import_not_found]");
  });
});
