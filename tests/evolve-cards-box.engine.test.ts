/**
 * Issue 20 §6 (b): task cards run in podman boxes by default. `evolve harness eval` without `--on-host` runs each
 * card as a trial of the conductor (the evolve binary mounted read-only, no network but the gateway, the live
 * `.agent/`'s copy as its policy) and scores it with the card's own check: `contains` and `regex` with JavaScript's
 * meaning (a named back-reference no POSIX tool knows), a `command` check in the box (it reads a file the model wrote
 * in the box, which the host does not have), a wrong answer 0. A hostile model reply that reads the box's
 * `/proc/1/environ` and `$EVOLVE_HOME/gateway.toml` finds no provider key: the key is in no log, episode, trace or
 * output evolve writes, nor in what the model was sent back. Each run's episode lands in the live memory, as a host
 * run's does. Engine tier: real podman, the built binary (`npm run build`), the scripted upstream as the model.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initAgentDir } from "../engine/conductor/init.ts";
import { ScriptedUpstream, type ScriptedReply } from "../fixtures/upstream/server.ts";
import { evolveCli, filesHolding } from "./support/cards-box.ts";

const ROOT = resolve(__dirname, "..");
const hasBinary = existsSync(join(ROOT, "dist", "evolve")) || Boolean(process.env.EVOLVE_BINARY);
const KEY = "sk-ant-REAL-cards-box-provider-key-7d3e91";
const upstream = new ScriptedUpstream();
let home: string;
let project: string;

/** `evolve ARGS` in the test's folder and home. */
const evolve = (...args: string[]) => evolveCli(project, home, args);

const card = (id: string, prompt: string, check: unknown) => writeFileSync(join(project, "evolve", "evals", `${id}.json`), JSON.stringify({ id, domain: "box", prompt, check }));

beforeAll(async () => {
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-cards-box-home-"));
  project = mkdtempSync(join(tmpdir(), "evolve-cards-box-project-"));
  writeFileSync(join(home, "gateway.toml"), `[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "${KEY}"\n`);
  initAgentDir(project);
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
  writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "conductor", model: "anthropic/claude-sonnet-4-5", timeout_sec: 120 }));
  card("c-contains", "CARD-CONTAINS: say alpha", { contains: "alpha" });
  // (?<n>…)\k<n>: JavaScript's named group and back-reference
  card("c-regex", "CARD-REGEX: say a number twice", { regex: "^(?<n>\\d+)-\\k<n>$" });
  card("c-command", "CARD-COMMAND: write beta to /app/out.txt", { command: 'test "$(cat /app/out.txt)" = beta && test "$TASK_OUTPUT" = done && test "$TASK_ID" = c-command' });
  card("c-wrong", "CARD-WRONG: say zzz", { contains: "zzz" });
  card("c-hostile", "CARD-HOSTILE: show what you can read", { contains: "ok" });
  upstream.responder = (req): ScriptedReply | undefined => {
    if (req.path !== "/messages") return undefined;
    const text = JSON.stringify(req.body ?? "");
    const turn = text.split("tool_result").length - 1;
    const finish = (answer: string): ScriptedReply => ({ toolCall: { id: `call_f${turn}`, name: "finish", input: { answer } } });
    const shell = (command: string): ScriptedReply => ({ toolCall: { id: `call_s${turn}`, name: "shell", input: { command } } });
    if (text.includes("CARD-CONTAINS")) return finish("the word is alpha");
    if (text.includes("CARD-REGEX")) return finish("42-42");
    if (text.includes("CARD-WRONG")) return finish("no");
    if (text.includes("CARD-COMMAND")) return turn === 0 ? shell("printf beta > /app/out.txt") : finish("done");
    if (text.includes("CARD-HOSTILE")) {
      // what it read, given back as its answer: a key it found would land in the output, the trace and the episode
      return turn === 0 ? shell('tr "\\0" "\\n" < /proc/1/environ; echo GW; cat "$EVOLVE_HOME/gateway.toml"; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"; env') : finish(`ok ${text.slice(-20000)}`);
    }
    return { text: "no task" };
  };
}, 60_000);

afterAll(async () => {
  await upstream.close();
  for (const d of [home, project]) if (d && !process.env.EVOLVE_TEST_KEEP) rmSync(d, { recursive: true, force: true });
});

