/**
 * Reading the verifier's verdict exactly as platform-tasks.md and Harbor's verifier do: `reward.json` wins over
 * `reward.txt`; a flat object of numbers; the primary reward is `"reward"`, else the single key; several keys
 * without `"reward"` are metrics with no primary. Anything else is a scoring error carrying the tail of the
 * verifier's output — never a fabricated zero.
 */
import type { ExceptionType } from "../outcome.ts";
import { BOX, TRIAL } from "../box/layout.ts";
import { BoxFileRefused, readBoxBytes, readBoxFile } from "../box/fs.ts";
import { join } from "node:path";

/** Named scores as the verifier wrote them. */
export type RewardMap = Record<string, number>;

/** How much of the verifier's output a scoring error carries (platform-trials.md). */
export const VERIFIER_TAIL_CHARS = 4000;

/** The verifier's verdict: scores, or why there are none. */
export type RewardParse =
  | { ok: true; rewards: RewardMap; primary: number | null; file: "reward.json" | "reward.txt" }
  | { ok: false; type: RewardErrorType; reason: string };

/** Harbor's exception names for a missing or unreadable reward, plus one for values outside [0, 1]. */
export type RewardErrorType = Extract<ExceptionType, "RewardFileNotFoundError" | "RewardFileEmptyError" | "VerifierOutputParseError" | "RewardOutOfRangeError">;

// what Python's float() accepts minus nan/inf, which are never a valid score
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * Parses the contents of the two reward files (undefined = file absent). Pure, so every rule is unit-testable
 * without a container.
 */
export function parseRewards(files: { json?: string; txt?: string }): RewardParse {
  if (files.json !== undefined) return parseJson(files.json);
  if (files.txt !== undefined) return parseTxt(files.txt);
  return { ok: false, type: "RewardFileNotFoundError", reason: `the verifier wrote neither ${BOX.verifierLogs}/reward.json nor reward.txt` };
}

function parseTxt(text: string): RewardParse {
  if (text.length === 0) return { ok: false, type: "RewardFileEmptyError", reason: "reward.txt is empty" };
  const t = text.trim();
  if (!NUMBER.test(t)) return { ok: false, type: "VerifierOutputParseError", reason: `reward.txt does not hold a number: ${JSON.stringify(t.slice(0, 80))}` };
  return checked({ reward: Number(t) }, "reward.txt");
}

function parseJson(text: string): RewardParse {
  if (text.length === 0) return { ok: false, type: "RewardFileEmptyError", reason: "reward.json is empty" };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return { ok: false, type: "VerifierOutputParseError", reason: `reward.json is not valid JSON: ${(e as Error).message}` };
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    return { ok: false, type: "VerifierOutputParseError", reason: "reward.json must be a flat JSON object of named numbers" };
  }
  const rewards: RewardMap = {};
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== "number") {
      return { ok: false, type: "VerifierOutputParseError", reason: `reward.json: "${k}" is ${JSON.stringify(x)?.slice(0, 80)}, not a number` };
    }
    rewards[k] = x;
  }
  if (Object.keys(rewards).length === 0) return { ok: false, type: "VerifierOutputParseError", reason: "reward.json holds no scores" };
  return checked(rewards, "reward.json");
}

function checked(rewards: RewardMap, file: "reward.json" | "reward.txt"): RewardParse {
  for (const [k, x] of Object.entries(rewards)) {
    if (!Number.isFinite(x) || x < 0 || x > 1) {
      return { ok: false, type: "RewardOutOfRangeError", reason: `${file}: "${k}" = ${x} is outside [0, 1]` };
    }
  }
  return { ok: true, rewards, primary: primaryReward(rewards), file };
}

/** The primary reward: `"reward"`, else the only value; null for several metrics without `"reward"`. */
export function primaryReward(rewards: RewardMap | null | undefined): number | null {
  if (!rewards) return null;
  if ("reward" in rewards) return rewards.reward;
  const keys = Object.keys(rewards);
  return keys.length === 1 ? rewards[keys[0]] : null;
}

/** The most a reward file may hold: a verdict is a few numbers, and a box-written file is read bounded. */
export const REWARD_FILE_LIMIT = 1024 * 1024;

/**
 * Reads and parses the reward files of a verifier output folder on the host. The folder is box-written: a link, a
 * FIFO, a device or an oversized file at either name is a parse error naming the file, never read through.
 */
export async function readRewards(verifierDir: string): Promise<RewardParse> {
  const files: { json?: string; txt?: string } = {};
  for (const [key, name] of [["json", "reward.json"], ["txt", "reward.txt"]] as const) {
    try {
      const buf = await readBoxBytes(verifierDir, join(verifierDir, name), { limit: REWARD_FILE_LIMIT + 1 });
      if (buf && buf.length > REWARD_FILE_LIMIT) {
        return { ok: false, type: "VerifierOutputParseError", reason: `${name} is over ${REWARD_FILE_LIMIT} bytes; a reward file holds a few numbers` };
      }
      if (buf) files[key] = buf.toString("utf8");
    } catch (e) {
      if (e instanceof BoxFileRefused) return { ok: false, type: "VerifierOutputParseError", reason: `${BOX.verifierLogs}/${name}: ${e.what}, not a regular file; refused` };
      throw e;
    }
  }
  return parseRewards(files);
}

/** The last {@link VERIFIER_TAIL_CHARS} characters of the verifier's log (`test-stdout.txt`), "" when absent or refused. */
export async function verifierTail(verifierDir: string): Promise<string> {
  try {
    const text = (await readBoxFile(verifierDir, join(verifierDir, TRIAL.testStdout), { limit: VERIFIER_TAIL_CHARS * 4, tail: true })) ?? "";
    return text.slice(-VERIFIER_TAIL_CHARS);
  } catch (e) {
    if (e instanceof BoxFileRefused) return `(${e.message})`;
    throw e;
  }
}
