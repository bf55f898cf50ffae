/**
 * The pure rules of scoring a trial: reward files (platform-tasks.md "tests/"), multi-step aggregation and
 * min_reward gates, env templates against attached secrets, and the trial tree's "absent, never empty" rule.
 */
import { readdirSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_CEILINGS } from "../config.ts";
import { validateTask } from "../task/validate.ts";
import { judgeFamily, resolveAgentEnv, resolveVerifierEnv, withJudgeEnv } from "./env.ts";
import { pruneEmptyDirs, redactTree } from "./result.ts";
import { parseRewards, primaryReward, readRewards, verifierTail } from "./reward.ts";
import { aggregateStepRewards, passesMinReward } from "./steps.ts";

describe("reward files", () => {
  it("reads reward.txt as the primary reward, whitespace and all", () => {
    expect(parseRewards({ txt: "1\n" })).toEqual({ ok: true, rewards: { reward: 1 }, primary: 1, file: "reward.txt" });
    expect(parseRewards({ txt: " 0.25 " })).toMatchObject({ ok: true, primary: 0.25 });
  });

  it("scores a valid 0 instead of treating it as missing", () => {
    expect(parseRewards({ txt: "0" })).toMatchObject({ ok: true, rewards: { reward: 0 }, primary: 0 });
    expect(parseRewards({ json: '{"reward": 0}' })).toMatchObject({ ok: true, primary: 0 });
  });

  it("lets reward.json win over reward.txt", () => {
    expect(parseRewards({ json: '{"reward": 0.5, "style": 1}', txt: "1" })).toMatchObject({ ok: true, primary: 0.5, file: "reward.json" });
    // even a broken reward.json wins: the txt is not a fallback
    expect(parseRewards({ json: "{", txt: "1" })).toMatchObject({ ok: false, type: "VerifierOutputParseError" });
  });

  it('takes "reward" as primary, else the single key, else no primary (metrics)', () => {
    expect(parseRewards({ json: '{"accuracy": 1, "reward": 0.2}' })).toMatchObject({ primary: 0.2 });
    expect(parseRewards({ json: '{"accuracy": 0.7}' })).toMatchObject({ primary: 0.7 });
    expect(parseRewards({ json: '{"accuracy": 1, "style": 0.5}' })).toEqual({
      ok: true,
      rewards: { accuracy: 1, style: 0.5 },
      primary: null,
      file: "reward.json",
    });
  });

  it("refuses out-of-range values in any key, NaN and infinities", () => {
    for (const txt of ["1.5", "-0.1", "nan", "inf", "NaN"]) expect(parseRewards({ txt }).ok, txt).toBe(false);
    expect(parseRewards({ txt: "1.5" })).toMatchObject({ type: "RewardOutOfRangeError" });
    expect(parseRewards({ json: '{"reward": 1, "style": 2}' })).toMatchObject({ ok: false, type: "RewardOutOfRangeError" });
    expect(parseRewards({ json: '{"reward": 1e400}' })).toMatchObject({ ok: false });
  });

  it("refuses non-numbers, nesting, arrays, empty objects, empty and missing files with Harbor's exception names", () => {
    expect(parseRewards({})).toMatchObject({ ok: false, type: "RewardFileNotFoundError" });
    expect(parseRewards({ txt: "" })).toMatchObject({ ok: false, type: "RewardFileEmptyError" });
    expect(parseRewards({ json: "" })).toMatchObject({ ok: false, type: "RewardFileEmptyError" });
    expect(parseRewards({ txt: "   \n" })).toMatchObject({ ok: false, type: "VerifierOutputParseError" });
    expect(parseRewards({ txt: "pass" })).toMatchObject({ ok: false, type: "VerifierOutputParseError" });
    for (const json of ['{"reward": "1"}', '{"reward": true}', '{"a": {"b": 1}}', "[1]", "1", "null", "{}"]) {
      expect(parseRewards({ json }), json).toMatchObject({ ok: false, type: "VerifierOutputParseError" });
    }
  });

  it("reads the files from a verifier folder and keeps only the last 4000 characters of its log", async () => {
    const dir = await mkdtemp(join(tmpdir(), "evolve-reward-"));
    expect(await readRewards(dir)).toMatchObject({ ok: false, type: "RewardFileNotFoundError" });
    expect(await verifierTail(dir)).toBe("");
    await writeFile(join(dir, "reward.txt"), "0.75\n");
    expect(await readRewards(dir)).toMatchObject({ ok: true, primary: 0.75 });
    await writeFile(join(dir, "test-stdout.txt"), "x".repeat(5000) + "END");
    const tail = await verifierTail(dir);
    expect(tail).toHaveLength(4000);
    expect(tail.endsWith("END")).toBe(true);
  });

  it("primaryReward agrees with the parser", () => {
    expect(primaryReward(null)).toBeNull();
    expect(primaryReward({ a: 1, b: 0 })).toBeNull();
    expect(primaryReward({ a: 0 })).toBe(0);
  });
});

