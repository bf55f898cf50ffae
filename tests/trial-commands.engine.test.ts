/**
 * `evolve trial retry|regrade|stop|logs|files|procs` end to end through the real CLI (`bun main.ts`) on real podman:
 * a finished oracle trial's kept tree, streams and archive; retry and regrade as new one-trial jobs (a regrade
 * scores from the kept files alone: the fresh box's image lacks the file the verifier checks); a live trial's box
 * read through the engine, then stopped without cancelling its job; and every error path's code and exit status.
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectDocumented } from "./support/json-docs.ts";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const FIXTURES = join(root, "fixtures", "tasks", "trials");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
let home: string;
let work: string;

function evolve(args: string[]) {
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], {
    cwd: work,
    encoding: "utf8",
    env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" },
    timeout: 240_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function json(args: string[]) {
  const r = evolve([...args, "--json"]);
  if (r.code !== 0) throw new Error(`evolve ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** Runs one fixture with the oracle and returns its trial id. */
function runFixture(dir: string): string {
  const r = evolve(["run", "-p", dir, "-a", "oracle", "--json"]);
  const settled = r.stdout.trim().split("\n").map((l) => JSON.parse(l)).filter((e) => e.kind === "trial_settled");
  expect(settled).toHaveLength(1);
  return settled[0].trial.id;
}

/** A one-line `error[CODE]` and the exit status. */
function expectError(args: string[], code: string, exit: number) {
  const r = evolve(args);
  expect(r.stderr.split("\n")[0]).toMatch(new RegExp(`^error\\[${code}\\]: `));
  expect(r.code).toBe(exit);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let okTrial: string;

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-tcmd-home-"));
  work = mkdtempSync(join(tmpdir(), "evolve-tcmd-work-"));
  if (hasPodman) okTrial = runFixture(join(FIXTURES, "oracle-ok"));
}, 240_000);

afterAll(() => {
  if (hasPodman) evolve(["gc"]);
});

describe.skipIf(!hasPodman)("a trial whose image does not build (needs podman)", () => {
  let id: string;
  beforeAll(() => {
    id = runFixture(join(FIXTURES, "build-fails"));
  }, 240_000);

  it("trial show says the phase it failed in and why, in the build's own words", () => {
    const show = evolve(["trial", "show", id]);
    expect(show.stdout).toMatch(/status {6}INFRASTRUCTURE_ERROR \(failed in build\)\n/);
    expect(show.stdout).toMatch(/exception {3}EnvironmentBuildError: building evolve-env:[0-9a-f]{24} failed \(exit 127\): RUN pip3 install requests: \/bin\/sh: 1: pip3: not found/);
    expect(json(["trial", "show", id])).toMatchObject({ failed_phase: "build", attempt_phase: "persist" });
  });

  it("the job's table shows the build's error line", () => {
    const row = evolve(["job", "show", json(["trial", "show", id]).job_id]).stdout.split("\n").find((l) => l.startsWith(id))!;
    expect(row).toMatch(/INFRASTRUCTURE_ERROR .*EnvironmentBuildError: building evolve-env:[0-9a-f]{24} failed \(exit 127\): RUN pip3 install requests: \/bin\/sh: 1: pip3: not found$/);
  });

  it("trial logs --stream setup prints the whole build output", () => {
    const setup = evolve(["trial", "logs", id, "--stream", "setup"]);
    expect(setup.code).toBe(0);
    expect(setup.stdout).toMatch(/^STEP 1\/\d+: FROM debian:bookworm-slim\n[\s\S]*STEP 4\/\d+: RUN pip3 install requests\n\/bin\/sh: 1: pip3: not found\nError: building at STEP/);
    // its box never started: the box stream says so
    const box = evolve(["trial", "logs", id, "--stream", "box"]);
    expect(box.code).toBe(1);
    expect(box.stderr).toMatch(/^error\[stream_not_recorded\]: trial \S+ has no box stream: its box never started/);
  });
});

