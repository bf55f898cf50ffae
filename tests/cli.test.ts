/**
 * The CLI conventions a user and a script rely on, exercised through the real entry point: commands/entry.ts as
 * main.ts runs it, in one Bun host process for the file (tests/support/cli-host.ts), and `bun main.ts` itself where
 * a TTY or a pipe matters.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseToml } from "smol-toml";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
let home: string;
let work: string;

// one Bun process runs this file's plain calls in-process (cli-host.ts); the TTY, pipe and signal cases spawn
const host = cliHost();

function evolve(args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}) {
  return host.run(args, { cwd: opts.cwd ?? work, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "", ...opts.env } });
}

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-cli-home-"));
  work = mkdtempSync(join(tmpdir(), "evolve-cli-work-"));
});
afterAll(() => host.close());

describe("global conventions", () => {
  it("prints the package version", () => {
    const r = evolve(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`evolve ${pkg.version}`);
  });

  it("shows help with examples for the program and for a command", () => {
    const top = evolve(["--help"]);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/Examples:/);
    expect(top.stdout).toMatch(/dataset/);
    const sub = evolve(["task", "validate", "--help"]);
    expect(sub.code).toBe(0);
    expect(sub.stdout).toMatch(/--json/);
    expect(sub.stdout).toMatch(/Examples:/);
  });

  it("refuses an unknown command with exit 2 and a one-line coded error", () => {
    const r = evolve(["frobnicate"]);
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split("\n");
    expect(lines[0]).toMatch(/^error\[usage\]: unknown command 'frobnicate'/);
    expect(lines[1]).toMatch(/hint:/);
    expect(r.stderr).not.toMatch(/at .*\.ts:\d+/);
  });

  it("treats a command group without a subcommand as a usage error", () => {
    expect(evolve(["task"]).code).toBe(2);
  });

  it("reports a missing required option as a usage error", () => {
    const r = evolve(["dataset", "publish", "."]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[usage\]: required option '--name <name>'/);
  });

  it("ends quietly when its output is piped into head", () => {
    // far more output than a pipe buffer holds, so the writer really meets a closed pipe
    const invalid = join(root, "fixtures/tasks/invalid/*");
    const cmd = `"${bun}" "${join(root, "main.ts")}" task validate ${invalid} ${invalid} ${invalid} | head -n 1; exit \${PIPESTATUS[0]}`;
    const r = spawnSync("bash", ["-c", cmd], {
      encoding: "utf8",
      env: { ...process.env, EVOLVE_HOME: home },
    });
    expect(r.status).toBe(0);
    expect(r.stdout.split("\n").filter(Boolean)).toHaveLength(1);
    expect(r.stderr).toBe("");
  });

  it("uses colour on a TTY only, and never with NO_COLOR", () => {
    const dir = join(work, "color-task");
    expect(evolve(["task", "init", dir]).code).toBe(0);
    const piped = evolve(["task", "validate", dir]);
    expect(piped.stdout).not.toMatch(/\x1b\[/);
    const hasScript = spawnSync("script", ["--version"]).status === 0;
    if (!hasScript) return;
    const cmd = `"${bun}" "${join(root, "main.ts")}" task validate "${dir}"`;
    const tty = spawnSync("script", ["-qec", cmd, "/dev/null"], { encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "" } });
    expect(tty.stdout).toMatch(/\x1b\[32m/);
    const noColor = spawnSync("script", ["-qec", cmd, "/dev/null"], { encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
    expect(noColor.stdout).not.toMatch(/\x1b\[/);
  });
});

describe("task init", () => {
  it("writes a single-step task that validates", () => {
    const dir = join(work, "hello");
    const r = evolve(["task", "init", dir]);
    expect(r.code).toBe(0);
    const v = evolve(["task", "validate", dir, "--json"]);
    expect(v.code).toBe(0);
    const doc = JSON.parse(v.stdout);
    expect(doc.ok).toBe(true);
    expect(doc.tasks[0].findings.filter((f: { severity: string }) => f.severity !== "note")).toEqual([]);
    expect(readFileSync(join(dir, "task.toml"), "utf8")).toMatch(/name = "local\/hello"/);
  });

  it("writes a multi-step task that validates", () => {
    const dir = join(work, "three-steps");
    expect(evolve(["task", "init", dir, "--steps", "3", "--name", "acme/three"]).code).toBe(0);
    const v = evolve(["task", "validate", dir, "--json"]);
    expect(v.code).toBe(0);
    const toml = readFileSync(join(dir, "task.toml"), "utf8");
    expect(toml.match(/\[\[steps\]\]/g)).toHaveLength(3);
    expect(JSON.parse(v.stdout).tasks[0].name).toBe("acme/three");
  });

  it("puts a multi-step task's reward strategy at the top level, where it takes effect", () => {
    const dir = join(work, "two-steps");
    expect(evolve(["task", "init", dir, "--steps", "2"]).code).toBe(0);
    const toml = readFileSync(join(dir, "task.toml"), "utf8");
    expect(parseToml(toml).multi_step_reward_strategy).toBe("mean");
    const v = evolve(["task", "validate", dir, "--json"]);
    expect(v.code).toBe(0);
    expect(JSON.parse(v.stdout).tasks[0].findings.filter((f: { severity: string }) => f.severity !== "note")).toEqual([]);
  });

  it("never overwrites an existing directory", () => {
    const dir = join(work, "taken");
    mkdirSync(dir);
    writeFileSync(join(dir, "notes.txt"), "mine");
    const r = evolve(["task", "init", dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[task_init_exists\]/);
    expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("mine");
  });

  it("refuses a bad step count and a bad name", () => {
    expect(evolve(["task", "init", join(work, "x1"), "--steps", "two"]).stderr).toMatch(/^error\[task_init_steps_invalid\]/);
    expect(evolve(["task", "init", join(work, "x2"), "--name", "no-slash"]).stderr).toMatch(/^error\[task_name_invalid\]/);
  });
});

describe("task validate", () => {
  it("exits 1 and names the rule when a task is refused", () => {
    const dir = join(work, "latest");
    expect(evolve(["task", "init", dir]).code).toBe(0);
    const toml = readFileSync(join(dir, "task.toml"), "utf8").replace("[environment]\n", '[environment]\ndocker_image = "ubuntu:latest"\n');
    writeFileSync(join(dir, "task.toml"), toml);
    const human = evolve(["task", "validate", dir]);
    expect(human.code).toBe(1);
    expect(human.stdout).toMatch(/docker_image_latest/);
    expect(human.stdout).toMatch(/task\.toml:\d+/);
    expect(human.stdout).toMatch(/1 refused/);
    const json = JSON.parse(evolve(["task", "validate", dir, "--json"]).stdout);
    expect(json.ok).toBe(false);
    const f = json.tasks[0].findings.find((x: { code: string }) => x.code === "docker_image_latest");
    expect(f).toMatchObject({ severity: "error", file: "task.toml" });
    expect(f.line).toBeGreaterThan(0);
  });

  it("accepts --secret for a template without a default", () => {
    const dir = join(work, "secret");
    expect(evolve(["task", "init", dir]).code).toBe(0);
    const toml = readFileSync(join(dir, "task.toml"), "utf8") + '\n[environment.env]\nGITHUB_TOKEN = "${GITHUB_TOKEN}"\n';
    writeFileSync(join(dir, "task.toml"), toml);
    const without = evolve(["task", "validate", dir]);
    expect(without.code).toBe(1);
    expect(without.stdout).toMatch(/secret_required/);
    expect(without.stdout).toMatch(/--secret GITHUB_TOKEN/);
    expect(evolve(["task", "validate", dir, "--secret", "GITHUB_TOKEN"]).code).toBe(0);
  });

  it("reports a folder that is not a task with exit 1, and a path that does not exist as a usage error (exit 2)", () => {
    const empty = join(work, "empty-dir");
    mkdirSync(empty, { recursive: true });
    const notTask = evolve(["task", "validate", empty]);
    expect(notTask.code).toBe(1);
    expect(notTask.stdout).toMatch(/task_toml_missing/);
    const missing = join(work, "does-not-exist");
    const r = evolve(["task", "validate", missing]);
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/not_a_directory/);
    expect(r.stderr.split("\n")[0]).toBe(`error[usage]: ${missing}: no such directory`);
    // a file where a task folder should be is a refused task, not a usage error
    const file = join(work, "a-file");
    writeFileSync(file, "x");
    const f = evolve(["task", "validate", file]);
    expect(f.code).toBe(1);
    expect(f.stdout).toMatch(/not_a_directory/);
  });

  it("says why --strict fails when every task is ok but has warnings", () => {
    const dir = join(root, "fixtures/tasks/notes/instruction_empty");
    const r = evolve(["task", "validate", "--strict", dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/1 task, 1 ok, 0 refused \(0 errors, 1 warning/);
    expect(r.stdout).toMatch(/^failed under --strict: warnings count as failures \(1 warning in 1 task\)$/m);
    expect(evolve(["task", "validate", dir]).code).toBe(0);
  });
});

describe("dataset commands", () => {
  const valid = join(root, "fixtures/tasks/valid");

  it("publishes, lists, shows and deletes a dataset version", () => {
    const pub = evolve(["dataset", "publish", valid, "--name", "demo", "--version", "1.0", "--json"]);
    expect(pub.code).toBe(0);
    const published = JSON.parse(pub.stdout);
    expect(published.status).toBe("published");
    expect(published.dataset.tasks.length).toBeGreaterThanOrEqual(10);

    const again = JSON.parse(evolve(["dataset", "publish", valid, "--name", "demo", "--version", "1.0", "--json"]).stdout);
    expect(again.status).toBe("unchanged");

    const list = JSON.parse(evolve(["dataset", "list", "--json"]).stdout);
    expect(list).toContainEqual(expect.objectContaining({ name: "demo", version: "1.0", task_count: published.dataset.tasks.length }));
    expect(evolve(["dataset", "list"]).stdout).toMatch(/^NAME\s+VERSION\s+TASKS\s+STATUS\s+UPDATED/);

    const show = JSON.parse(evolve(["dataset", "show", "demo", "--json"]).stdout);
    const gpu = show.tasks.find((t: { name: string }) => t.name === "gpu" || /gpu/.test(t.name));
    expect(gpu.summary.gpus).toBeGreaterThan(0);
    const human = evolve(["dataset", "show", "demo@1.0"]);
    expect(human.stdout).toMatch(/AGENT TIMEOUT/);
    expect(human.stdout).toMatch(/no-network/);

    const del = evolve(["dataset", "delete", "demo@1.0", "--yes"]);
    expect(del.code).toBe(0);
    expect(del.stdout).toMatch(/deleted demo@1.0/);
    expect(JSON.parse(evolve(["dataset", "list", "--json"]).stdout)).toEqual([]);
  });

  it("refuses a publish with an invalid task, listing it, and stores nothing", () => {
    const dir = join(work, "mixed");
    mkdirSync(dir);
    expect(evolve(["task", "init", join(dir, "good")]).code).toBe(0);
    expect(evolve(["task", "init", join(dir, "bad")]).code).toBe(0);
    const toml = join(dir, "bad", "task.toml");
    writeFileSync(toml, readFileSync(toml, "utf8").replace('[environment]\n', '[environment]\nos = "windows"\n'));
    const r = evolve(["dataset", "publish", dir, "--name", "mixed", "--version", "1"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/os_unsupported/);
    expect(r.stderr).toMatch(/^error\[dataset_invalid\]/);
    expect(evolve(["dataset", "show", "mixed"]).code).toBe(2);
  });

  it("refuses new content under an existing version and keeps the stored one", () => {
    const dir = join(work, "versioned");
    mkdirSync(dir);
    expect(evolve(["task", "init", join(dir, "one")]).code).toBe(0);
    expect(evolve(["dataset", "publish", dir, "--name", "ver", "--version", "1"]).code).toBe(0);
    const before = evolve(["dataset", "show", "ver@1", "--json"]).stdout;
    writeFileSync(join(dir, "one", "instruction.md"), "Changed.\n");
    const r = evolve(["dataset", "publish", dir, "--name", "ver", "--version", "1"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/^error\[dataset_version_exists\]/);
    expect(evolve(["dataset", "show", "ver@1", "--json"]).stdout).toBe(before);
    expect(evolve(["dataset", "publish", dir, "--name", "ver", "--version", "2"]).code).toBe(0);
  });

  it("reports an unknown dataset with exit 2", () => {
    const r = evolve(["dataset", "show", "nope@9"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[dataset_not_found\]/);
  });
});

describe("configuration", () => {
  it("refuses tasks above the ceilings set in $EVOLVE_HOME/config.toml", () => {
    const cfgHome = mkdtempSync(join(tmpdir(), "evolve-cli-cfg-"));
    const dir = join(work, "four-cpus");
    expect(evolve(["task", "init", dir]).code).toBe(0);
    writeFileSync(join(dir, "task.toml"), readFileSync(join(dir, "task.toml"), "utf8").replace("cpus = 1", "cpus = 4"));
    expect(evolve(["task", "validate", dir], { env: { EVOLVE_HOME: cfgHome } }).code).toBe(0);
    writeFileSync(join(cfgHome, "config.toml"), "[ceilings]\ncpus = 2\n");
    const r = evolve(["task", "validate", dir], { env: { EVOLVE_HOME: cfgHome } });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/resources_exceed_ceiling/);
    expect(r.stdout).toMatch(/ceiling of 2/);
  });

  it("stops with a one-line environment error on a malformed config.toml", () => {
    const cfgHome = mkdtempSync(join(tmpdir(), "evolve-cli-cfg-"));
    writeFileSync(join(cfgHome, "config.toml"), "[ceilings]\ncpus = \"many\"\n");
    const r = evolve(["task", "validate", join(work, "hello")], { env: { EVOLVE_HOME: cfgHome } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[config_invalid\]: .*ceilings\.cpus/);
    writeFileSync(join(cfgHome, "config.toml"), "[ceilings\n");
    expect(evolve(["dataset", "list"], { env: { EVOLVE_HOME: cfgHome } }).stderr).toMatch(/^error\[config_invalid\]: .*not valid TOML/);
  });
});

describe("did you mean", () => {
  it("suggests the command, subcommand or flag meant, on one line, with exit 2", () => {
    const cases: [string[], RegExp, RegExp][] = [
      [["jobs", "list"], /^error\[usage\]: unknown command 'jobs'\. Did you mean 'job'\?$/, /hint: see `evolve --help`/],
      [["job", "lst"], /^error\[usage\]: unknown command 'job lst'\. Did you mean 'job list'\?$/, /hint: see `evolve job --help`/],
      [["datasets", "list"], /^error\[usage\]: unknown command 'datasets'\. Did you mean 'dataset'\?$/, /hint/],
      [["dataset", "delet", "x"], /^error\[usage\]: unknown command 'dataset delet'\. Did you mean 'dataset delete'\?$/, /hint: see `evolve dataset --help`/],
      [["run", "--job-nme", "x"], /^error\[usage\]: unknown option '--job-nme'\. Did you mean '--job-name'\?$/, /hint: see `evolve run --help`/],
    ];
    for (const [args, first, hint] of cases) {
      const r = evolve(args);
      expect(r.code, args.join(" ")).toBe(2);
      const lines = r.stderr.trim().split("\n");
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(first);
      expect(lines[1]).toMatch(hint);
    }
  });
});

describe("run -c run.toml and task selection", () => {
  let cfgDir: string;
  const write = (name: string, text: string) => {
    const f = join(cfgDir, name);
    writeFileSync(f, text);
    return f;
  };
  beforeAll(() => {
    cfgDir = join(work, "runcfg");
    mkdirSync(join(cfgDir, "tasks"), { recursive: true });
    for (const t of ["hello", "hello-slow", "world"]) expect(evolve(["task", "init", join(cfgDir, "tasks", t), "--name", `acme/${t}`]).code).toBe(0);
  });

  it("refuses an unknown key by name, listing the keys there are", () => {
    const f = write("unknown.toml", 'path = "tasks"\nagnt = "nop"\n');
    const r = evolve(["run", "-c", f]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[run_config_key_unknown\]: .*unknown\.toml: unknown key "agnt": `evolve run` has no --agnt/);
    expect(r.stderr).toMatch(/hint: keys are the flags without --: .*\bagent\b.*\bn-concurrent\b/);
    // check has no --agent: the same key is unknown there
    const c = evolve(["check", "-c", write("check.toml", 'agent = "nop"\n')]);
    expect(c.code).toBe(2);
    expect(c.stderr).toMatch(/^error\[run_config_key_unknown\]: .*"agent": `evolve check` has no --agent/);
  });

  it("refuses a value of the wrong type, a file that is not TOML, and a file that is not there", () => {
    const bad = evolve(["run", "-c", write("type.toml", 'n-concurrent = "four"\n')]);
    expect(bad.stderr).toMatch(/^error\[run_config_invalid\]: .*n-concurrent must be a number, got "four"/);
    expect(evolve(["run", "-c", write("list.toml", "secret = [1, 2]\n")]).stderr).toMatch(/^error\[run_config_invalid\]: .*secret must be a string or a list of strings/);
    expect(evolve(["run", "-c", write("engine.toml", 'engine = "lxc"\n')]).stderr).toMatch(/^error\[run_config_invalid\]: .*engine must be one of podman, docker/);
    expect(evolve(["run", "-c", write("broken.toml", "path = \n")]).stderr).toMatch(/^error\[run_config_invalid\]: .*not valid TOML/);
    const gone = evolve(["run", "-c", join(cfgDir, "absent.toml")]);
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(/^error\[run_config_invalid\]: cannot read run config/);
    // a FIFO with no writer, or a device that never ends, is refused at once rather than read
    const fifo = join(cfgDir, "run.fifo");
    execFileSync("mkfifo", [fifo]);
    for (const f of [fifo, "/dev/zero"]) {
      const r = evolve(["run", "-c", f]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^error\[run_config_invalid\]: cannot read run config .*: (not a regular file|a socket or a device)/);
    }
  });

  it("takes the file's values over the defaults, the flags' over the file's, and reads path from the file's folder", () => {
    // snake_case keys work too; n_concurrent = 0 is read (and refused by -n's own parser), so the file beat the default of 4
    const f = write("run.toml", 'path = "tasks"\nn_concurrent = 0\n');
    const fromFile = evolve(["run", "-c", f], { cwd: tmpdir() });
    expect(fromFile.code).toBe(2);
    expect(fromFile.stderr).toMatch(/^error\[run_config_invalid\]: \S*run\.toml: n_concurrent: -n must be a positive integer, got "0"/);
    const g = write("good.toml", 'path = "tasks"\nn-concurrent = 2\ntask-name = ["nope*"]\n');
    const sel = evolve(["run", "-c", g], { cwd: tmpdir() });
    expect(sel.code).toBe(2);
    expect(sel.stderr).toMatch(/^error\[job_empty\]: no task is left after --task-name nope\* \(of 3 tasks: acme\/hello, acme\/hello-slow, acme\/world\)/);
    // a flag on the command line replaces the file's list rather than adding to it
    const flag = evolve(["run", "-c", g, "-i", "none*"], { cwd: tmpdir() });
    expect(flag.stderr).toMatch(/--task-name none\* \(of 3 tasks/);
    expect(flag.stderr).not.toMatch(/nope/);
  });

  it("filters tasks by --task-name and --exclude-task-name globs before -l", () => {
    const r = evolve(["run", "-p", join(cfgDir, "tasks"), "-i", "acme/hello*", "-x", "*-slow", "-x", "acme/hello"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[job_empty\]: no task is left after --task-name acme\/hello\*, --exclude-task-name \*-slow, --exclude-task-name acme\/hello/);
    // with one task left, the run goes on to the next check (the job's size, before any engine), which counts it
    const one = evolve(["run", "-p", join(cfgDir, "tasks"), "-i", "*world", "-k", "20000"]);
    expect(one.stderr).toMatch(/^error\[job_too_large\]: the job would hold 20000 trials \(1 task × 20000 attempts\)/);
  });

  it("refuses a blank or multi-line --job-name", () => {
    for (const name of ["", "  ", "a\nb"]) {
      const r = evolve(["run", "-p", join(cfgDir, "tasks"), "--job-name", name]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^error\[usage\]: --job-name must be 1 to 128 printable characters/);
    }
  });
});

describe("dataset delete asks first and keeps a tombstone", () => {
  const hasScript = spawnSync("script", ["--version"]).status === 0;
  let dir: string;
  beforeAll(() => {
    dir = join(work, "tomb");
    mkdirSync(dir);
    expect(evolve(["task", "init", join(dir, "one")]).code).toBe(0);
    expect(evolve(["dataset", "publish", dir, "--name", "tomb", "--version", "1"]).code).toBe(0);
  });
  const onTty = (args: string, answer: string) =>
    spawnSync("script", ["-qec", `"${bun}" "${join(root, "main.ts")}" ${args}`, "/dev/null"], { encoding: "utf8", input: answer, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });

  it("refuses to delete without a terminal to ask on unless --yes, and deletes nothing", () => {
    const r = evolve(["dataset", "delete", "tomb@1"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[confirmation_required\]: dataset delete would delete tomb@1 \(1 task\) and asks first/);
    expect(r.stderr).toMatch(/hint: pass --yes/);
    expect(evolve(["dataset", "show", "tomb@1"]).code).toBe(0);
  });

  it.skipIf(!hasScript)("on a terminal deletes only on yes", () => {
    const no = onTty("dataset delete tomb@1", "n\n");
    expect(no.stdout).toMatch(/delete tomb@1 \(1 task\)\? .*\[y\/N\]/);
    expect(no.stdout).toMatch(/nothing deleted/);
    expect(evolve(["dataset", "show", "tomb@1"]).code).toBe(0);
    const yes = onTty("dataset delete tomb@1", "y\n");
    expect(yes.stdout).toMatch(/deleted tomb@1/);
    expect(evolve(["dataset", "show", "tomb@1"]).code).toBe(2);
    // put it back for the next test
    expect(evolve(["dataset", "publish", dir, "--name", "tomb", "--version", "1"]).code).toBe(0);
  });

  it("never lets a deleted name@version come back with other content; the same content restores it", () => {
    expect(evolve(["dataset", "delete", "tomb@1", "--yes"]).code).toBe(0);
    expect(JSON.parse(evolve(["dataset", "list", "--json"]).stdout).some((d: { name: string }) => d.name === "tomb")).toBe(false);
    const shown = evolve(["dataset", "show", "tomb@1"]);
    expect(shown.stderr).toMatch(/^error\[dataset_not_found\]: no dataset tomb@1 \(it was deleted /);
    const instruction = join(dir, "one", "instruction.md");
    const original = readFileSync(instruction, "utf8");
    writeFileSync(instruction, "Other content.\n");
    const other = evolve(["dataset", "publish", dir, "--name", "tomb", "--version", "1"]);
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/^error\[dataset_version_deleted\]: tomb@1 was deleted .* a deleted version is never reused with other content/);
    expect(evolve(["dataset", "show", "tomb@1"]).code).toBe(2);
    // a new version takes the new content
    expect(evolve(["dataset", "publish", dir, "--name", "tomb", "--version", "2"]).code).toBe(0);
    writeFileSync(instruction, original);
    const same = evolve(["dataset", "publish", dir, "--name", "tomb", "--version", "1", "--json"]);
    expect(same.code).toBe(0);
    expect(JSON.parse(same.stdout).status).toBe("restored");
    expect(evolve(["dataset", "show", "tomb@1"]).code).toBe(0);
  });
});

describe("store guard rails", () => {
  it("refuses a store written by a newer evolve and leaves it as it was", async () => {
    const newer = mkdtempSync(join(tmpdir(), "evolve-cli-newer-"));
    expect(evolve(["dataset", "list"], { env: { EVOLVE_HOME: newer } }).code).toBe(0);
    const { open } = await import("lmdb");
    const env = open({ path: join(newer, "store"), maxDbs: 16 });
    const meta = env.openDB("meta", { encoding: "json" });
    await meta.put("schema_version", 99);
    await env.close();
    const r = evolve(["dataset", "list"], { env: { EVOLVE_HOME: newer } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[store_too_new\]: .*schema 99/);
    expect(r.stderr).toMatch(/hint: upgrade evolve/);
    const again = open({ path: join(newer, "store"), maxDbs: 16 });
    expect(again.openDB("meta", { encoding: "json" }).get("schema_version")).toBe(99);
    await again.close();
  });

  it("reports a home it cannot use as an environment error", () => {
    const file = join(work, "not-a-dir");
    writeFileSync(file, "x");
    const r = evolve(["dataset", "list"], { env: { EVOLVE_HOME: file } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[store_unavailable\]/);
  });
});
