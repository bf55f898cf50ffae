/**
 * The dashboard on real jobs (issue 23 §3): where dashboard-browser.engine.test.ts reads a store built by helpers,
 * this one reads a store that `evolve run` filled on real podman: an oracle job, a CLI agent (claude-code, vendored
 * in $EVOLVE_AGENTS_DIR) against the scripted upstream on the same task, and the multi-step fixture. `evolve serve`
 * (`bun main.ts serve`) serves it to Debian's chromium through playwright-core; every page loads with no console error
 * (jobs, each job, compare of the oracle job against the agent job, each trial with its steps page and a kept file,
 * datasets), and the live trace of a claude-code trial grows while that trial runs: the upstream holds each model
 * reply until the test has seen the previous tool call on the page, so the events can only have come in live.
 * With an evolve binary for the conductor's box (dist/evolve from `npm run build`, or EVOLVE_BINARY) it also runs an
 * evolution round (`harness round` over three task cards, one scaffolded candidate, the scripted upstream as the
 * model) and loads the evolution pages; without one that part is skipped, not failed. Screenshots go under
 * `artifacts/dashboard-real/` (EVOLVE_ARTIFACTS overrides; never committed). Skips without podman, chromium or a
 * vendored claude-code.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtinSpecs } from "../engine/harness/catalog.ts";
import { findVendored } from "../engine/harness/vendor.ts";
import { ScriptedUpstream, type ScriptedReply } from "../fixtures/upstream/server.ts";

const ROOT = resolve(__dirname, "..");
const BUN = join(ROOT, "node_modules/.bin/bun");
const CHROMIUM = process.env.EVOLVE_CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = resolve(process.env.EVOLVE_ARTIFACTS ?? join(ROOT, "artifacts"), "dashboard-real");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];
const MODEL = "anthropic/claude-sonnet-4-5";
const WRITE = "printf 'hello, world' > /app/hello.txt";

/** The evolve binary the conductor runs in its box; the evolution round needs one. */
const BINARY = process.env.EVOLVE_BINARY || (existsSync(join(ROOT, "dist", "evolve")) ? join(ROOT, "dist", "evolve") : undefined);
const claude = builtinSpecs().find((s) => s.name === "claude-code");
const agentsDir = process.env.EVOLVE_AGENTS_DIR;
const ready =
  spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0 &&
  existsSync(CHROMIUM) &&
  claude !== undefined &&
  agentsDir !== undefined &&
  findVendored(claude.name, claude.vendor.packages[0].version, agentsDir) !== undefined;

const upstream = new ScriptedUpstream();
let home: string;
let task: string;
let serve: ChildProcess | undefined;
let browser: Browser;
let context: BrowserContext;
let base = "";

interface Ran {
  job: string;
  trials: string[];
  /** Each settled trial's status and reward, in the order they settled. */
  scores: [string, number | null][];
}
const jobs: Record<"oracle" | "agent" | "multi", Ran> = {} as never;
/** The evolution project and its one candidate, when a round ran. */
let project = "";
let candidate = "";

/** The environment every evolve process here gets: this test's home, the vendored agents, no colour. */
const env = () => ({ ...process.env, EVOLVE_HOME: home, EVOLVE_AGENTS_DIR: agentsDir!, NO_COLOR: "1", ...(BINARY ? { EVOLVE_BINARY: BINARY } : {}) });

/**
 * Starts `evolve <args>` (async: the scripted upstream answers from this process, so a blocking spawn would hang
 * the agent). `onLine` sees each JSON line of stdout as it comes.
 */
function evolve(args: string[], onLine: (doc: Record<string, unknown>) => void = () => {}): { child: ChildProcess; done: Promise<{ code: number | null; stderr: string }> } {
  const child = spawn(BUN, [join(ROOT, "main.ts"), ...args], { cwd: home, env: env(), stdio: ["ignore", "pipe", "pipe"] });
  let buf = "";
  let stderr = "";
  child.stdout!.on("data", (b) => {
    buf += b;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        onLine(JSON.parse(line));
      } catch {
        // a line that is not a document (serve's banner)
      }
    }
  });
  child.stderr!.on("data", (b) => (stderr += b));
  return { child, done: new Promise((ok) => child.on("close", (code) => ok({ code, stderr }))) };
}

