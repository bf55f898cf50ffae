/**
 * The paired statistics and the paired-gain gate of a screen (engine/eval/stats.ts): what decides whether a
 * candidate beat its parent, checked against hand computations and published tables.
 */
import { describe, expect, it } from "vitest";
import { MIN_N, T_THRESHOLD, pairedGainGate, pairedStats, signTestEvidence, signTestMinN, signTestP, statsFromJson, statsToJson, tQuantile975 } from "./stats.ts";

describe("pairedStats", () => {
  it("computes the mean, sample sd, t and a Student-t 95% interval that match a hand computation", () => {
    // gains 1, 0, 1, 1, 0 → mean 0.6, var = (4·0.16·… ) = (0.16·3 + 0.36·2)/4 = 0.3
    const s = pairedStats([1, 0, 1, 1, 1], [0, 0, 0, 0, 1]);
    expect(s.n).toBe(5);
    expect(s.mean_gain).toBeCloseTo(0.6, 12);
    expect(s.sd).toBeCloseTo(Math.sqrt(0.3), 12);
    const se = Math.sqrt(0.3 / 5);
    expect(s.t).toBeCloseTo(0.6 / se, 10);
    const half = 2.776445105 * se; // t_{0.975, 4}
    expect(s.ci95![0]).toBeCloseTo(0.6 - half, 6);
    expect(s.ci95![1]).toBeCloseTo(0.6 + half, 6);
    expect(s.ci95![0]).toBeLessThan(s.mean_gain);
    expect(s.ci95![1]).toBeGreaterThan(s.mean_gain);
    expect(s.sign_test).toMatchObject({ wins: 3, losses: 0, ties: 2 });
    expect(s.sign_test.p).toBeCloseTo(0.25, 14);
  });

  it("gives t = +Infinity, -Infinity or 0 at zero variance by the sign of the mean, with a point interval", () => {
    const up = pairedStats([0.3, 0.2, 0.7], [0.2, 0.1, 0.6]); // gains 0.1 up to float noise
    expect(up.t).toBe(Number.POSITIVE_INFINITY);
    expect(up.sd).toBe(0);
    expect(up.ci95).toEqual([up.mean_gain, up.mean_gain]);
    const down = pairedStats([0, 0], [1, 1]);
    expect(down.t).toBe(Number.NEGATIVE_INFINITY);
    expect(down.ci95).toEqual([-1, -1]);
    const flat = pairedStats([1, 0, 1], [1, 0, 1]);
    expect(flat.t).toBe(0);
    expect(flat.mean_gain).toBe(0);
    expect(flat.sign_test).toEqual({ wins: 0, losses: 0, ties: 3, p: 1 });
  });

  it("has no t and no interval for one task, and refuses lists of different lengths", () => {
    const one = pairedStats([1], [0]);
    expect([one.n, one.mean_gain, one.t, one.ci95]).toEqual([1, 1, null, null]);
    expect(one.sign_test).toEqual({ wins: 1, losses: 0, ties: 0, p: 1 });
    expect(() => pairedStats([1, 0], [1])).toThrow(/one parent score per candidate score/);
    const none = pairedStats([], []);
    expect([none.n, none.t, none.sign_test.p]).toEqual([0, null, 1]);
  });

  it("drops ties from the sign test", () => {
    const s = pairedStats([1, 1, 1, 0, 0.5, 0.5], [0, 0, 0, 1, 0.5, 0.5]);
    expect(s.sign_test).toMatchObject({ wins: 3, losses: 1, ties: 2 });
    expect(s.sign_test.p).toBeCloseTo(0.625, 14);
  });
});

describe("sign test", () => {
  it("matches the binomial tables", () => {
    expect(signTestP(9, 1)).toBeCloseTo(0.021484375, 14);
    expect(signTestP(1, 9)).toBeCloseTo(0.021484375, 14);
    expect(signTestP(8, 2)).toBeCloseTo(0.109375, 14);
    expect(signTestP(10, 0)).toBeCloseTo(0.001953125, 14);
    expect(signTestP(5, 5)).toBe(1);
    expect(signTestP(0, 0)).toBe(1);
    // 2·P(X ≤ 40), X ~ Bin(100, ½) = 0.0568903…; and no underflow at thousands of tasks
    expect(signTestP(60, 40)).toBeCloseTo(0.056887933, 6);
    expect(signTestP(3000, 3000)).toBeCloseTo(1, 9);
  });
});

