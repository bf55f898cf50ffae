/**
 * docs/json.md against what the commands print. Each command that runs without a container engine is run through
 * the real CLI (`bun main.ts`) on a small real store (tests/support/json-store.ts) and its `--json` keys must be
 * exactly the documented ones: a new key without docs fails here, and so does a documented key that disappears.
 * Every command of the CLI with a `--json` option must have a section; the ones that need an engine say which test
 * runs them, and their examples are checked against their tables like every other example.
 */
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";
import { buildProgram } from "../commands/cli.ts";
import { compareKeys, readDocs, sectionFor, type DocSection } from "./support/json-docs.ts";
import { makeMetaRun } from "./support/metaharness-run.ts";
import { makeJsonStore, writeEpisodes, writeEvolveProject, type JsonStoreIds } from "./support/json-store.ts";

const root = resolve(__dirname, "..");
const sections = readDocs();
let home: string;
let ids: JsonStoreIds;

// one Bun process runs this file's calls in-process (cli-host.ts) instead of a Bun start-up per call
const host = cliHost();
afterAll(() => host.close());

function evolve(args: string[], user?: string) {
  // agents are vendored into this home, never into a shared EVOLVE_AGENTS_DIR the caller may have set
  const as = user === undefined ? {} : { EVOLVE_USER: user };
  return host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: home, EVOLVE_AGENTS_DIR: join(home, "agents"), NO_COLOR: "1", ...as }, timeoutMs: 60_000 });
}

