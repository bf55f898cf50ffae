/**
 * Job commands as a user meets them (issue 19 §4): a `--job-name` goes wherever a job id does (the newest job of
 * that name, the others named on stderr); `job cancel` counts every trial it ended, the running ones its live runner
 * stopped included; `job resume` of a cancelled job says so before anything else; a job whose every trial failed for
 * infrastructure is flagged, not a plain COMPLETED. Real store and CLI; the "runner" that stops its running trials
 * is a second process polling the store, as evolve's own runner does.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJob, type JobConfig } from "../engine/job/job.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import type { TrialStatus } from "../engine/outcome.ts";
import { cliHost } from "./support/cli-host.ts";
import { jobConfig } from "./support/job-config.ts";

const root = resolve(__dirname, "..");
let dir: string;
let n = 0;
const fresh = () => join(dir, `home-${++n}`);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "evolve-job-refs-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const host = cliHost();
afterAll(() => host.close());

function evolve(home: string, args: string[]) {
  return host.run(args, { env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
}

/** Records a job with trials in `statuses` and the job in `status`; returns its id. */
function make(store: Store, c: Partial<JobConfig>, status: "RUNNING" | "COMPLETED" | "CANCELLED" | "INTERRUPTED", statuses: TrialStatus[]): string {
  const job = createJob(store, { ...jobConfig(statuses.length), ...c });
  store.putJob({ ...store.getJob(job.id)!, status });
  store.putTrials(store.listTrials(job.id).map((t, i) => ({ ...t, status: statuses[i], rewards: statuses[i] === "SCORED" ? { reward: 1 } : null })));
  return job.id;
}

describe("a --job-name wherever a job id goes", () => {
  it("job grep, retry, cancel, resume and show take the name: the newest job of it, the others said on stderr", async () => {
    const home = fresh();
    const store = openStore(home);
    const older = make(store, { name: "nightly" }, "COMPLETED", ["SCORED"]);
    const newer = make(store, { name: "nightly" }, "CANCELLED", ["CANCELLED", "SCORED"]);
    const only = make(store, { name: "solo" }, "COMPLETED", ["SCORED"]);
    await store.close();
    const note = `job name nightly names 2 jobs: took the newest, ${newer} (older: ${older}); give an id to pick another`;

    const show = evolve(home, ["job", "show", "nightly", "--json"]);
    expect(JSON.parse(show.stdout).id).toBe(newer);
    expect(show.stderr.trim()).toBe(note);

    // grep: the job is found (no job_not_found); nothing matches in an empty trace, exit 1 like grep
    const grep = evolve(home, ["job", "grep", "nightly", "anything"]);
    expect(grep.stderr.trim()).toBe(note);
    expect(grep.code).toBe(1);

    // retry: the newer job's trials that are CANCELLED would run; --status SCORING_ERROR picks none, so no engine
    const retry = evolve(home, ["job", "retry", "nightly", "--status", "SCORING_ERROR"]);
    expect(retry.code).toBe(0);
    expect(retry.stdout.trim()).toBe(`no trial of job ${newer} is SCORING_ERROR: nothing to retry`);

    const cancel = evolve(home, ["job", "cancel", "nightly"]);
    expect(cancel.code).toBe(0);
    expect(cancel.stdout.trim()).toBe(`job ${newer} was already cancelled: nothing changed`);

    const resume = evolve(home, ["job", "resume", "nightly"]);
    expect(resume.code).toBe(2);
    expect(resume.stderr).toContain(`error[job_cancelled]: job ${newer} was cancelled`);

    // a name one job carries: no note
    const solo = evolve(home, ["job", "grep", "solo", "anything"]);
    expect(solo.stderr).toBe("");
    expect(evolve(home, ["job", "grep", "no-such-name", "x"]).stderr).toMatch(/^error\[job_not_found\]/);
  });
});