describe("tQuantile975", () => {
  it("matches the t table to 1e-6", () => {
    const table: [number, number][] = [[1, 12.706205], [2, 4.302653], [5, 2.570582], [10, 2.228139], [30, 2.042272], [100, 1.983972]];
    for (const [df, q] of table) expect(Math.abs(tQuantile975(df) - q), `df ${df}`).toBeLessThan(1e-6);
  });

  it("tends to the normal quantile and takes fractional df", () => {
    expect(Math.abs(tQuantile975(1e6) - 1.959966)).toBeLessThan(1e-6);
    // scipy.stats.t.ppf(0.975, df), on both sides of the switch to the Cornish-Fisher expansion at df 1e5
    expect(Math.abs(tQuantile975(50_000) - 1.9600114310936798)).toBeLessThan(1e-6);
    expect(Math.abs(tQuantile975(99_999) - 1.9599877077718442)).toBeLessThan(1e-6);
    expect(Math.abs(tQuantile975(1e6) - 1.959966356814107)).toBeLessThan(1e-9);
    expect(Math.abs(tQuantile975(2.5) - 3.5746548420036817)).toBeLessThan(1e-6);
    expect(tQuantile975(2.5)).toBeLessThan(tQuantile975(2));
    expect(tQuantile975(2.5)).toBeGreaterThan(tQuantile975(3));
    expect(() => tQuantile975(0.5)).toThrow(/df ≥ 1/);
  });
});

describe("pairedGainGate", () => {
  it("passes at exactly t = 1.96 and fails just below it", () => {
    // gains 74 and 24: mean 49, variance 1250, se = √(1250/2) = 25, t = 49/25 = 1.96
    const at = pairedStats([74, 24], [0, 0]);
    expect(at.t).toBe(1.96);
    expect(pairedGainGate(at)).toEqual({ status: "pass", detail: "mean gain 49 > 0, t = 1.96 ≥ 1.96, n = 2" });
    const below = pairedStats([74, 23.9], [0, 0]);
    expect(below.t!).toBeLessThan(T_THRESHOLD);
    expect(pairedGainGate(below)).toEqual({ status: "fail", detail: "t = 1.954 < 1.96" });
    expect(pairedGainGate({ ...at, t: 1.9599999 }).status).toBe("fail");
  });

  it("passes a gain on every task with no variance, and says why it fails otherwise", () => {
    expect(pairedGainGate(pairedStats([1, 1], [0, 0]))).toEqual({ status: "pass", detail: "mean gain 1 > 0, t = Infinity ≥ 1.96, n = 2" });
    expect(pairedGainGate(pairedStats([1], [0]))).toEqual({ status: "fail", detail: `n = 1 < ${MIN_N}` });
    expect(pairedGainGate(pairedStats([0, 0.5], [0.5, 0.5]))).toEqual({ status: "fail", detail: "mean gain -0.25 ≤ 0" });
    expect(pairedGainGate(pairedStats([1, 1], [1, 1]))).toEqual({ status: "fail", detail: "mean gain 0 ≤ 0" });
    expect(pairedGainGate(pairedStats([1, 0, 1, 0], [0, 0, 0, 0]))).toEqual({ status: "fail", detail: "t = 1.732 < 1.96" });
  });
});

describe("stats JSON", () => {
  it("writes an infinite t as a string and reads it back", () => {
    const s = pairedStats([1, 1], [0, 0]);
    const text = JSON.stringify(statsToJson(s));
    expect(JSON.parse(text).t).toBe("Infinity");
    expect(statsFromJson(JSON.parse(text))).toEqual(s);
    const neg = pairedStats([0, 0], [1, 1]);
    expect(JSON.parse(JSON.stringify(statsToJson(neg))).t).toBe("-Infinity");
    expect(statsFromJson(JSON.parse(JSON.stringify(statsToJson(neg))))).toEqual(neg);
    const finite = pairedStats([1, 0, 1], [0, 0, 0]);
    expect(statsFromJson(JSON.parse(JSON.stringify(statsToJson(finite))))).toEqual(finite);
    const one = pairedStats([1], [0]);
    expect(statsFromJson(JSON.parse(JSON.stringify(statsToJson(one))))).toEqual(one);
    expect(() => statsFromJson({ n: 2 })).toThrow(/not a paired statistics record/);
  });
});

describe("the sign test's verdict beside the t gate", () => {
  it("needs 6 pairs at 0.05: 5 wins of 5 is p = 0.0625, 6 of 6 is 0.03125", () => {
    expect(signTestMinN()).toBe(6);
    expect(signTestMinN(0.01)).toBe(8);
  });

  it("calls a 3-task pass on t = +inf weak evidence, and 6 wins of 6 significant", () => {
    const three = pairedStats([1, 1, 1], [0, 0, 0]);
    expect(pairedGainGate(three).status).toBe("pass");
    expect(signTestEvidence(three)).toEqual({ alpha: 0.05, min_n: 6, reachable: false, significant: false, detail: "n = 3 pairs: the exact sign test cannot reach p < 0.05 below 6 pairs (here p = 0.25): weak evidence" });
    const six = signTestEvidence(pairedStats([1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]));
    expect([six.reachable, six.significant, six.detail]).toEqual([true, true, "sign test p = 0.03125 < 0.05 (6 wins, 0 losses, 0 ties)"]);
    const ties = signTestEvidence(pairedStats([1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]));
    expect([ties.reachable, ties.significant]).toEqual([true, false]);
    expect(ties.detail).toMatch(/^sign test p = 0\.25 ≥ 0\.05 \(3 wins, 0 losses, 5 ties\): weak evidence$/);
  });
});