/** The documented commands run here, in this order (later ones change the store earlier ones read). */
const RUNS: { command: string; args: () => string[]; exit?: number; user?: string }[] = [
  { command: "task validate", args: () => ["task", "validate", "fixtures/tasks/valid/minimal", "fixtures/tasks/invalid/allowed_host_invalid"], exit: 1 },
  { command: "dataset publish", args: () => ["dataset", "publish", "fixtures/tasks/valid/minimal", "--name", "demo", "--version", "1.0"] },
  { command: "dataset list", args: () => ["dataset", "list"] },
  { command: "dataset show", args: () => ["dataset", "show", "demo@1.0"] },
  // a dry run: the plan of a search on the dataset just published, nothing run
  { command: "metaharness run", args: () => ["metaharness", "run", "-d", "demo@1.0", "-a", "oracle", "--start-from", join(`${metaRun()}-template`, "seed_adapter"), "--max-rounds", "2", "--proposer-model", "openai/gpt-5", "--run", join(home, "mh-dry"), "--holdout", "demo@1.0", "--dry-run"] },
  { command: "job list", args: () => ["job", "list"] },
  { command: "job show", args: () => ["job", "show", ids.doneJob] },
  { command: "trial show", args: () => ["trial", "show", ids.scored] },
  { command: "trial logs", args: () => ["trial", "logs", ids.scored, "--stream", "agent"] },
  { command: "trial trace", args: () => ["trial", "trace", ids.scored, "--tail", "1"] },
  { command: "job grep", args: () => ["job", "grep", ids.doneJob, "denied"] },
  { command: "trace export", args: () => ["trace", "export", ids.scored, "--otlp", join(home, "spans.jsonl")] },
  { command: "trial files status", args: () => ["trial", "files", "status", ids.scored] },
  { command: "trial files ls", args: () => ["trial", "files", "ls", ids.scored, "/app"] },
  { command: "trial files cat", args: () => ["trial", "files", "cat", ids.scored, "/app/out.txt"] },
  { command: "trial files changes", args: () => ["trial", "files", "changes", ids.scored] },
  { command: "trial files archive", args: () => ["trial", "files", "archive", ids.scored, "--path", "/app", "-o", join(home, "archives")] },
  { command: "trial download", args: () => ["trial", "download", ids.scored, "-o", join(home, "downloads")] },
  { command: "job download", args: () => ["job", "download", ids.doneJob, "-o", join(home, "job.tar.gz")] },
  { command: "job export", args: () => ["job", "export", ids.doneJob, "-o", join(home, "jobs")] },
  { command: "upload", args: () => ["upload", "fixtures/harbor-jobs/oracle-job"] },
  { command: "job imports", args: () => ["job", "imports"] },
  { command: "job import", args: () => ["job", "import", readdirSync(join(home, "imports")).find((n) => n.endsWith(".json"))!.slice(0, -5)] },
  { command: "trial stop", args: () => ["trial", "stop", ids.queued] },
  { command: "job cancel", args: () => ["job", "cancel", ids.openJob] },
  { command: "store backup", args: () => ["store", "backup", join(home, "backup.mdb")] },
  { command: "store verify", args: () => ["store", "verify"] },
  { command: "auth token create", args: () => ["auth", "token", "create", "--name", "laptop"] },
  { command: "auth token list", args: () => ["auth", "token", "list"] },
  { command: "auth token revoke", args: () => ["auth", "token", "revoke", JSON.parse(evolve(["auth", "token", "list", "--json"]).stdout)[0].id] },
  { command: "auth org create", args: () => ["auth", "org", "create", "acme", "--display-name", "Acme Lab"] },
  { command: "auth org invite", args: () => ["auth", "org", "invite", "acme", "--expires", "1d"] },
  { command: "auth org join", args: () => ["auth", "org", "join", JSON.parse(evolve(["auth", "org", "invite", "acme", "--json"]).stdout).token] },
  { command: "auth org use", args: () => ["auth", "org", "use", "acme"] },
  { command: "auth org members", args: () => ["auth", "org", "members", "acme"] },
  { command: "auth org invites", args: () => ["auth", "org", "invites", "acme"] },
  { command: "auth org invite", args: () => ["auth", "org", "invite", "--revoke", JSON.parse(evolve(["auth", "org", "invites", "acme", "--json"]).stdout)[0].id] },
  // someone else joins and leaves: the store's own user is acme's last owner
  { command: "auth org leave", user: "json-docs-bo", args: () => (evolve(["auth", "org", "join", JSON.parse(evolve(["auth", "org", "invite", "acme", "--json"]).stdout).token], "json-docs-bo"), ["auth", "org", "leave", "acme"]) },
  { command: "auth org create", args: () => ["auth", "org", "create", "gone"] },
  { command: "auth org delete", args: () => ["auth", "org", "delete", "gone"] },
  { command: "gateway stop", args: () => ["gateway", "stop"] },
  { command: "gateway resume", args: () => ["gateway", "resume"] },
  { command: "gateway status", args: () => ["gateway", "status"] },
  { command: "dataset delete", args: () => ["dataset", "delete", "demo@1.0", "--yes"] },
  { command: "trajectory validate", args: () => ["trajectory", "validate", "fixtures/atif/invalid/step-gap.json"], exit: 1 },
  { command: "harness init", args: () => ["harness", "init", join(home, "agent-project")] },
  { command: "agent register", args: () => ["agent", "register", "fixtures/vendor/mytool.toml"] },
  { command: "agent pull", args: () => ["agent", "pull", "mytool", "--from", "fixtures/vendor/mytool-install"] },
  { command: "agent list", args: () => ["agent", "list"] },
  { command: "agent show", args: () => ["agent", "show", "mytool", "--verify"] },
  { command: "agent export", args: () => ["agent", "export", join(home, "agents.tar"), "mytool"] },
  { command: "agent import", args: () => ["agent", "import", join(home, "agents.tar")] },
  { command: "harness diagnose", args: () => ["harness", "diagnose", "--project", join(home, "project")] },
  // the evolver's verbs on a project whose runner is a shell command echoing the prompt (tests/support/json-store.ts)
  { command: "harness scaffold", args: () => ["harness", "scaffold", "--project", evolveProject(), "--where", "prompt", "--pathology", "p", "--hypothesis", "h", "--marker", "M"] },
  { command: "harness round", args: () => ["harness", "round", "--project", evolveProject(), "--dry-run"] },
  { command: "harness screen", args: () => ["harness", "screen", "--on-host", "--project", evolveProject()], exit: 1 },
  { command: "harness round", args: () => ["harness", "round", "--on-host", "--project", evolveProject(), "--holdout", join(evolveProject(), "evolve", "evals")], exit: 1 },
  { command: "harness genebank show", args: () => ["harness", "genebank", "show", "--project", evolveProject()] },
  { command: "harness eval", args: () => ["harness", "eval", "--on-host", "--project", evolveProject()] },
  { command: "harness install", args: () => ["harness", "install", "--project", evolveProject(), "--force", evolveCandidate()] },
  { command: "harness install", args: () => ["harness", "install", "--project", evolveProject(), "--undo"] },
  // a Meta-Harness Adapter run made through the engine's state machine (tests/support/metaharness-run.ts)
  { command: "metaharness check-spec", args: () => ["metaharness", "check-spec", join(metaRun(), "workspace", "scratch", "candidates", "c2"), "--template", `${metaRun()}-template`], exit: 1 },
  { command: "metaharness status", args: () => ["metaharness", "status", metaRun()] },
  { command: "metaharness finalize", args: () => ["metaharness", "finalize", metaRun(), "--out", join(home, "mh-best")] },
];