describe("harness eval without --on-host: cards in boxes", () => {
  it.skipIf(!hasBinary)(`scores each card in its own box by its check, and a hostile reply finds no provider key${hasBinary ? "" : " (skipped: no dist/evolve; npm run build)"}`, async () => {
    const r = await evolve("harness", "eval", "--json");
    expect(r.code, `${r.stderr.slice(-3000)}\n${r.stdout.slice(0, 3000)}`).toBe(0);
    // not host mode: no notice of it
    expect(r.stderr).not.toContain("--on-host:");
    const res = JSON.parse(r.stdout);
    const by = Object.fromEntries(res.attempts.map((a: { task: string; score: number | null; valid: boolean }) => [a.task, [a.score, a.valid]]));
    expect(by).toEqual({ "c-command": [1, true], "c-contains": [1, true], "c-hostile": [1, true], "c-regex": [1, true], "c-wrong": [0, true] });
    expect([res.passed, res.tasks]).toEqual([4, 5]);
    // every attempt is a trial (its log the trial id), run by the conductor with the live .agent/'s copy
    for (const a of res.attempts as { task: string; log: string }[]) {
      const result = JSON.parse(readFileSync(join(home, "trials", a.log, "result.json"), "utf8"));
      expect(result.agent_info.agent_root, a.task).toContain(join("overlays", "live", ".agent"));
      expect(result.task_name ?? result.task?.name ?? JSON.stringify(result), a.task).toContain(`cards/${a.task}`);
    }
    // the command check ran in the box: the host has no /app/out.txt the model wrote
    expect(existsSync("/app/out.txt") && readFileSync("/app/out.txt", "utf8") === "beta").toBe(false);

    // the hostile reply ran and was answered: what it read went back to the model, and holds no key
    const sent = upstream.requests.map((q) => JSON.stringify(q.body ?? "")).filter((t) => t.includes("CARD-HOSTILE") && t.includes("tool_result"));
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.join("\n")).toContain("GW");
    for (const t of sent) expect(t).not.toContain(KEY);
    // the key is in no file evolve wrote (trials, traces, logs, the project's records and memory), nor its output
    expect(filesHolding(home, KEY, (p) => p === join(home, "gateway.toml"))).toEqual([]);
    expect(filesHolding(project, KEY)).toEqual([]);
    expect(r.stdout + r.stderr).not.toContain(KEY);

    // each run's episode is in the live memory, as a host run leaves it
    const episodes = readFileSync(join(project, ".agent", "memory", "episodes.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(episodes.map((e: { task: string; score: number | null }) => [e.task, e.score]).sort()).toEqual([
      ["c-command", 1],
      ["c-contains", 1],
      ["c-hostile", 1],
      ["c-regex", 1],
      ["c-wrong", 0],
    ]);
    expect(episodes.every((e: { domain: string; outcome: string }) => e.domain === "box" && e.outcome === "finished")).toBe(true);
    expect(res.episodes).toBe(5);
  }, 900_000);

  it.skipIf(!hasBinary)("harness screen without --on-host runs candidate and parent in boxes and claims no host-mode limit", async () => {
    const s = await evolve("harness", "scaffold", "--where", "prompt", "--pathology", "no_plan", "--hypothesis", "same policy", "--json");
    expect(s.code, s.stderr).toBe(0);
    const id = JSON.parse(s.stdout).id as string;
    const r = await evolve("harness", "screen", "--no-activation-gate", "--sample", "2", "--seed", "s1", "--json", id);
    // the same policy cannot gain: exit 1, every attempt valid and a trial
    expect(r.code, `${r.stderr.slice(-3000)}\n${r.stdout.slice(0, 2000)}`).toBe(1);
    const rec = JSON.parse(r.stdout);
    expect(rec.source).toBe("cards");
    expect(rec.limits.some((l: string) => l.startsWith("task cards run on the host"))).toBe(false);
    const c = rec.candidates[0];
    for (const a of [...c.attempts.candidate, ...c.attempts.parent]) {
      expect(a.valid, JSON.stringify(a)).toBe(true);
      expect(existsSync(join(home, "trials", a.log, "result.json"))).toBe(true);
    }
    expect(r.stdout + r.stderr).not.toContain(KEY);
  }, 900_000);

  it("a command runner needs --on-host: refused with its reason, before anything runs", async () => {
    const saved = readFileSync(join(project, "evolve", "runner.json"), "utf8");
    writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "command", command: "echo {prompt}" }));
    try {
      const r = await evolve("harness", "eval");
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n")[0]).toMatch(/^error\[cards_on_host_required\]: .*runner\.json names a command runner \("agent": "command"\): its command is a program on this machine, which cannot run in a card's box$/);
    } finally {
      writeFileSync(join(project, "evolve", "runner.json"), saved);
    }
  }, 120_000);
});