describe("multi-step aggregation", () => {
  it("mean: per key over the steps with a result, a missing key counting 0", () => {
    expect(aggregateStepRewards([{ reward: 1 }, { reward: 0.25 }])).toEqual({ reward: 0.625 });
    expect(aggregateStepRewards([{ reward: 1, style: 1 }, null, { reward: 0 }], "mean")).toEqual({ reward: 0.5, style: 0.5 });
    expect(aggregateStepRewards([null, null])).toBeNull();
    expect(aggregateStepRewards([])).toBeNull();
  });

  it("final: the last executed step's result, even when it has none", () => {
    expect(aggregateStepRewards([{ reward: 1 }, { reward: 0.25 }], "final")).toEqual({ reward: 0.25 });
    expect(aggregateStepRewards([{ reward: 1 }, null], "final")).toBeNull();
  });

  it("min_reward: a number gates the primary reward, a map each key, a missing key fails", () => {
    expect(passesMinReward(undefined, null).pass).toBe(true);
    expect(passesMinReward(0.5, { reward: 0.5 }).pass).toBe(true);
    expect(passesMinReward(0.5, { reward: 0.49 }).pass).toBe(false);
    expect(passesMinReward(0.5, { score: 0.9 }).pass).toBe(true); // the single key is primary
    expect(passesMinReward(0.5, { a: 1, b: 1 }).pass).toBe(false); // metrics only: no primary to gate
    expect(passesMinReward(0.5, null).pass).toBe(false);
    expect(passesMinReward({ reward: 1, lines: 0.5 }, { reward: 1, lines: 0.5 }).pass).toBe(true);
    expect(passesMinReward({ reward: 1, lines: 0.5 }, { reward: 1, lines: 0.4 })).toMatchObject({ pass: false, reason: expect.stringContaining("lines") });
    expect(passesMinReward({ lines: 0.5 }, { reward: 1 })).toMatchObject({ pass: false, reason: expect.stringContaining("no \"lines\"") });
  });
});

