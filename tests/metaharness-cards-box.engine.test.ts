/**
 * Issue 20 §6 (b): `evolve metaharness run --cards DIR` runs its cards in podman boxes by default, as `harness eval`
 * does (engine/eval/card-tasks.ts). A one-step run (`--max-rounds 0`: the starting adapter evaluated once, no
 * proposer session) scores each card as a trial of the conductor whose agent root is the adapter (its ADAPTER.md in
 * the planning seat: the model answers right only when it sees the adapter's marker), a `command` check reads a file
 * the model wrote in the box (the host has none), and the step's records are a trial's (input, output, score with the
 * trial id, verifier output, ATIF trajectory), as for `-d`/`-p`. run.json keeps the cards' content digest (the same
 * in either mode) and where they ran: a resume with `--on-host` is refused. No provider key lands in anything the run
 * writes. Engine tier: real podman, the built binary (`npm run build`), the scripted upstream as the model.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cardsDigest, loadCards } from "../engine/eval/evals.ts";
import { runPaths } from "../engine/metaharness/layout.ts";
import { ScriptedUpstream, type ScriptedReply } from "../fixtures/upstream/server.ts";
import { evolveCli, filesHolding } from "./support/cards-box.ts";

const ROOT = resolve(__dirname, "..");
const hasBinary = existsSync(join(ROOT, "dist", "evolve")) || Boolean(process.env.EVOLVE_BINARY);
const KEY = "sk-ant-REAL-mh-cards-box-provider-key-5b21c0";
const MARK = "MH-ADAPTER-MARK-93d1";
const MODEL = "anthropic/claude-sonnet-4-5";
const upstream = new ScriptedUpstream();
let home: string;
let dir: string;

/** `evolve ARGS` in the test's folder and home. */
const evolve = (...args: string[]) => evolveCli(dir, home, args);

beforeAll(async () => {
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-mh-cards-box-home-"));
  dir = mkdtempSync(join(tmpdir(), "evolve-mh-cards-box-"));
  writeFileSync(join(home, "gateway.toml"), `[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "${KEY}"\n`);
  mkdirSync(join(dir, "cards"));
  writeFileSync(join(dir, "cards", "c-code.json"), JSON.stringify({ id: "c-code", domain: "mh", prompt: "MH-CODE: the code?", check: { contains: "42" } }));
  writeFileSync(join(dir, "cards", "c-file.json"), JSON.stringify({ id: "c-file", domain: "mh", prompt: "MH-FILE: write beta to /app/mh-out.txt", check: { command: 'test "$(cat /app/mh-out.txt)" = beta' } }));
  mkdirSync(join(dir, "seed"));
  writeFileSync(join(dir, "seed", "ADAPTER.md"), `Answer with care. ${MARK}\n`);
  upstream.responder = (req): ScriptedReply | undefined => {
    if (req.path !== "/messages") return undefined;
    const text = JSON.stringify(req.body ?? "");
    const turn = text.split("tool_result").length - 1;
    const finish = (answer: string): ScriptedReply => ({ toolCall: { id: `call_f${turn}`, name: "finish", input: { answer } } });
    const shell = (command: string): ScriptedReply => ({ toolCall: { id: `call_s${turn}`, name: "shell", input: { command } } });
    // right only when the adapter's ADAPTER.md reached the planning seat's system prompt
    const seen = JSON.stringify(req.body?.system ?? "").includes(MARK);
    if (text.includes("MH-CODE")) return finish(seen ? "the code is 42" : "no idea");
    if (text.includes("MH-FILE")) return turn === 0 ? shell(seen ? "printf beta > /app/mh-out.txt" : "true") : finish("done");
    return { text: "no task" };
  };
}, 60_000);

afterAll(async () => {
  await upstream.close();
  for (const d of [home, dir]) if (d && !process.env.EVOLVE_TEST_KEEP) rmSync(d, { recursive: true, force: true });
});

describe("metaharness run --cards without --on-host: the cards in boxes", () => {
  const run = () => join(dir, "mh");
  const args = () => ["metaharness", "run", "--cards", join(dir, "cards"), "-a", "conductor", "-m", MODEL, "--start-from", join(dir, "seed"), "--run", run(), "--max-rounds", "0", "--proposer", "claude", "--proposer-model", MODEL, "--json"];

  it.skipIf(!hasBinary)(`evaluates the starting adapter on every card as a trial and records the step${hasBinary ? "" : " (skipped: no dist/evolve; npm run build)"}`, async () => {
    const r = await evolve(...args());
    expect(r.code, `${r.stderr.slice(-3000)}\n${r.stdout.slice(0, 3000)}`).toBe(0);
    // not host mode: no notice of it
    expect(r.stderr).not.toContain("--on-host:");
    expect(JSON.parse(r.stdout).result).toMatchObject({ finalized: "seed", mean: 1, steps: 1, rounds: 0 });

    const p = runPaths(run());
    for (const [task, prompt] of [
      ["c-code", "MH-CODE: the code?"],
      ["c-file", "MH-FILE: write beta to /app/mh-out.txt"],
    ]) {
      const t = p.stepTask(1, task);
      const score = JSON.parse(readFileSync(t.score, "utf8"));
      expect(score, task).toMatchObject({ task, score: 1, valid: true });
      // every card was a trial of the conductor, of the card's task folder
      const result = JSON.parse(readFileSync(join(home, "trials", score.trial_id, "result.json"), "utf8"));
      expect(result.task_name ?? JSON.stringify(result), task).toContain(`cards/${task}`);
      expect(result.agent_info?.name ?? JSON.stringify(result.agent_info), task).toBe("conductor");
      expect(readFileSync(t.input, "utf8"), task).toContain(prompt);
      expect(readFileSync(t.verifier, "utf8"), task).toContain("passed");
      expect(JSON.parse(readFileSync(t.trajectory, "utf8")).schema_version, task).toMatch(/^ATIF/);
      expect(existsSync(t.output), task).toBe(true);
    }
    // the command check ran in the box: the host has no file the model wrote
    expect(existsSync("/app/mh-out.txt")).toBe(false);
    // the adapter reached the conductor's planning seat (the scores above are 1 only then)
    expect(upstream.requests.some((q) => q.path === "/messages" && JSON.stringify(q.body?.system ?? "").includes(MARK))).toBe(true);

    // run.json: the cards' content digest (what a host run records too) and where they ran
    const rj = JSON.parse(readFileSync(p.runJson, "utf8"));
    expect(rj).toMatchObject({ search: "cards", isolation: "box", search_digest: cardsDigest(loadCards(dir, join(dir, "cards"))) });
    expect(readFileSync(join(p.workspace, "TASK_INFO.md"), "utf8")).toContain("runs in its own podman box");

    // no provider key in anything the run wrote, nor in its output
    expect(filesHolding(home, KEY, (x) => x === join(home, "gateway.toml"))).toEqual([]);
    expect(filesHolding(dir, KEY)).toEqual([]);
    expect(r.stdout + r.stderr).not.toContain(KEY);
  }, 900_000);

  it.skipIf(!hasBinary)("a resume with --on-host is refused: the cards ran in boxes (metaharness_run_mismatch)", async () => {
    expect(existsSync(runPaths(run()).runJson)).toBe(true);
    const r = await evolve(...args(), "--on-host");
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^error\[metaharness_run_mismatch\]: .* was started with its task cards in podman boxes, not on the host$/m);
  }, 120_000);
});