describe("job cancel and resume", () => {
  it("counts the running trials its live runner stopped, not only the queued ones", async () => {
    const home = fresh();
    const store = openStore(home);
    const id = make(store, {}, "RUNNING", ["RUNNING", "RUNNING", "QUEUED"]);
    await store.close();
    // the runner: a process of its own that, like engine/job/job.ts's, sees the job CANCELLED and settles its trials
    const script = join(dir, `runner-${n}.ts`);
    writeFileSync(
      script,
      `import { openStore } from ${JSON.stringify(join(root, "engine/store/index.ts"))};
const store = openStore(process.argv[2]);
for (;;) {
  if (store.getJob(process.argv[3])?.status === "CANCELLED") break;
  await new Promise((r) => setTimeout(r, 50));
}
await new Promise((r) => setTimeout(r, 500));
const at = new Date().toISOString();
store.putTrials(store.listTrials(process.argv[3]).filter((t) => t.status === "RUNNING").map((t) => ({ ...t, status: "CANCELLED", finished_at: at, updated_at: at })));
await store.close();
`,
    );
    const runner = spawn(join(root, "node_modules/.bin/bun"), [script, home, id], { stdio: "ignore" });
    const exited = new Promise((r) => runner.on("exit", r));
    try {
      const s = openStore(home);
      s.putJob({ ...s.getJob(id)!, runner: { pid: runner.pid!, host: hostname(), started_at: new Date().toISOString() } });
      await s.close();
      const r = evolve(home, ["job", "cancel", id]);
      expect(r.code).toBe(0);
      expect(r.stdout.split("\n")[0]).toBe(`cancelled job ${id}: 3 of 3 trials settled CANCELLED (1 queued, 2 running stopped by process ${runner.pid})`);
      await exited;
    } finally {
      runner.kill();
    }
  });

  it("job resume of a cancelled job refuses first: one coded line, nothing started", async () => {
    const home = fresh();
    const store = openStore(home);
    const id = make(store, {}, "CANCELLED", ["CANCELLED", "SCORED"]);
    await store.close();
    // the unit tier's podman and docker are stubs that fail the run if called: no engine may be opened here
    const r = evolve(home, ["job", "resume", id]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.split("\n")[0]).toMatch(new RegExp(`^error\\[job_cancelled\\]: job ${id} was cancelled: a cancelled job is not resumed$`));
    expect(r.stderr).toContain(`evolve job retry ${id}`);
  });
});

describe("a job whose every trial failed for infrastructure", () => {
  it("is flagged in job show, its --json and job list, not a plain COMPLETED", async () => {
    const home = fresh();
    const store = openStore(home);
    const infra = make(store, {}, "COMPLETED", ["INFRASTRUCTURE_ERROR", "INFRASTRUCTURE_ERROR", "INFRASTRUCTURE_ERROR"]);
    const mixed = make(store, {}, "COMPLETED", ["INFRASTRUCTURE_ERROR", "SCORED"]);
    await store.close();
    const show = evolve(home, ["job", "show", infra]);
    expect(show.stdout.split("\n")[1]).toBe(
      `all 3 trials failed for infrastructure (INFRASTRUCTURE_ERROR): nothing was measured about the agent; fix the cause (see exceptions), then \`evolve job retry ${infra}\``,
    );
    expect(evolve(home, ["job", "show", mixed]).stdout).not.toMatch(/failed for infrastructure/);
    expect(JSON.parse(evolve(home, ["job", "show", infra, "--json"]).stdout)).toMatchObject({ status: "COMPLETED", all_infrastructure_error: true });
    expect(JSON.parse(evolve(home, ["job", "show", mixed, "--json"]).stdout).all_infrastructure_error).toBe(false);
    const list = evolve(home, ["job", "list"]).stdout.split("\n");
    expect(list.find((l) => l.startsWith(infra))).toMatch(/COMPLETED \(all infra errors\)/);
    expect(list.find((l) => l.startsWith(mixed))).not.toMatch(/infra/);
  });
});
