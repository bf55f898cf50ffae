/**
 * Finding jobs: `job list` columns (KIND, NAME, MODEL), its filters and limit, `job show` by --job-name and with
 * --status, and the task selection globs of `run`. Jobs are recorded in a real store (no container runs); the
 * listings are read back through the real CLI (`bun main.ts`).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";
import { createJob, type JobConfig, type JobStatus } from "../engine/job/job.ts";
import type { TrialStatus } from "../engine/outcome.ts";
import { jobKind } from "../engine/job/summary.ts";
import { parseSince } from "../engine/job/list.ts";
import { globToRegExp, selectTasks } from "../engine/job/select.ts";
import { openStore } from "../engine/store/index.ts";
import { expectCode } from "./support/expect-code.ts";
import { jobConfig } from "./support/job-config.ts";

const root = resolve(__dirname, "..");
let home: string;

// one Bun process runs this file's calls in-process (cli-host.ts) instead of a Bun start-up per call
const host = cliHost();
afterAll(() => host.close());

function evolve(args: string[]) {
  return host.run(args, { cwd: process.cwd(), env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
}

const ids: Record<string, string> = {};

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-joblist-home-"));
  const store = openStore(home);
  const make = (key: string, c: Partial<JobConfig>, status: JobStatus, createdAt: string, dataset?: string, trialStatuses: TrialStatus[] = []) => {
    const job = createJob(store, { ...jobConfig(Math.max(1, trialStatuses.length)), ...c }, dataset);
    store.putJob({ ...job, status, created_at: createdAt });
    const trials = store.listTrials(job.id);
    store.putTrials(trials.map((t, i) => ({ ...t, status: trialStatuses[i] ?? t.status, rewards: trialStatuses[i] === "SCORED" ? { reward: 1 } : null })));
    ids[key] = job.id;
  };
  const old = new Date(Date.now() - 10 * 86_400_000).toISOString();
  const recent = new Date(Date.now() - 3_600_000).toISOString();
  // an old job from before kinds were kept: no kind in its config
  make("legacy", {}, "COMPLETED", old, undefined, ["SCORED"]);
  make("smoke", { kind: "run", name: "smoke", agent: { name: "nop", model: "anthropic/claude-x" }, source: { kind: "dataset", ref: "example@1.0" } }, "COMPLETED", recent, "example@1.0", ["SCORED", "SCORING_ERROR", "CANCELLED"]);
  make("check", { kind: "check", source: { kind: "dataset", ref: "example@2.0" } }, "CANCELLED", recent, "example@2.0");
  make("retry", { kind: "retry" }, "COMPLETED", recent);
  make("smoke2", { kind: "run", name: "smoke" }, "COMPLETED", new Date(Date.now() - 60_000).toISOString());
  for (let i = 0; i < 22; i++) make(`bulk${i}`, { kind: "run" }, "COMPLETED", new Date().toISOString());
  await store.close();
});

describe("job list", () => {
  it("shows KIND, NAME and MODEL, the newest 20 by default, and says how many it hid", () => {
    const r = evolve(["job", "list"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^JOB\s+KIND\s+NAME\s+STATUS\s+AGENT\s+MODEL\s+SOURCE\s+TRIALS\s+SCORED\s+MEAN\s+CREATED$/);
    expect(lines).toHaveLength(1 + 20 + 1);
    expect(lines.at(-1)).toBe("20 of 27 jobs shown, newest first; 7 older hidden (--limit 0 shows all)");
    const all = evolve(["job", "list", "--limit", "0"]).stdout;
    expect(all).not.toMatch(/hidden/);
    const smoke = all.split("\n").find((l) => l.startsWith(ids.smoke))!;
    expect(smoke).toMatch(/\brun\s+smoke\s+COMPLETED\s+nop\s+anthropic\/claude-x\s+example@1\.0\s+3\s+1\b/);
    expect(all.split("\n").find((l) => l.startsWith(ids.check))).toMatch(/\bcheck\s+-\s+CANCELLED\b/);
    expect(all.split("\n").find((l) => l.startsWith(ids.retry))).toMatch(/\bretry\b/);
    expect(all.split("\n").find((l) => l.startsWith(ids.legacy))).toMatch(/\brun\s+-\s+COMPLETED\b/);
  });

  it("filters by status, kind, agent, dataset, name and age, and combines them", () => {
    const list = (...a: string[]) => {
      const r = evolve(["job", "list", "--json", "--limit", "0", ...a]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      return (JSON.parse(r.stdout) as { id: string }[]).map((j) => j.id).sort();
    };
    expect(list("--status", "cancelled")).toEqual([ids.check]);
    expect(list("--kind", "check,retry")).toEqual([ids.check, ids.retry].sort());
    expect(list("--agent", "nop")).toEqual([ids.smoke]);
    expect(list("--dataset", "example")).toEqual([ids.check, ids.smoke].sort());
    expect(list("--dataset", "example@2.0")).toEqual([ids.check]);
    expect(list("--name", "smoke")).toEqual([ids.smoke, ids.smoke2].sort());
    expect(list("--since", "3d")).not.toContain(ids.legacy);
    expect(list("--since", "3d")).toHaveLength(26);
    expect(list("--since", new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10))).toHaveLength(27);
    expect(list("--kind", "run", "--since", "2d", "--name", "smoke", "--status", "COMPLETED")).toEqual([ids.smoke, ids.smoke2].sort());
    const none = evolve(["job", "list", "--agent", "nobody"]);
    expect(none.stdout.trim()).toBe("no job matches these filters");
  });

  it("keeps --json an array of rows with the new keys, and puts the hidden count on stderr", () => {
    const r = evolve(["job", "list", "--json", "--limit", "2"]);
    const rows = JSON.parse(r.stdout);
    expect(rows).toHaveLength(2);
    expect(Object.keys(rows[0])).toEqual(expect.arrayContaining(["id", "kind", "name", "status", "agent", "model", "source", "n_trials", "counts", "mean_reward", "created_at"]));
    expect(r.stderr.trim()).toBe("2 of 27 jobs shown, newest first; 25 older hidden (--limit 0 shows all)");
  });

  it("refuses a filter value it does not know, as a usage error", () => {
    for (const args of [["--status", "DONE"], ["--kind", "rerun"], ["--since", "yesterday"], ["--limit", "-1"]]) {
      const r = evolve(["job", "list", ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(/^error\[usage\]: /);
    }
  });
});

describe("job show", () => {
  it("finds a job by its --job-name (the newest with it), and names it", () => {
    const r = evolve(["job", "show", "smoke", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: ids.smoke2, name: "smoke", kind: "run" });
    expect(evolve(["job", "show", ids.smoke]).stdout.split("\n")[0]).toMatch(new RegExp(`^job ${ids.smoke} smoke  run  COMPLETED  nop`));
    const missing = evolve(["job", "show", "no-such-name"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error\[job_not_found\]/);
  });

  it("--status lists only the trials in those statuses, keeping the whole job's counts", () => {
    const r = evolve(["job", "show", ids.smoke, "--status", "SCORING_ERROR"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/trials 3: SCORED 1, SCORING_ERROR 1, CANCELLED 1/);
    const rows = r.stdout.split("\n").filter((l) => /^\S{10,}\s+t\d\s/.test(l));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(/SCORING_ERROR/);
    expect(r.stdout).toMatch(/1 of 3 trials shown \(SCORING_ERROR\)/);
    const json = JSON.parse(evolve(["job", "show", ids.smoke, "--status", "scored,cancelled", "--json"]).stdout);
    expect(json.trials.map((t: { status: string }) => t.status).sort()).toEqual(["CANCELLED", "SCORED"]);
    expect(json.n_trials).toBe(3);
    const bad = evolve(["job", "show", ids.smoke, "--status", "FAILED"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^error\[usage\]: --status FAILED: expected one of QUEUED, RUNNING, SCORING, SCORED/);
    // every status the store knows, INTERRUPTED included (a list of its own here once left it out)
    expect(evolve(["job", "show", ids.smoke, "--status", "INTERRUPTED"]).code).toBe(0);
  });
});

describe("job kinds of older jobs", () => {
  it("reads retry and regrade from the trial's lineage when the config has no kind", () => {
    const job = { id: "J", created_at: "", status: "COMPLETED" as const, config: jobConfig() };
    const trial = { id: "T", job_id: "J", task_digest: "d", agent: "oracle", status: "SCORED" as const, phase_timings: {}, created_at: "", updated_at: "" };
    expect(jobKind(job, [trial])).toBe("run");
    expect(jobKind(job, [{ ...trial, retry_of: "X" }])).toBe("retry");
    expect(jobKind(job, [{ ...trial, regrade_of: "X" }])).toBe("regrade");
    expect(jobKind({ ...job, config: { ...jobConfig(), kind: "check" } }, [{ ...trial, retry_of: "X" }])).toBe("check");
  });
});

describe("--since", () => {
  it("takes an age or an ISO date or time", () => {
    const now = Date.parse("2026-06-10T00:00:00Z");
    expect(parseSince("2h", now)).toBe(now - 7_200_000);
    expect(parseSince("3d", now)).toBe(now - 3 * 86_400_000);
    expect(parseSince("1w", now)).toBe(now - 7 * 86_400_000);
    expect(parseSince("2026-06-01", now)).toBe(Date.parse("2026-06-01T00:00:00Z"));
    expect(parseSince("2026-06-01T12:30:00Z", now)).toBe(Date.parse("2026-06-01T12:30:00Z"));
    for (const bad of ["", "2", "2y", "last week", "06/01/2026"]) expect(() => parseSince(bad, now), bad).toThrow(/--since/);
  });
});

describe("task selection (--task-name / --exclude-task-name / -l)", () => {
  const tasks = ["acme/hello", "acme/hello-slow", "acme/world", "other/hello"].map((name) => ({ name }));
  const names = (sel: Parameters<typeof selectTasks>[1]) => selectTasks(tasks, sel).map((t) => t.name);

  it("keeps tasks matching any include glob, drops those matching an exclude glob, then takes the first N", () => {
    expect(names({})).toEqual(tasks.map((t) => t.name));
    expect(names({ include: ["acme/*"] })).toEqual(["acme/hello", "acme/hello-slow", "acme/world"]);
    expect(names({ include: ["*hello*"], exclude: ["*-slow"] })).toEqual(["acme/hello", "other/hello"]);
    expect(names({ include: ["acme/world", "other/*"] })).toEqual(["acme/world", "other/hello"]);
    expect(names({ exclude: ["acme/*"], limit: 5 })).toEqual(["other/hello"]);
    expect(names({ include: ["*hello*"], limit: 1 })).toEqual(["acme/hello"]);
  });

  it("matches whole names, with ? and [sets], and treats regex characters literally", () => {
    expect(globToRegExp("acme/hell?").test("acme/hello")).toBe(true);
    expect(globToRegExp("acme/hell?").test("acme/hello-slow")).toBe(false);
    expect(globToRegExp("hello").test("acme/hello")).toBe(false);
    expect(globToRegExp("[ao]*/hello").test("other/hello")).toBe(true);
    expect(globToRegExp("[!ao]*/hello").test("other/hello")).toBe(false);
    expect(globToRegExp("a.b+(c)").test("a.b+(c)")).toBe(true);
    expect(globToRegExp("a.b").test("axb")).toBe(false);
  });

  it("refuses a selection that leaves no task, naming the globs", async () => {
    await expectCode(() => selectTasks(tasks, { include: ["nope*"] }), "job_empty");
    expect(() => selectTasks(tasks, { include: ["*"], exclude: ["*"] })).toThrow(/--task-name \*, --exclude-task-name \* \(of 4 tasks: acme\/hello/);
  });
});
