/**
 * The evolver's verbs as a user types them (`evolve harness scaffold|screen|round|install|genebank show|eval`): the
 * table of gates and statistics, the dry run's counts, the limits, one-line errors with their codes, and the help
 * texts carrying the honest limits. A project whose runner is a shell command answering from PLANNING.md.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";


const repo = resolve(__dirname, "..");
const host = cliHost();
afterAll(() => host.close());
let home: string;
let project: string;

const evolve = (...args: string[]) => host.run(args, { cwd: project, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeoutMs: 60_000 });

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-cli-home-"));
  project = mkdtempSync(join(tmpdir(), "evolve-cli-project-"));
  mkdirSync(join(project, ".agent", "harness"), { recursive: true });
  writeFileSync(join(project, ".agent", "harness", "PLANNING.md"), "Be careful.\n");
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
  for (const i of [1, 2, 3]) writeFileSync(join(project, "evolve", "evals", `t${i}.json`), JSON.stringify({ id: `t${i}`, domain: "echo", prompt: `say ok${i}`, check: { contains: `ok${i}` } }));
  // answers the card (the prompt's second word) only when PLANNING.md says FIX; prints PLANNING.md as its transcript
  const agent = join(project, "agent.sh");
  writeFileSync(agent, `#!/bin/sh\ncat "$1/harness/PLANNING.md" >&2\nif grep -q FIX "$1/harness/PLANNING.md"; then echo "$2" | cut -d' ' -f2; else echo nope; fi\n`);
  writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "command", command: `sh ${agent} {agent_root} {prompt}`, timeout_sec: 30 }));
});

describe("evolve harness", () => {
  it("help texts state the honest limits", () => {
    for (const cmd of ["screen", "round", "scaffold", "eval"]) {
      const r = evolve("harness", cmd, "--help");
      const text = r.stdout.replace(/\s+/g, " ");
      expect(text, cmd).toContain("two cards are a smoke test, not evidence");
      expect(text, cmd).toContain("anything a task writes outside .agent/ leaks between runs");
      expect(text, cmd).toContain("The evolver proposes nothing by itself");
    }
  });

  it("scaffold, dry run, round with its table, gene bank, install and undo", () => {
    const s = evolve("harness", "scaffold", "--where", "prompt", "--pathology", "wrong", "--hypothesis", "say FIX", "--marker", "FIX");
    expect(s.code, s.stderr).toBe(0);
    const id = /candidate (c-\S+)/.exec(s.stdout)![1];
    writeFileSync(join(project, "evolve", "candidates", id, "files", "harness", "PLANNING.md"), "Be careful. FIX\n");

    const dry = evolve("harness", "round", "--on-host", "--dry-run");
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/round 1 would run 6 rollouts at most/);
    expect(dry.stdout).toMatch(/screen\s+6\s+\(1 candidates \+ 1 parents\) × 3 tasks/);
    expect(readdirSync(join(project, "evolve"))).not.toContain("rounds");

    const r = evolve("harness", "round", "--on-host");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/CANDIDATE\s+PARENT\s+VALID\s+ACTIVE\s+GAIN\s+t\s+MEAN\s+95% CI\s+SIGN p\s+RESULT\s+ROLLOUTS\s+WALL\s+COST/);
    expect(r.stdout).toMatch(new RegExp(`${id}\\s+live\\s+pass\\s+pass\\s+pass\\s+\\+inf\\s+1\\.000\\s+\\[1\\.000, 1\\.000\\]\\s+0\\.2500\\s+passed\\s+3`));
    expect(r.stdout).toContain(`confirmed ${id}`);
    expect(r.stdout).toContain("limit: overlays are copies of .agent/");

    const gb = evolve("harness", "genebank", "show");
    expect(gb.stdout).toMatch(new RegExp(`prompt\\s+wrong\\s+${id}\\s+1\\.000\\s+1\\s+live → ${id}`));

    // 3 wins of 3 pass the seed's t gate (t = +inf), but the exact sign test cannot go below p = 0.25: said, recorded
    expect(r.stdout).toContain(`${id} sign test: n = 3 pairs: the exact sign test cannot reach p < 0.05 below 6 pairs (here p = 0.25): weak evidence`);
    expect(r.stdout).toContain("limit: n = 3: below 6 pairs the exact sign test cannot reach p < 0.05");
    const screenRec = JSON.parse(readFileSync(join(project, "evolve", "screens", "round-1", "screen.json"), "utf8"));
    expect(screenRec.candidates[0].sign_test).toMatchObject({ alpha: 0.05, min_n: 6, reachable: false, significant: false });
    const strict = evolve("harness", "install", id, "--require-sign-test");
    expect([strict.code, strict.stderr.split("\n")[0]]).toEqual([1, `error[sign_test_not_significant]: candidate ${id} was confirmed in round 1 on weak evidence: n = 3 pairs: the exact sign test cannot reach p < 0.05 below 6 pairs (here p = 0.25): weak evidence`]);
    expect(readFileSync(join(project, ".agent", "harness", "PLANNING.md"), "utf8")).toBe("Be careful.\n");

    const inst = evolve("harness", "install", id);
    expect(inst.code, inst.stderr).toBe(0);
    expect(inst.stdout).toContain(`warning: ${id} was confirmed on weak evidence: n = 3 pairs`);
    expect(readFileSync(join(project, ".agent", "harness", "PLANNING.md"), "utf8")).toBe("Be careful. FIX\n");
    const ev = evolve("harness", "eval", "--on-host");
    expect(ev.stdout).toMatch(/live pass@1 1\.000 \(3\/3\)/);
    // host mode said, once, on stderr
    expect(ev.stderr.match(/--on-host: the cards run on this machine, not in a box/g)).toHaveLength(1);
    expect(evolve("harness", "install", "--undo").code).toBe(0);
    expect(readFileSync(join(project, ".agent", "harness", "PLANNING.md"), "utf8")).toBe("Be careful.\n");
  });

  it("runs no card on the host unless --on-host says so (issue 20 §6): a command runner is refused before anything is recorded", () => {
    const screensBefore = readdirSync(join(project, "evolve")).includes("screens") ? readdirSync(join(project, "evolve", "screens")) : [];
    // cards run in boxes by default (tests/evolve-cards-box.engine.test.ts); a command runner is a host program, which a box cannot run
    for (const args of [["eval"], ["screen", "c-any"], ["round"]]) {
      const r = evolve("harness", ...args);
      expect([r.code, r.stderr.split("\n")[0]], args.join(" ")).toEqual([2, `error[cards_on_host_required]: ${join(project, "evolve", "runner.json")} names a command runner ("agent": "command"): its command is a program on this machine, which cannot run in a card's box`]);
      expect(r.stderr).toContain("pass --on-host to run it on the host as you");
    }
    const screensAfter = readdirSync(join(project, "evolve")).includes("screens") ? readdirSync(join(project, "evolve", "screens")) : [];
    expect(screensAfter).toEqual(screensBefore);
    // a dry run runs nothing: it plans without the flag
    expect(evolve("harness", "round", "--dry-run").stderr).not.toContain("cards_on_host_required");
  });

  it("says what is wrong in one line with a stable code", () => {
    const none = evolve("harness", "round", "--on-host");
    expect([none.code, none.stderr.split("\n")[0]]).toEqual([2, expect.stringMatching(/^error\[screen_no_candidates\]: /)]);
    writeFileSync(join(project, "evolve", "evals", "bad.json"), JSON.stringify({ id: "bad", domain: "d", prompt: "p", check: { regex: "(" } }));
    const bad = evolve("harness", "eval", "--on-host");
    expect(bad.code).toBe(1);
    expect(bad.stderr.split("\n")[0]).toMatch(/^error\[card_invalid\]: .*bad\.json: check\.regex is not a valid regular expression/);
    rmSync(join(project, "evolve", "evals", "bad.json"));
    const rounds = evolve("harness", "round", "--on-host", "--max-rounds", "0");
    expect([rounds.code, rounds.stderr.split("\n")[0]]).toEqual([2, "error[usage]: --max-rounds must be a whole number ≥ 1, got \"0\""]);
    const badId = evolve("harness", "screen", "--on-host", "--id", "../../etc", "c-nope");
    expect(badId.stderr.split("\n")[0]).toMatch(/^error\[usage\]: --id must be/);
    const unknown = evolve("harness", "screen", "--on-host", "c-nope");
    expect(unknown.stderr.split("\n")[0]).toMatch(/^error\[candidate_unknown\]: /);
  });

  it("a round stopped by SIGINT says so, and running it again resumes with the finished runs", async () => {
    const p2 = mkdtempSync(join(tmpdir(), "evolve-cli-int-"));
    mkdirSync(join(p2, ".agent", "harness"), { recursive: true });
    writeFileSync(join(p2, ".agent", "harness", "PLANNING.md"), "Be careful.\n");
    mkdirSync(join(p2, "evolve", "evals"), { recursive: true });
    for (const i of [1, 2, 3]) writeFileSync(join(p2, "evolve", "evals", `t${i}.json`), JSON.stringify({ id: `t${i}`, domain: "echo", prompt: `say ok${i}`, check: { contains: `ok${i}` } }));
    const agent = join(p2, "agent.sh");
    writeFileSync(agent, `#!/bin/sh\ngrep -q SLOW "$1/harness/PLANNING.md" && sleep 5\necho "$2" | cut -d' ' -f2\n`);
    writeFileSync(join(p2, "evolve", "runner.json"), JSON.stringify({ agent: "command", command: `sh ${agent} {agent_root} {prompt}`, timeout_sec: 30 }));
    const env = { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" };
    const s = host.run(["harness", "scaffold", "--project", p2, "--where", "prompt", "--pathology", "p", "--hypothesis", "h"], { env, cwd: p2 });
    const id = /candidate (c-\S+)/.exec(s.stdout)![1];
    writeFileSync(join(p2, "evolve", "candidates", id, "files", "harness", "PLANNING.md"), "SLOW\n");
    const child = spawn(join(repo, "node_modules", ".bin", "bun"), [join(repo, "main.ts"), "harness", "round", "--on-host", "--project", p2], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (b) => (stderr += b));
    const t0 = Date.now();
    while (!stderr.includes("live ran") && Date.now() - t0 < 20_000) await new Promise((d) => setTimeout(d, 50));
    child.kill("SIGINT");
    const code = await new Promise((d) => child.on("close", d));
    expect(code).toBe(2);
    expect(stderr).toMatch(/error\[evolve_interrupted\]: the round was interrupted; its finished runs are recorded/);
    // (the candidate made quick, so the resumed run of it takes no 15 s)
    writeFileSync(join(p2, "evolve", "candidates", id, "files", "harness", "PLANNING.md"), "fast now\n");
    const again = host.run(["harness", "round", "--on-host", "--project", p2], { env, cwd: p2 });
    expect(again.stderr).toContain("round 1 screen: live re-used");
    expect(again.stdout).toContain("round 1");
  }, 30_000);
});