/** `evolve run … --json` to the end: the job's id and its trials' ids, from the lines it streams. */
/** `evolve <args>` to the end: its exit code and stdout. */
async function finish(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const e = evolve(args);
  let stdout = "";
  e.child.stdout!.on("data", (b) => (stdout += b));
  return { ...(await e.done), stdout };
}

/**
 * An evolve project with three task cards and one scaffolded candidate whose prompt carries a marker, then one
 * `harness round` on it: the model (the upstream) answers every card right and echoes the marker, so the screen
 * passes validity and activation and rejects the candidate on paired gain, as a round with nothing to gain does.
 */
async function evolutionRound(): Promise<void> {
  project = join(home, "project");
  expect((await finish(["harness", "init", project])).code).toBe(0);
  const made = await finish(["harness", "scaffold", "--project", project, "--where", "prompt", "--pathology", "premature_finish", "--hypothesis", "a checklist before finish", "--marker", "CHECKLIST:", "--json"]);
  expect(made.code, made.stderr).toBe(0);
  candidate = (JSON.parse(made.stdout) as { id: string }).id;
  const files = join(project, "evolve", "candidates", candidate, "files");
  const md = (readdirSync(files, { recursive: true }) as string[]).find((f) => f.endsWith(".md"))!;
  appendFileSync(join(files, md), "\nCHECKLIST: check the answer before you finish.\n");
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
  for (const i of [1, 2, 3]) writeFileSync(join(project, "evolve", "evals", `t${i}.json`), JSON.stringify({ id: `t${i}`, domain: "math", prompt: `What is 6 x 7? (card ${i})`, check: { contains: "42" } }));
  upstream.responder = () => ({ text: "CHECKLIST: done. 42" });
  const round = await finish(["harness", "round", "--project", project, "-m", MODEL, "--json"]);
  upstream.responder = undefined;
  // exit 1: no candidate confirmed (nothing to gain over a parent that already scores 1)
  expect(round.code, round.stderr).toBe(1);
  expect(JSON.parse(round.stdout).rounds[0].screen_id).toBe("round-1");
}

async function run(args: string[]): Promise<Ran> {
  const ran: Ran = { job: "", trials: [], scores: [] };
  const { done } = evolve(["run", ...args, "--json"], (doc) => {
    if (doc.kind === "job" && typeof doc.job_id === "string") ran.job = doc.job_id;
    if (doc.kind === "trial_settled") {
      const t = doc.trial as { id: string; status: string; reward: number | null };
      ran.trials.push(t.id);
      ran.scores.push([t.status, t.reward]);
    }
  });
  const { code, stderr } = await done;
  expect(code, stderr).toBe(0);
  return ran;
}

/** The upstream turns that make claude-code run `command` in its shell tool, then answer. */
const shellTurns = (id: string, command: string, extra: Partial<ScriptedReply> = {}): ScriptedReply => ({ toolCall: { id, name: "Bash", input: { command, description: "run it" } }, ...extra });

