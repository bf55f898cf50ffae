/**
 * Multi-step scoring (platform-tasks.md "Multi-step tasks", Harbor's trial/multi_step.py): how step rewards fold
 * into the trial's reward, and how `min_reward` decides whether the next step runs.
 */
import { primaryReward, type RewardMap } from "./reward.ts";

/** `multi_step_reward_strategy`; mean is the default. */
export type StepStrategy = "mean" | "final";

/**
 * The trial's rewards from its executed steps' rewards, in order (null = the step produced no result).
 * `mean` averages each key over the steps with a result, a key a step lacks counting 0 (Harbor); `final` is the
 * last executed step's result. Null when nothing scored.
 */
export function aggregateStepRewards(steps: readonly (RewardMap | null)[], strategy: StepStrategy = "mean"): RewardMap | null {
  if (steps.length === 0) return null;
  if (strategy === "final") return steps[steps.length - 1] ?? null;
  const scored = steps.filter((s): s is RewardMap => s !== null);
  if (scored.length === 0) return null;
  const keys = [...new Set(scored.flatMap((s) => Object.keys(s)))];
  const out: RewardMap = {};
  for (const k of keys) out[k] = scored.reduce((sum, s) => sum + (s[k] ?? 0), 0) / scored.length;
  return out;
}

/** A step's `min_reward`: a number gates the primary reward, a map gates each named key. */
export type MinReward = number | Record<string, number>;

/**
 * Whether a step's rewards clear its `min_reward`. A gated value that is missing fails (Harbor reads it as -inf).
 * Returns the reason when it does not, for the trial's system log.
 */
export function passesMinReward(min: MinReward | undefined | null, rewards: RewardMap | null): { pass: boolean; reason?: string } {
  if (min === undefined || min === null) return { pass: true };
  if (typeof min === "number") {
    const p = primaryReward(rewards);
    if (p === null) return { pass: false, reason: `min_reward ${min}: the step has no primary reward` };
    return p >= min ? { pass: true } : { pass: false, reason: `primary reward ${p} is below min_reward ${min}` };
  }
  for (const [k, floor] of Object.entries(min)) {
    const v = rewards?.[k];
    if (v === undefined) return { pass: false, reason: `min_reward.${k} ${floor}: the step has no "${k}" score` };
    if (v < floor) return { pass: false, reason: `"${k}" = ${v} is below min_reward.${k} ${floor}` };
  }
  return { pass: true };
}