describe("environment tables", () => {
  const table = { APP_MODE: "ci", LOG_LEVEL: "${LOG_LEVEL:-info}", TOKEN: "${TOKEN}", EMPTY: "${EMPTY:-}" };

  it("lands literals as written and answers templates from attached secrets only, else their default", () => {
    const r = resolveAgentEnv(table, { TOKEN: "t0k3n", LOG_LEVEL: "debug", UNUSED: "x" });
    expect(r.all).toEqual({ APP_MODE: "ci", LOG_LEVEL: "debug", TOKEN: "t0k3n", EMPTY: "" });
    expect(r.literals).toEqual({ APP_MODE: "ci" });
    expect(r.missing).toEqual([]);
  });

  it("reports a template with no secret and no default as missing, never as empty", () => {
    const r = resolveAgentEnv(table, {});
    expect(r.missing).toEqual(["TOKEN"]);
    expect(r.all).not.toHaveProperty("TOKEN");
    expect(r.all.LOG_LEVEL).toBe("info");
  });

  it("gives the verifier defaults only, and leaves judge names to the gateway even when they have a default", () => {
    const r = resolveVerifierEnv({ STRICT: "${STRICT:-1}", MODE: "x", JUDGE_KEY: "${ANTHROPIC_API_KEY}", OPENAI_BASE_URL: "${OPENAI_BASE_URL:-http://x}" });
    expect(r.env).toEqual({ STRICT: "1", MODE: "x" });
    expect(r.judge).toEqual([{ key: "JUDGE_KEY", name: "ANTHROPIC_API_KEY" }, { key: "OPENAI_BASE_URL", name: "OPENAI_BASE_URL" }]);
  });

  it("maps every judge name, companions included, to its family", () => {
    expect(["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_BASE"].map(judgeFamily)).toEqual(["anthropic", "anthropic", "anthropic"]);
    expect(["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"].map(judgeFamily)).toEqual(["openai", "openai", "openai"]);
    expect(["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"].map(judgeFamily)).toEqual(["gemini", "gemini", "gemini"]);
  });

  it("leaves a Gemini judge name to the gateway, default or not, like the other families'", () => {
    const r = resolveVerifierEnv({ KEY: "${GEMINI_API_KEY}", G: "${GOOGLE_API_KEY:-x}", BASE: "${GOOGLE_GEMINI_BASE_URL}" });
    expect(r.env).toEqual({});
    expect(r.judge).toEqual([{ key: "KEY", name: "GEMINI_API_KEY" }, { key: "G", name: "GOOGLE_API_KEY" }, { key: "BASE", name: "GOOGLE_GEMINI_BASE_URL" }]);
  });

  it("answers judge asks under the task's own key and sets the family's companions beside it", () => {
    const vars = { ANTHROPIC_API_KEY: "evk-1", ANTHROPIC_BASE_URL: "http://gw", ANTHROPIC_API_BASE: "http://gw" };
    const env = withJudgeEnv({ ANTHROPIC_BASE_URL: "http://task-set" }, [{ key: "JUDGE_KEY", name: "ANTHROPIC_API_KEY" }], vars);
    expect(env).toEqual({ ANTHROPIC_BASE_URL: "http://task-set", ANTHROPIC_API_KEY: "evk-1", ANTHROPIC_API_BASE: "http://gw", JUDGE_KEY: "evk-1" });
  });
});

describe("trial tree hygiene", () => {
  it("prunes folders nothing wrote to, keeps every file (an empty log that ran is still a log)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "evolve-tree-"));
    await mkdir(join(dir, "agent"), { recursive: true });
    await mkdir(join(dir, "verifier", "deep"), { recursive: true });
    await writeFile(join(dir, "verifier", "reward.txt"), "1\n");
    await writeFile(join(dir, "verifier", "empty.txt"), "");
    await pruneEmptyDirs(dir);
    expect((await readdir(dir)).sort()).toEqual(["verifier"]);
    expect((await readdir(join(dir, "verifier"))).sort()).toEqual(["empty.txt", "reward.txt"]);
  });

  it("redacts secret values in every file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "evolve-redact-"));
    await mkdir(join(dir, "agent"));
    await writeFile(join(dir, "agent", "oracle.txt"), "token=sup3r-s3cret and again sup3r-s3cret\n");
    await redactTree(dir, ["sup3r-s3cret"]);
    expect(await readFile(join(dir, "agent", "oracle.txt"), "utf8")).toBe("token=[redacted] and again [redacted]\n");
  });
});

describe("trial fixtures", () => {
  const root = join(__dirname, "../..", "fixtures", "tasks", "trials");
  it.each(readdirSync(root))("%s passes `evolve task validate` (with --secret API_TOKEN)", async (name) => {
    const r = await validateTask(join(root, name), { ceilings: DEFAULT_CEILINGS, secrets: new Set(["API_TOKEN"]) });
    expect(r.findings.filter((f) => f.severity === "error")).toEqual([]);
    expect(r.ok).toBe(true);
  });
});