const metaRun = () => join(home, "mh-run");

const evolveProject = () => join(home, "evolve-project");
const evolveCandidate = () => readdirSync(join(evolveProject(), "evolve", "candidates")).filter((n) => !n.startsWith("."))[0];

/** `trial files ls` for every command of the CLI that takes `--json`. */
function jsonCommands(cmd: Command, prefix: string[] = []): string[] {
  const found: string[] = [];
  for (const sub of cmd.commands) {
    const name = [...prefix, sub.name()];
    if (sub.options.some((o) => o.long === "--json")) found.push(name.join(" "));
    found.push(...jsonCommands(sub, name));
  }
  return found;
}

const describeDiff = (s: DocSection, d: { undocumented: string[]; missing: string[] }) =>
  `docs/json.md "${s.heading}": printed but not documented: [${d.undocumented.join(", ")}]; documented but missing: [${d.missing.join(", ")}]`;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-json-docs-"));
  ids = await makeJsonStore(home);
  writeEpisodes(join(home, "project"));
  writeEvolveProject(evolveProject());
  makeMetaRun(metaRun());
});

describe("docs/json.md", () => {
  it("has a section for every command that takes --json, and a way to check each", () => {
    const commands = jsonCommands(buildProgram("0", () => {}));
    expect(commands.length).toBeGreaterThan(20);
    const ran = new Set(RUNS.map((r) => r.command));
    for (const c of commands) {
      const s = sectionFor(sections, c);
      expect(s, `docs/json.md has no section \`evolve ${c} --json\``).toBeDefined();
      // not run here: it must name the engine test that runs it
      if (!ran.has(c)) expect(s!.text, `docs/json.md "${s!.heading}" is not run here; say which test runs it`).toMatch(/container\s+engine/);
    }
    for (const s of sections.filter((x) => x.command)) expect(commands, `docs/json.md documents ${s.heading}, which the CLI does not have`).toContain(s.command);
  });

  it("gives every section an example that has exactly its documented keys", () => {
    for (const s of sections) {
      if (s.command) expect(s.examples.length, `docs/json.md "${s.heading}" has no example`).toBeGreaterThan(0);
      for (const docs of s.examples) {
        const d = compareKeys(sections, s, docs);
        expect(d, describeDiff(s, d)).toEqual({ undocumented: [], missing: [] });
      }
    }
  });

  it("prints exactly the documented keys, command by command", () => {
    for (const r of RUNS) {
      const s = sectionFor(sections, r.command);
      expect(s, `docs/json.md has no section \`evolve ${r.command} --json\``).toBeDefined();
      const res = evolve([...r.args(), "--json"], r.user);
      expect(res.code, `evolve ${r.command} --json: ${res.stderr}`).toBe(r.exit ?? 0);
      const doc = JSON.parse(res.stdout);
      const d = compareKeys(sections, s!, [doc]);
      expect(d, describeDiff(s!, d)).toEqual({ undocumented: [], missing: [] });
    }
  });

  it("catches a key that is not documented, and a documented one that is missing", () => {
    const s = sectionFor(sections, "job cancel")!;
    expect(compareKeys(sections, s, [{ id: "J", cancelled: 0, runnerPid: null, stopping: 0 }])).toEqual({ undocumented: ["runnerPid"], missing: ["runner_pid"] });
    const show = sectionFor(sections, "job show")!;
    const d = compareKeys(sections, show, [{ ...(show.examples[0][0] as object), trials: [{ id: "T", trialId: "T" }] }]);
    expect(d.undocumented).toEqual(["trials[].trialId"]);
    expect(d.missing).toContain("trials[].job_id");
  });
});
