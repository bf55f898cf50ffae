/**
 * `POST /api/v1/jobs` end to end on real podman: `evolve serve` (the real CLI, `bun main.ts`) starts an oracle job
 * from `run`'s flags with a run-scoped token, runs it in its own process, and the job reads back over the API as
 * `job show --json` has it, its trial SCORED.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
let home: string;
let work: string;
let server: ChildProcess | undefined;

function evolve(args: string[]) {
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], { cwd: work, encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-serve-run-home-"));
  work = mkdtempSync(join(tmpdir(), "evolve-serve-run-work-"));
});

afterAll(() => {
  server?.kill("SIGTERM");
  if (hasPodman) evolve(["gc"]);
  rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!hasPodman)("evolve serve starts jobs (needs podman and the local debian:bookworm-slim image)", () => {
  it("runs an oracle job POSTed with a run token and reads it back as job show --json", async () => {
    const run = evolve(["auth", "token", "create", "--scope", "run", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const token = JSON.parse(run.stdout).token as string;
    const read = JSON.parse(evolve(["auth", "token", "create", "--json"]).stdout).token as string;
    server = spawn(bun, [join(root, "main.ts"), "serve", "--port", "0"], { cwd: work, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] });
    const base = await new Promise<string>((done, fail) => {
      let seen = "";
      const timer = setTimeout(() => fail(new Error(`serve never listened: ${seen}`)), 30_000);
      server!.stdout!.on("data", (b) => {
        seen += b;
        const m = /listening on (http:\/\/\S+)\/api\/v1/.exec(seen);
        if (m) {
          clearTimeout(timer);
          done(`${m[1]}/api/v1`);
        }
      });
    });
    const body = JSON.stringify({ path: join(root, "fixtures/tasks/valid/minimal"), agent: "oracle", "n-attempts": 1 });
    const refused = await fetch(`${base}/jobs`, { method: "POST", headers: { authorization: `Bearer ${read}` }, body });
    expect(refused.status).toBe(403);
    const started = await fetch(`${base}/jobs`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body });
    const doc = (await started.json()) as { id: string };
    expect(started.status, JSON.stringify(doc)).toBe(201);
    expect(started.headers.get("location")).toBe(`/api/v1/jobs/${doc.id}`);
    // answered once the serve process runs it: never seen as INTERRUPTED (a job nobody runs)
    expect((doc as unknown as { status: string }).status).toBe("RUNNING");
    const deadline = Date.now() + 180_000;
    let job: { status: string; trials: { status: string; reward: number }[] };
    for (;;) {
      job = (await (await fetch(`${base}/jobs/${doc.id}`, { headers: { authorization: `Bearer ${read}` } })).json()) as typeof job;
      if (job.status === "COMPLETED" || job.status === "CANCELLED" || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(job.status).toBe("COMPLETED");
    expect(job.trials.map((t) => [t.status, t.reward])).toEqual([["SCORED", 1]]);
    // the same document the CLI prints for that job
    expect(job).toEqual(JSON.parse(evolve(["job", "show", doc.id, "--json"]).stdout));
    // a flag run does not have is refused before anything is recorded
    const bad = await fetch(`${base}/jobs`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ "no-such-flag": 1 }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("run_config_key_unknown");
  }, 240_000);
});
