/**
 * Task cards and the runner (engine/eval/evals.ts): what a user's bad card or runner.json is told, each check
 * kind, and the command runner (its quoting of a hostile prompt, its log, a timeout making the attempt invalid).
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { EvolveError } from "../errors.ts";
import { appendOverlayEpisodes, cardsEvaluator, CARD_MAX_BYTES, checkCard, fillTemplate, loadCards, loadRunner } from "./evals.ts";
import type { TaskCard } from "./types.ts";

let project: string;
beforeEach(() => {
  project = mkdtempSync(join(tmpdir(), "evolve-evals-"));
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
});

const card = (name: string, body: unknown) => writeFileSync(join(project, "evolve", "evals", name), typeof body === "string" ? body : JSON.stringify(body));
const ok = (id: string, extra: Partial<TaskCard> = {}) => ({ id, domain: "math", prompt: `say ${id}`, check: { contains: id }, ...extra });

/** Whether `pid` runs (a zombie nobody reaped yet counts as dead). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function codeOf(fn: () => unknown): [string, string] {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(EvolveError);
    return [(e as EvolveError).code, (e as EvolveError).message];
  }
  throw new Error("did not throw");
}

describe("loadCards", () => {
  it("reads every card in id order", () => {
    card("b.json", ok("b"));
    card("a.json", ok("a", { check: { regex: "^a$", flags: "i" } }));
    card("notes.txt", "not a card");
    expect(loadCards(project).map((c) => [c.id, c.check])).toEqual([
      ["a", { regex: "^a$", flags: "i" }],
      ["b", { contains: "b" }],
    ]);
  });

  it("names the file and the field of a bad card", () => {
    const cases: [unknown, RegExp][] = [
      ["{not json", /x\.json: the file is not JSON/],
      [{ ...ok("x"), id: "../up" }, /x\.json: id must be/],
      [{ ...ok("x"), domain: "" }, /x\.json: domain must be a non-empty string/],
      [{ ...ok("x"), prompt: 3 }, /x\.json: prompt must be/],
      [{ id: "x", domain: "d", prompt: "p" }, /x\.json: check is missing/],
      [{ ...ok("x"), check: { contains: "a", regex: "b" } }, /check must have exactly one of/],
      [{ ...ok("x"), check: { regex: "(" } }, /x\.json: check\.regex is not a valid regular expression/],
      [{ ...ok("x"), check: { command: "true", timeout_sec: -1 } }, /check\.timeout_sec must be/],
      [{ ...ok("x"), check: { contains: "a", flags: "i" } }, /check\.flags is not a field of a contains check/],
      [{ ...ok("x"), extra: 1 }, /x\.json: extra is not a card field/],
    ];
    for (const [body, re] of cases) {
      card("x.json", body);
      const [code, msg] = codeOf(() => loadCards(project));
      expect(code).toBe("card_invalid");
      expect(msg).toMatch(re);
      expect(msg).not.toContain("\n");
    }
  });

  it("refuses duplicate ids, links, oversized files and an empty folder", () => {
    expect(codeOf(() => loadCards(project))[0]).toBe("cards_none");
    card("a.json", ok("same"));
    card("b.json", ok("same"));
    const [code, msg] = codeOf(() => loadCards(project));
    expect(code).toBe("card_duplicate");
    expect(msg).toMatch(/a\.json and .*b\.json/);
    writeFileSync(join(project, "b.json.real"), JSON.stringify(ok("other")));
    card("b.json", ok("other"));
    symlinkSync(join(project, "b.json.real"), join(project, "evolve", "evals", "c.json"));
    expect(codeOf(() => loadCards(project))[1]).toMatch(/c\.json: the file is a symbolic link/);
    symlinkSync("/dev/null", join(project, "evolve", "evals", "aa.json"));
    expect(codeOf(() => loadCards(project))[0]).toBe("card_invalid");
  });

  it("refuses a card over the size limit", () => {
    card("big.json", { ...ok("big"), prompt: "x".repeat(CARD_MAX_BYTES) });
    expect(codeOf(() => loadCards(project))[1]).toMatch(/big\.json: the file is \d+ bytes, over the/);
  });
});

describe("loadRunner", () => {
  const runner = (body: unknown) => writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify(body));
  it("defaults to the conductor and validates what is written", () => {
    expect(loadRunner(project)).toEqual({ agent: "conductor" });
    runner({ agent: "command", command: "agent {prompt}", timeout_sec: 5 });
    expect(loadRunner(project)).toEqual({ agent: "command", command: "agent {prompt}", timeout_sec: 5 });
    for (const [body, re] of [
      [{ agent: "codex" }, /agent must be "conductor" or "command"/],
      [{ agent: "command" }, /needs a non-empty command/],
      [{ agent: "conductor", model: "nomodel" }, /model must be provider\/model/],
      [{ agent: "command", command: "x", concurrency: 4 }, /concurrency must be 1/],
      [{ agent: "command", command: "x", timeout_sec: 0 }, /timeout_sec must be/],
      [{ agent: "command", command: "x", retries: 2 }, /retries is not a runner field/],
    ] as const) {
      runner(body);
      const [code, msg] = codeOf(() => loadRunner(project));
      expect([code, msg]).toEqual(["runner_invalid", expect.stringMatching(re)]);
    }
  });

  it("refuses a conductor runner without a model when an evaluator is made from it", () => {
    card("a.json", ok("a"));
    const [code, msg] = codeOf(() => cardsEvaluator({ project, cards: loadCards(project), runner: { agent: "conductor" } }));
    expect(code).toBe("runner_invalid");
    expect(msg).toMatch(/needs a model/);
  });
});

describe("checkCard", () => {
  const c = (check: TaskCard["check"]): TaskCard => ({ id: "t1", domain: "d", prompt: "p", check });
  it("contains and regex", async () => {
    expect((await checkCard(c({ contains: "42" }), "the answer is 42")).passed).toBe(true);
    expect((await checkCard(c({ contains: "42" }), "the answer is 41")).passed).toBe(false);
    expect((await checkCard(c({ regex: "^ANSWER: \\d+$", flags: "m" }), "x\nanswer: 7", {})).passed).toBe(false);
    expect((await checkCard(c({ regex: "^answer: \\d+$", flags: "mi" }), "x\nANSWER: 7")).passed).toBe(true);
  });

  it("runs a command check with TASK_OUTPUT and TASK_ID, exit 0 passing", async () => {
    const cmd = c({ command: 'test "$TASK_ID" = t1 && printf %s "$TASK_OUTPUT" | grep -q "^ok; rm -rf /$"' });
    expect(await checkCard(cmd, "ok; rm -rf /")).toMatchObject({ passed: true, detail: "check command exited 0" });
    expect(await checkCard(cmd, "$(touch /tmp/pwned) no")).toMatchObject({ passed: false, detail: "check command exited 1" });
  });

  it("a command check past its timeout cannot decide, and its process group is killed", async () => {
    const pidFile = join(project, "pid");
    const t0 = Date.now();
    const r = await checkCard(c({ command: `sh -c 'trap "" TERM; echo $$ > ${pidFile}; sleep 30' & wait`, timeout_sec: 0.5 }), "x");
    expect(r.error).toMatch(/ran past 0.5s/);
    expect(Date.now() - t0).toBeLessThan(5000);
    const pid = Number(readFileSync(pidFile, "utf8"));
    await new Promise((d) => setTimeout(d, 300));
    expect(alive(pid)).toBe(false);
  });
});

describe("the command runner", () => {
  it("quotes {agent_root} and {prompt} so a hostile prompt is one argument, never shell", async () => {
    expect(fillTemplate("a {prompt} {agent_root}", { prompt: "it's {agent_root}", agent_root: "/r" })).toBe(`a 'it'\\''s {agent_root}' '/r'`);
    const hostile = `$(touch ${project}/pwned) \`id\` "; rm -rf ~; echo '`;
    card("h.json", { id: "h", domain: "d", prompt: hostile, check: { contains: hostile } });
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: { agent: "command", command: "printf %s {prompt}; echo seen-marker >&2" } });
    const outDir = join(project, "evolve", "screens", "s1", "attempts", "live");
    const { attempts } = await ev.run({ harnessId: "live", agentRoot: join(project, ".agent"), tasks: ["h"], marker: "seen-marker", outDir });
    expect(attempts[0]).toMatchObject({ task: "h", score: 1, valid: true, exit_code: 0, timed_out: false, marker_seen: true, log: join("attempts", "live", "h.log") });
    expect(() => readFileSync(join(project, "pwned"))).toThrow();
    expect(readFileSync(join(outDir, "h.log"), "utf8")).toContain("seen-marker");
  });

  it("a card past the runner's timeout is invalid, with its exit code null", async () => {
    card("slow.json", ok("slow"));
    card("fast.json", ok("fast"));
    const script = join(project, "agent.sh");
    writeFileSync(script, `#!/bin/sh\ncase "$TASK_ID" in slow) sleep 30;; esac\necho "$TASK_ID"; exit 3\n`);
    chmodSync(script, 0o755);
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: { agent: "command", command: `${script} {prompt}`, timeout_sec: 0.5 } });
    const t0 = Date.now();
    const { attempts } = await ev.run({ harnessId: "live", agentRoot: project, tasks: ["fast", "slow"], marker: null, outDir: join(project, "out", "a", "live") });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(attempts.map((a) => [a.task, a.valid, a.score, a.exit_code, a.timed_out, a.marker_seen])).toEqual([
      ["fast", true, 1, 3, false, false],
      ["slow", false, null, null, true, false],
    ]);
    expect(attempts[1].invalid_reason).toBe("timed out after 0.5s");
  });

  it("an agent that cannot start is invalid (a launch failure)", async () => {
    card("a.json", ok("a"));
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: { agent: "command", command: "exec /nonexistent/agent {prompt}" } });
    const { attempts } = await ev.run({ harnessId: "live", agentRoot: project, tasks: ["a"], marker: null, outDir: join(project, "out", "a", "live") });
    // sh reports the missing program with 127: a complete log with an exit code, scored by the check (no output: fail)
    expect(attempts[0]).toMatchObject({ valid: true, score: 0, exit_code: 127 });
  });
});

describe("appendOverlayEpisodes", () => {
  it("appends the overlay's episodes to the live memory, and refuses a linked memory folder", () => {
    const overlay = join(project, "ov", ".agent");
    const live = join(project, ".agent");
    mkdirSync(join(overlay, "memory"), { recursive: true });
    expect(appendOverlayEpisodes(overlay, live)).toBe(0);
    writeFileSync(join(overlay, "memory", "episodes.jsonl"), '{"id":"e1"}\n\n{"id":"e2"}\n');
    mkdirSync(join(live, "memory"), { recursive: true });
    writeFileSync(join(live, "memory", "episodes.jsonl"), '{"id":"old"}\n');
    expect(appendOverlayEpisodes(overlay, live)).toBe(2);
    expect(readFileSync(join(live, "memory", "episodes.jsonl"), "utf8")).toBe('{"id":"old"}\n{"id":"e1"}\n{"id":"e2"}\n');
    const other = join(project, "elsewhere");
    mkdirSync(other);
    const linked = join(project, "linked", ".agent");
    mkdirSync(linked, { recursive: true });
    symlinkSync(other, join(linked, "memory"));
    expect(() => appendOverlayEpisodes(overlay, linked)).toThrow(expect.objectContaining({ code: "episodes_unreadable" }));
    expect(readdirSync(other)).toEqual([]);
  });
});