describe.skipIf(!hasPodman)("a finished trial (needs podman)", () => {
  it("keeps the file the oracle wrote: files status, changes, ls, cat and archive read the kept tree", () => {
    const status = json(["trial", "files", "status", okTrial]);
    expect(status).toMatchObject({ source: "kept", status: "SCORED", files: 1, skipped: 0 });

    const changes = json(["trial", "files", "changes", okTrial]);
    const hello = changes.changes.find((c: { path: string }) => c.path === "/app/hello.txt");
    expect(hello).toMatchObject({ kind: "added", type: "file", size: 13 });
    // what evolve itself put in the box is left out, with the reason
    expect(changes.excluded.map((x: { path: string }) => x.path)).toEqual(expect.arrayContaining(["/logs", "/tests", "/solution"]));

    const cat = evolve(["trial", "files", "cat", okTrial, "/app/hello.txt"]);
    expect(cat).toMatchObject({ code: 0, stdout: "hello, world\n" });

    const ls = json(["trial", "files", "ls", okTrial, "/app"]);
    expect(ls.entries.map((e: { path: string }) => e.path)).toEqual(["/app/hello.txt"]);
    const keptLs = evolve(["trial", "files", "ls", okTrial, "/app"]).stdout;
    expect(keptLs).toMatch(/image holds them/);
    // the same columns as a live box's ls, paths absolute in the box as `changes` prints them
    expect(keptLs.split("\n")[0].split(/\s+/)).toEqual(["CHANGE", "TYPE", "SIZE", "MODE", "PATH"]);
    expect(keptLs.split("\n")[1]).toMatch(/^added\s+file\s+13\s+\d+\s+\/app\/hello\.txt$/);
    expect(evolve(["trial", "files", "changes", okTrial]).stdout).toMatch(/^added\s+file\s+13\s+\w+\s+\/app\/hello\.txt$/m);

    const out = join(work, "archives");
    const arch = json(["trial", "files", "archive", okTrial, "--path", "/app", "-o", out]);
    expect(existsSync(arch.file)).toBe(true);
    const listing = spawnSync("tar", ["tzf", arch.file], { encoding: "utf8" }).stdout.split("\n");
    expect(listing).toContain("app/hello.txt");
    const content = spawnSync("tar", ["xzOf", arch.file, "app/hello.txt"], { encoding: "utf8" }).stdout;
    expect(content).toBe("hello, world\n");
    // the subtree may also be given positionally, as ls and cat take it
    const positional = json(["trial", "files", "archive", okTrial, "/app", "-o", join(work, "archives-positional")]);
    expect(positional).toMatchObject({ path: "/app", source: "kept" });
    expect(spawnSync("tar", ["tzf", positional.file], { encoding: "utf8" }).stdout.split("\n")).toContain("app/hello.txt");
  });

  it("shows `-` for the oracle's spend: it metered no call", () => {
    expect(evolve(["trial", "show", okTrial]).stdout).toMatch(/^ {2}spend {7}- {2}\(0 calls\)$/m);
    expect(json(["trial", "show", okTrial])).toMatchObject({ live_spent_usd: null, agent_result: { cost_usd: null } });
  });

  it("a tampered kept tree: a link in place of a kept file is refused by name, never followed; many skipped paths read as one line per reason", () => {
    const tdir = join(home, "trials", okTrial);
    const manifestFile = join(tdir, "fs-changes.json");
    const original = readFileSync(manifestFile, "utf8");
    const kept = join(tdir, "fs", "app", "hello.txt");
    writeFileSync(join(work, "secret.txt"), "the host's secret\n");
    renameSync(kept, `${kept}.orig`);
    symlinkSync(join(work, "secret.txt"), kept);
    try {
      const cat = evolve(["trial", "files", "cat", okTrial, "/app/hello.txt"]);
      expect(cat.code).toBe(1);
      expect(cat.stderr.split("\n")[0]).toMatch(/^error\[kept_file_unreadable\]: the kept copy of \/app\/hello.txt is a link/);
      expect(cat.stdout + cat.stderr).not.toMatch(/secret/);
      expectError(["trial", "files", "archive", okTrial, "--path", "/app", "-o", join(work, "tampered")], "kept_file_unreadable", 1);

      const m = JSON.parse(original);
      m.skipped = [
        ...Array.from({ length: 500 }, (_, i) => ({ path: `/app/many/f${i}`, kind: "added", reason: "over the 20000-file cap of the kept tree" })),
        { path: "/app/big.bin", kind: "added", reason: "99999999 bytes, over the 67108864-byte cap of the kept tree" },
      ];
      writeFileSync(manifestFile, JSON.stringify(m));
      const lines = evolve(["trial", "files", "changes", okTrial]).stdout.split("\n");
      expect(lines.filter((l) => l.startsWith("not kept:"))).toEqual([
        "not kept: 500 paths, over the 20000-file cap of the kept tree (/app/many/f0, /app/many/f1, /app/many/f2, …)",
        "not kept: /app/big.bin: 99999999 bytes, over the 67108864-byte cap of the kept tree",
      ]);
      expect(lines).toContain(`every path not kept, by name: evolve trial files changes ${okTrial} --json | jq -r '.skipped[].path'`);
      expect(json(["trial", "files", "changes", okTrial]).skipped).toHaveLength(501);
    } finally {
      writeFileSync(manifestFile, original);
      renameSync(`${kept}.orig`, kept);
    }
  });

  it("prints the verifier, system, agent, setup and box streams; metrics is an empty page that says why", () => {
    const v = evolve(["trial", "logs", okTrial, "--stream", "verifier"]);
    expect(v.code).toBe(0);
    expect(v.stdout).toBe(readFileSync(join(home, "trials", okTrial, "verifier", "test-stdout.txt"), "utf8"));
    expect(v.stdout).toMatch(/checking \/app\/hello.txt/);
    expect(evolve(["trial", "logs", okTrial, "--stream", "system"]).stdout).toMatch(/verifier: \{"reward":1\}/);
    expect(json(["trial", "logs", okTrial, "--stream", "agent"])).toMatchObject({ recorded: true, files: [expect.stringMatching(/agent\/oracle\.txt$/)] });
    // the build's output (or, for an image an earlier run built, a line saying no build ran)
    const setup = evolve(["trial", "logs", okTrial, "--stream", "setup"]);
    expect(setup.code).toBe(0);
    expect(setup.stdout).toBe(readFileSync(join(home, "trials", okTrial, "setup.log"), "utf8"));
    expect(setup.stdout).toMatch(/^STEP 1\/\d+: FROM debian:bookworm-slim$|^evolve: image evolve-env:[0-9a-f]{24} is cached/m);
    // the oracle-ok box's entrypoint prints nothing: an empty, recorded stream
    expect(json(["trial", "logs", okTrial, "--stream", "box"])).toMatchObject({ recorded: true, text: "" });
    const metrics = evolve(["trial", "logs", okTrial, "--stream", "metrics"]);
    expect(metrics).toMatchObject({ code: 0, stdout: "" });
    expect(metrics.stderr).toMatch(/not recorded today/);
    // --follow on a settled trial prints the stream and ends
    expect(evolve(["trial", "logs", okTrial, "--stream", "verifier", "--follow"])).toMatchObject({ code: 0, stdout: v.stdout });
  });

  it("retry runs the same task as a new job holding one new trial", () => {
    const r = json(["trial", "retry", okTrial]);
    expectDocumented("trial retry", [r]);
    expect(r).toMatchObject({ retry_of: okTrial, status: "SCORED", reward: 1 });
    const orig = json(["trial", "show", okTrial]);
    const again = json(["trial", "show", r.trial_id]);
    expect(r.trial_id).not.toBe(okTrial);
    expect(again.job_id).not.toBe(orig.job_id);
    expect(again).toMatchObject({ task_digest: orig.task_digest, agent: "oracle", retry_of: okTrial });
    expect(json(["job", "show", again.job_id])).toMatchObject({ n_trials: 1, status: "COMPLETED" });
    expect(evolve(["trial", "show", r.trial_id]).stdout).toMatch(new RegExp(`^ {2}retry of {4}${okTrial}$`, "m"));
  });

  it("regrade re-scores from the kept files only (no agent runs) and gives the same reward", () => {
    const r = json(["trial", "regrade", okTrial]);
    expectDocumented("trial regrade", [r]);
    expect(r).toMatchObject({ regrade_of: okTrial, status: "SCORED", reward: 1 });
    const t = json(["trial", "show", r.trial_id]);
    expect(t.regrade_of).toBe(okTrial);
    expect(Object.keys(t.phase_timings)).not.toContain("agent");
    const dir = join(home, "trials", r.trial_id);
    expect(existsSync(join(dir, "agent"))).toBe(false);
    expect(readFileSync(join(dir, "verifier", "test-stdout.txt"), "utf8")).toMatch(/checking/);
    expect(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")).regrade_of).toBe(okTrial);
    // it says which stored task and verifier it used, and trial show names the trial it came from
    const digest = json(["trial", "show", okTrial]).task_digest;
    expect(r).toMatchObject({ task_digest: digest, verifier: { script: "tests/test.sh", mode: "shared" } });
    const text = evolve(["trial", "regrade", okTrial]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`  task evolve-trials/oracle-ok ${digest}\n`);
    expect(text.stdout).toMatch(new RegExp(`^ {2}verifier tests/test.sh of that stored task \\(shared mode, ${join(home, "tasks")}\\S*/tests\\), on trial ${okTrial}'s kept files$`, "m"));
    expect(evolve(["trial", "show", r.trial_id]).stdout).toMatch(new RegExp(`^ {2}regrade of {2}${okTrial}$`, "m"));
  });

  it("a regrade's verifier runs in a box like the original's: the same pids cap, user namespace and network", () => {
    // regrade is a plan of the trial runner, so its box is made by the runner's one rule; the copy it replaced made
    // its own box, which had no pids cap, no user namespace and the engine's default network
    const task = join(work, "box-facts");
    cpSync(join(FIXTURES, "oracle-ok"), task, { recursive: true });
    writeFileSync(join(task, "task.toml"), readFileSync(join(task, "task.toml"), "utf8").replace('name = "evolve-trials/oracle-ok"', 'name = "evolve-trials/box-facts"'));
    writeFileSync(
      join(task, "tests", "test.sh"),
      [
        "#!/bin/bash",
        // cgroup v2, else v1's pids controller
        'echo "pids $(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || echo none)"',
        'echo "uid_map $(tr -s " " < /proc/self/uid_map)"',
        'while read -r _ dest gw _; do [ "$dest" = 00000000 ] && echo "gateway $gw"; done < /proc/net/route',
        "echo 1 > /logs/verifier/reward.txt",
        "",
      ].join("\n"),
    );
    const orig = runFixture(task);
    const r = json(["trial", "regrade", orig]);
    expect(r).toMatchObject({ regrade_of: orig, status: "SCORED", reward: 1 });
    const facts = (id: string) => readFileSync(join(home, "trials", id, "verifier", "test-stdout.txt"), "utf8");
    expect(facts(orig)).toMatch(/^pids \d+$/m);
    expect(facts(orig)).toMatch(/^gateway [0-9A-F]{8}$/m);
    expect(facts(r.trial_id)).toBe(facts(orig));
  });

  it("regrades a separate-verifier trial from its artifacts", () => {
    const id = runFixture(join(FIXTURES, "separate-verifier"));
    expect(json(["trial", "regrade", id])).toMatchObject({ status: "SCORED", reward: 1 });
  });

  it("refuses what it cannot do with a one-line error and the right exit status", () => {
    expectError(["trial", "show", "NOPE"], "trial_not_found", 2);
    expectError(["trial", "logs", "NOPE"], "trial_not_found", 2);
    expectError(["trial", "retry", "NOPE"], "trial_not_found", 2);
    expectError(["trial", "logs", okTrial, "--stream", "bogus"], "usage", 2);
    expectError(["trial", "files", "cat", okTrial, "/app/../../etc/passwd"], "path_outside_tree", 2);
    expectError(["trial", "files", "cat", okTrial, "/app/README.md"], "file_not_kept", 1);
    expectError(["trial", "procs", okTrial], "trial_not_live", 1);
    expectError(["trial", "files", "archive", okTrial, "--max-bytes", "0"], "usage", 2);
    // a trial that never booted: no verifier stream, nothing to regrade, no files
    const broken = runFixture(join(FIXTURES, "docker-image-missing"));
    expectError(["trial", "logs", broken, "--stream", "verifier"], "stream_not_recorded", 1);
    expectError(["trial", "regrade", broken], "regrade_never_verified", 1);
    expectError(["trial", "files", "ls", broken], "files_unavailable", 1);
  });
});

describe.skipIf(!hasPodman)("a live trial (needs podman)", () => {
  it("reads the running box (files, procs), follows its log to the end, and stops it without cancelling its job", async () => {
    const task = join(work, "sleeper");
    cpSync(join(FIXTURES, "oracle-ok"), task, { recursive: true });
    writeFileSync(join(task, "solution", "solve.sh"), '#!/bin/bash\necho "hello, world" > /app/hello.txt\necho started\nsleep 120\n');
    // an entrypoint that says it is up, for the box stream read live
    const dockerfile = join(task, "environment", "Dockerfile");
    writeFileSync(dockerfile, `${readFileSync(dockerfile, "utf8")}RUN printf '#!/bin/sh\\necho sleeper box up\\nexec "$@"\\n' > /start.sh && chmod +x /start.sh\nENTRYPOINT ["/start.sh"]\n`);
    writeFileSync(join(task, "task.toml"), readFileSync(join(task, "task.toml"), "utf8").replace('name = "evolve-trials/oracle-ok"', 'name = "evolve-trials/sleeper"').replace(/\[agent\]\ntimeout_sec = 60/, "[agent]\ntimeout_sec = 300"));
    const child = spawn(bun, [join(root, "main.ts"), "run", "-p", task, "-a", "oracle", "-k", "2", "-n", "2", "--json"], {
      cwd: work,
      env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let seen = "";
    child.stdout.on("data", (b) => (seen += b));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    try {
      // both trials in their agent phase, and the oracle's first file written
      const t0 = Date.now();
      let ids: string[] = [];
      for (;;) {
        const agent = [...seen.matchAll(/"kind":"phase","trial_id":"(\w+)","phase":"agent"/g)].map((m) => m[1]);
        ids = [...new Set(agent)];
        if (ids.length === 2 && ids.every((id) => existsSync(join(home, "trials", id, "agent", "oracle.txt")) && readFileSync(join(home, "trials", id, "agent", "oracle.txt"), "utf8").includes("started"))) break;
        if (Date.now() - t0 > 120_000) throw new Error(`trials never reached the agent: ${seen}`);
        await sleep(100);
      }
      const [a, b] = ids;
      const status = json(["trial", "files", "status", a]);
      expect(status).toMatchObject({ source: "live", role: "agent" });
      expectDocumented("trial files status", [status]);
      expect(evolve(["trial", "files", "cat", a, "/app/hello.txt"]).stdout).toBe("hello, world\n");
      const ls = json(["trial", "files", "ls", a, "/app"]);
      expect(ls.entries.find((e: { name: string }) => e.name === "hello.txt")).toMatchObject({ type: "file", size: 13 });
      expectDocumented("trial files ls", [ls]);
      // the live table has the kept tree's columns, and names paths absolute in the box as `changes` does
      const table = evolve(["trial", "files", "ls", a, "/app"]).stdout.split("\n");
      expect(table[0].split(/\s+/)).toEqual(["CHANGE", "TYPE", "SIZE", "MODE", "PATH"]);
      expect(table.find((l) => l.endsWith("/app/hello.txt"))).toMatch(/^added\s+file\s+13\s/);
      const changes = json(["trial", "files", "changes", a]);
      expect(changes.changes).toContainEqual({ path: "/app/hello.txt", kind: "added" });
      expectDocumented("trial files changes", [changes]);
      // the box stream while it runs: the entrypoint's output, read from the engine (box.log comes at the end)
      expect(json(["trial", "logs", a, "--stream", "box"])).toMatchObject({ trial_id: a, recorded: true, live: true, text: "sleeper box up\n" });
      const procs = json(["trial", "procs", a]);
      expect(procs.processes.map((p: { command: string }) => p.command).join("\n")).toMatch(/sleep 120/);
      expect(procs.processes.every((p: { elapsed_sec: unknown }) => typeof p.elapsed_sec === "number")).toBe(true);
      expectDocumented("trial procs", [procs]);
      const arch = json(["trial", "files", "archive", a, "--path", "/app", "-o", join(work, "live-archives")]);
      expectDocumented("trial files archive", [arch]);
      expect(spawnSync("tar", ["tzf", arch.file], { encoding: "utf8" }).stdout.split("\n")).toContain("app/hello.txt");

      // a follower of the agent stream ends on its own once the trial settles
      const follower = spawn(bun, [join(root, "main.ts"), "trial", "logs", a, "--stream", "agent", "--follow"], { cwd: work, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
      let followed = "";
      follower.stdout.on("data", (d) => (followed += d));
      const followerDone = new Promise<number | null>((r) => follower.on("exit", (c) => r(c)));

      const s0 = Date.now();
      const stop = json(["trial", "stop", a]);
      expect(stop).toEqual([{ id: a, action: "requested", status: "CANCELLED", settled: true }]);
      expect(Date.now() - s0).toBeLessThan(10_000);
      const ta = json(["trial", "show", a]);
      expect(ta).toMatchObject({ status: "CANCELLED", exception: { type: "CancelledError" } });
      expect(await followerDone).toBe(0);
      expect(followed).toMatch(/started/);

      // the job goes on: the other trial is still running, the job is not cancelled
      expect(json(["trial", "show", b]).status).toBe("RUNNING");
      const jobId = ta.job_id;
      expect(json(["job", "show", jobId]).status).toBe("RUNNING");
      expect(json(["trial", "stop", b, "--wait", "20"])[0]).toMatchObject({ status: "CANCELLED" });
      expect(await exited).toBe(1);
      expect(json(["job", "show", jobId])).toMatchObject({ status: "COMPLETED", counts: { CANCELLED: 2 } });
      // once settled, there is no box to list processes of, and stopping again does nothing
      expectError(["trial", "procs", a], "trial_not_live", 1);
      expect(json(["trial", "stop", a])[0]).toMatchObject({ action: "settled" });
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 240_000);
});