beforeAll(async () => {
  if (!ready) return;
  home = mkdtempSync(join(tmpdir(), "evolve-dashboard-real-"));
  mkdirSync(ARTIFACTS, { recursive: true });
  // the agent task with an oracle solution beside it, so the oracle and the agent run the same task and compare lines up
  task = join(home, "cli-agent");
  cpSync(join(ROOT, "fixtures/tasks/agent-trials/cli-agent"), task, { recursive: true });
  mkdirSync(join(task, "solution"));
  writeFileSync(join(task, "solution/solve.sh"), `#!/bin/bash\n${WRITE}\n`, { mode: 0o755 });
  await upstream.start();
  writeFileSync(join(home, "gateway.toml"), `[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "fixture"\n`);

  jobs.oracle = await run(["-p", task, "-a", "oracle", "--job-name", "oracle-run"]);
  upstream.push(shellTurns("toolu_real_1", WRITE), { text: "Created /app/hello.txt." });
  jobs.agent = await run(["-p", task, "-a", "claude-code", "-m", MODEL, "--job-name", "agent-run"]);
  jobs.multi = await run(["-p", join(ROOT, "fixtures/tasks/valid/multi-step"), "-a", "oracle", "--job-name", "multi-step-run"]);

  if (BINARY) await evolutionRound();

  const made = await finish(["auth", "token", "create", "--json"]);
  expect(made.code).toBe(0);
  const token = JSON.parse(made.stdout).token as string;

  serve = spawn(BUN, [join(ROOT, "main.ts"), "serve", "--port", "0", ...(project ? ["--project", project] : [])], { cwd: home, env: env(), stdio: ["ignore", "pipe", "inherit"] });
  base = await new Promise<string>((done, fail) => {
    let seen = "";
    const timer = setTimeout(() => fail(new Error(`serve never listened: ${seen}`)), 30_000);
    serve!.stdout!.on("data", (b) => {
      seen += b;
      const m = /dashboard (http:\/\/\S+)\//.exec(seen);
      if (m) {
        clearTimeout(timer);
        done(m[1]!);
      }
    });
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
  context = await browser.newContext();
  const login = await context.newPage();
  await login.goto(`${base}/login`);
  await login.locator('input[name="token"]').fill(token);
  await login.getByRole("button", { name: "Log in" }).click();
  await login.waitForURL((u) => u.pathname !== "/login");
  await login.close();
}, 80_000);

afterAll(async () => {
  await browser?.close();
  serve?.kill("SIGTERM");
  await upstream.close();
  if (home) {
    spawnSync(BUN, [join(ROOT, "main.ts"), "gc"], { cwd: home, env: env(), timeout: 30_000 });
    rmSync(home, { recursive: true, force: true });
  }
});

/** A fresh page that records console errors and uncaught exceptions. */
async function open(path: string): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  const r = await page.goto(`${base}${path}`);
  expect(r?.status(), path).toBe(200);
  await page.waitForLoadState("load");
  return { page, errors };
}

describe.skipIf(!ready)("the dashboard on jobs `evolve run` made (needs podman, chromium and a vendored claude-code)", () => {
  it("ran the jobs: oracle, claude-code against the scripted upstream, and a multi-step task, each trial scored", () => {
    for (const j of Object.values(jobs)) {
      expect(j.job).not.toBe("");
      expect(j.scores).toEqual([["SCORED", 1]]);
    }
  });

  it("loads every page of them with no console error", async () => {
    const pages: [string, string][] = [
      ["jobs", "/jobs"],
      ["datasets", "/datasets"],
      ["compare", `/compare?jobs=${jobs.oracle.job},${jobs.agent.job}`],
    ];
    for (const [name, j] of Object.entries(jobs)) {
      pages.push([`job-${name}`, `/jobs/${j.job}`]);
      const t = j.trials[0]!;
      pages.push([`trial-${name}`, `/trials/${t}`], [`steps-${name}`, `/trials/${t}/steps`]);
    }
    // a file each single-step trial kept (the multi-step fixture keeps its own)
    pages.push(["file-oracle", `/trials/${jobs.oracle.trials[0]}/file?path=%2Fapp%2Fhello.txt`], ["file-agent", `/trials/${jobs.agent.trials[0]}/file?path=%2Fapp%2Fhello.txt`]);
    if (project) pages.push(["evolution", "/evolution"], ["screen", "/evolution/screens/round-1"], ["genebank", "/evolution/genebank"], ["candidate", `/evolution/candidates/${candidate}`]);
    for (const [name, path] of pages) {
      const { page, errors } = await open(path);
      await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
      expect(errors, path).toEqual([]);
      await page.close();
    }
  });

  it("shows what each job ran: the jobs by name, the agent's tool call in its trace, the kept file's bytes", async () => {
    const list = await open("/jobs");
    for (const n of ["oracle-run", "agent-run", "multi-step-run"]) expect(await list.page.locator("body").textContent()).toContain(n);
    await list.page.close();
    const trial = await open(`/trials/${jobs.agent.trials[0]}`);
    await trial.page.locator("ol.trace > li", { hasText: WRITE }).first().waitFor({ timeout: 10_000 });
    await trial.page.close();
    const file = await open(`/trials/${jobs.oracle.trials[0]}/file?path=%2Fapp%2Fhello.txt`);
    expect(await file.page.locator("main").textContent()).toContain("hello, world");
    await file.page.close();
  });

  it.skipIf(!BINARY)("shows the evolution round: its screen names the candidate and why it was rejected, the candidate's diff its marker", async () => {
    const screen = await open("/evolution/screens/round-1");
    const text = (await screen.page.locator("main").textContent()) ?? "";
    expect(text).toContain(candidate);
    expect(text).toContain("mean gain 0");
    expect(screen.errors).toEqual([]);
    await screen.page.close();
    const diff = await open(`/evolution/candidates/${candidate}`);
    expect(await diff.page.locator("main").textContent()).toContain("CHECKLIST: check the answer before you finish.");
    expect(diff.errors).toEqual([]);
    await diff.page.close();
  });

  it("compares the oracle job with the agent job on their shared task", async () => {
    const { page, errors } = await open(`/compare?jobs=${jobs.oracle.job},${jobs.agent.job}`);
    // both solved the one task: one row, no difference
    expect(await page.locator("#compare-grid td.diff").allTextContents()).toEqual(["0.000"]);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("grows a real trial's live trace while it runs, then says it settled", async () => {
    // each model reply waits for the test: a tool call is on the page before the next one exists anywhere
    let release2!: () => void;
    let release3!: () => void;
    const gate2 = new Promise<void>((r) => (release2 = r));
    const gate3 = new Promise<void>((r) => (release3 = r));
    upstream.reset();
    upstream.push(shellTurns("toolu_live_1", "echo live-tick-1"), shellTurns("toolu_live_2", `${WRITE}; echo live-tick-2`, { holdUntil: gate2 }), { text: "All done.", holdUntil: gate3 });
    let trial = "";
    const { done } = evolve(["run", "-p", task, "-a", "claude-code", "-m", MODEL, "--job-name", "live-run", "--json"], (doc) => {
      if (!trial && typeof doc.trial_id === "string") trial = doc.trial_id;
    });
    try {
      for (let i = 0; i < 200 && !trial; i++) await new Promise((r) => setTimeout(r, 100));
      expect(trial).not.toBe("");
      const { page, errors } = await open(`/trials/${trial}`);
      expect(await page.locator("#trace-state").textContent()).toBe("live");
      await page.locator("ol.trace > li", { hasText: "live-tick-1" }).first().waitFor({ timeout: 30_000 });
      const before = await page.locator("ol.trace > li[data-seq]").count();
      expect(await page.locator("ol.trace > li", { hasText: "live-tick-2" }).count()).toBe(0);
      release2();
      await page.locator("ol.trace > li", { hasText: "live-tick-2" }).first().waitFor({ timeout: 30_000 });
      expect(await page.locator("ol.trace > li[data-seq]").count()).toBeGreaterThan(before);
      await page.locator("ol.trace").scrollIntoViewIfNeeded();
      await page.screenshot({ path: join(ARTIFACTS, "trial-live.png") });
      release3();
      await page.waitForFunction(() => document.getElementById("trace-state")?.textContent === "settled", undefined, { timeout: 30_000 });
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      release2();
      release3();
    }
    expect((await done).code).toBe(0);
  }, 60_000);
});
