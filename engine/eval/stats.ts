/**
 * Paired statistics of a candidate against its parent on the same tasks, and the paired-gain gate of a screen
 * (spec: harness-evolution.md "Screening gates"), and which attempts count at all. Pure: attempts and numbers in,
 * numbers (or the refusal of a run whose attempts never met their model) out.
 *
 * The gain of task i is γ_i = c_i − p_i. A screen has few tasks, so the t statistic is read against Student's t for
 * the interval, but the gate itself is the spec's fixed t ≥ 1.96 (with n ≥ 2): the same rule for every round, which
 * a person can check by hand. The exact sign test is reported beside it because it does not assume the gains are
 * normal (scores are often 0/1).
 */
import { EvolveError } from "../errors.ts";
import type { Attempt, GateResult, PairedStats, SignTestEvidence } from "./types.ts";

/** Whether an attempt passed its task: scored, and fully (score ≥ 1); an unscored attempt never passes. */
export function attemptPassed(a: Pick<Attempt, "score">): boolean {
  return a.score !== null && a.score >= 1;
}

/**
 * pass@1 of a harness over attempts, one per task: the share that passed (attemptPassed); 0 when there are none.
 * A round's utility and `harness eval`'s figure are this one number.
 */
export function passAt1(attempts: readonly Pick<Attempt, "score">[]): number {
  return attempts.length === 0 ? 0 : attempts.filter(attemptPassed).length / attempts.length;
}

/** The t a candidate's paired gain must reach to pass the screen. */
export const T_THRESHOLD = 1.96;
/** The fewest paired tasks the paired-gain gate accepts: one task has no variance to test against. */
export const MIN_N = 2;

/**
 * A standard deviation this small is zero: gains computed as differences of floats (0.3 − 0.2 vs 0.2 − 0.1) differ
 * in the last bits, and without this an identical gain on every task would give a t of 10^15 instead of ±Infinity.
 */
const ZERO_SD = 1e-12;

/** Paired statistics of `candidate[i] − parent[i]`; the arrays are scores of the same tasks in the same order. */
export function pairedStats(candidate: readonly number[], parent: readonly number[]): PairedStats {
  if (candidate.length !== parent.length) {
    throw new Error(`paired statistics need one parent score per candidate score (got ${candidate.length} and ${parent.length})`);
  }
  const gains = candidate.map((c, i) => c - parent[i]);
  for (const g of gains) if (!Number.isFinite(g)) throw new Error(`paired statistics need finite scores (got a gain of ${g})`);
  const n = gains.length;
  const mean = n === 0 ? 0 : gains.reduce((a, b) => a + b, 0) / n;
  const variance = n < 2 ? 0 : gains.reduce((a, g) => a + (g - mean) ** 2, 0) / (n - 1);
  const sd = Math.sqrt(variance);
  let wins = 0;
  let losses = 0;
  for (const g of gains) {
    if (g > 0) wins++;
    else if (g < 0) losses++;
  }
  const sign_test = { wins, losses, ties: n - wins - losses, p: signTestP(wins, losses) };
  if (n < MIN_N) return { n, mean_gain: mean, sd, t: null, ci95: null, sign_test };
  if (sd < ZERO_SD) {
    const t = mean > 0 ? Number.POSITIVE_INFINITY : mean < 0 ? Number.NEGATIVE_INFINITY : 0;
    return { n, mean_gain: mean, sd: 0, t, ci95: [mean, mean], sign_test };
  }
  // sqrt(variance / n) rather than sd / sqrt(n): exact for the round numbers a person checks by hand
  const se = Math.sqrt(variance / n);
  const half = tQuantile975(n - 1) * se;
  return { n, mean_gain: mean, sd, t: mean / se, ci95: [mean - half, mean + half], sign_test };
}

/**
 * The paired-gain gate: passes when the mean gain is above zero and t ≥ {@link T_THRESHOLD} over at least
 * {@link MIN_N} tasks (a gain on every task with no variance, t = +Infinity, passes). `detail` is one line saying why.
 */
export function pairedGainGate(s: PairedStats): GateResult {
  if (s.n < MIN_N || s.t === null) return { status: "fail", detail: `n = ${s.n} < ${MIN_N}` };
  if (!(s.mean_gain > 0)) return { status: "fail", detail: `mean gain ${num(s.mean_gain)} ≤ 0` };
  if (!(s.t >= T_THRESHOLD)) return { status: "fail", detail: `t = ${num(s.t)} < ${T_THRESHOLD}` };
  return { status: "pass", detail: `mean gain ${num(s.mean_gain)} > 0, t = ${num(s.t)} ≥ ${T_THRESHOLD}, n = ${s.n}` };
}

/** A number for a one-line detail: four significant digits, ±Infinity spelt out. */
function num(x: number): string {
  if (x === Number.POSITIVE_INFINITY) return "Infinity";
  if (x === Number.NEGATIVE_INFINITY) return "-Infinity";
  return String(Number(x.toPrecision(4)));
}

/** The level the exact two-sided sign test is read at. */
export const SIGN_TEST_ALPHA = 0.05;

/**
 * The fewest pairs whose exact two-sided sign test can reach p < `alpha` at all: even a win on every pair gives
 * p = 2·½ⁿ, which is 0.0625 at n = 5 and 0.03125 at n = 6, so at the usual 0.05 a sample needs 6 pairs.
 */
export function signTestMinN(alpha = SIGN_TEST_ALPHA): number {
  let n = 1;
  while (signTestP(n, 0) >= alpha) n++;
  return n;
}

/** {@link signTestMinN} at {@link SIGN_TEST_ALPHA}: 6. */
export const SIGN_TEST_MIN_N = signTestMinN();

/**
 * What the sign test says of a paired sample, beside the seed's t gate (which it does not change): whether the
 * sample could reach significance at all (n ≥ {@link SIGN_TEST_MIN_N}) and whether it did (p < alpha). A pass on
 * t = +∞ over 3 tasks is weak evidence (its sign test cannot go below p = 0.25), and this says so in one line.
 */
export function signTestEvidence(s: PairedStats): SignTestEvidence {
  const reachable = s.n >= SIGN_TEST_MIN_N;
  const { wins, losses, ties, p } = s.sign_test;
  const significant = p < SIGN_TEST_ALPHA;
  const detail = !reachable
    ? `n = ${s.n} pairs: the exact sign test cannot reach p < ${SIGN_TEST_ALPHA} below ${SIGN_TEST_MIN_N} pairs (here p = ${num(p)}): weak evidence`
    : significant
      ? `sign test p = ${num(p)} < ${SIGN_TEST_ALPHA} (${wins} wins, ${losses} losses, ${ties} ties)`
      : `sign test p = ${num(p)} ≥ ${SIGN_TEST_ALPHA} (${wins} wins, ${losses} losses, ${ties} ties): weak evidence`;
  return { alpha: SIGN_TEST_ALPHA, min_n: SIGN_TEST_MIN_N, reachable, significant, detail };
}

/**
 * The exact two-sided sign test over the non-zero gains: p = min(1, 2·P(X ≤ min(w, l))) with X ~ Bin(w + l, ½).
 * Ties carry no direction and are dropped; no non-zero gain at all gives p = 1.
 */
export function signTestP(wins: number, losses: number): number {
  const m = wins + losses;
  if (m === 0) return 1;
  const k = Math.min(wins, losses);
  // terms in logs, so hundreds of tasks do not underflow 0.5^m
  let logTerm = -m * Math.LN2; // log P(X = 0)
  let sum = Math.exp(logTerm);
  for (let i = 1; i <= k; i++) {
    logTerm += Math.log((m - i + 1) / i);
    sum += Math.exp(logTerm);
  }
  return Math.min(1, 2 * sum);
}

const quantileCache = new Map<number, number>();

/**
 * The 0.975 quantile of Student's t with `df` degrees of freedom (df ≥ 1, not necessarily whole), to about 1e-9:
 * bisection on the t distribution function, itself the regularized incomplete beta function. Very large df use the
 * Cornish–Fisher expansion around the normal quantile, where the beta function's continued fraction is slow.
 */
export function tQuantile975(df: number): number {
  if (!(df >= 1) || !Number.isFinite(df)) throw new Error(`tQuantile975 needs df ≥ 1 (got ${df})`);
  const hit = quantileCache.get(df);
  if (hit !== undefined) return hit;
  let q: number;
  if (df > 1e5) {
    q = cornishFisher(1.959963984540054, df);
  } else {
    // upper tail P(T > t) = ½·I_{df/(df+t²)}(df/2, ½); it falls as t grows
    const upper = (t: number) => 0.5 * betaInc(df / (df + t * t), df / 2, 0.5);
    let lo = 0;
    let hi = 2;
    while (upper(hi) > 0.025) {
      lo = hi;
      hi *= 2;
    }
    for (let i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
      const mid = (lo + hi) / 2;
      if (upper(mid) > 0.025) lo = mid;
      else hi = mid;
    }
    q = (lo + hi) / 2;
  }
  quantileCache.set(df, q);
  return q;
}

/** Student's t quantile from the normal quantile `z` for large `v` (Abramowitz & Stegun 26.7.5). */
function cornishFisher(z: number, v: number): number {
  const z2 = z * z;
  const g1 = (z2 + 1) * z / 4;
  const g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
  const g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
  const g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  return z + g1 / v + g2 / v ** 2 + g3 / v ** 3 + g4 / v ** 4;
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients: about 1e-15 relative). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  x -= 1;
  let a = c[0];
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += c[i] / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** The regularized incomplete beta function I_x(a, b), by its continued fraction (Numerical Recipes §6.4). */
function betaInc(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  // the fraction converges fast only below the mean; above it use I_x(a, b) = 1 − I_{1−x}(b, a)
  if (x < (a + 1) / (a + b + 2)) return (front * betaFraction(x, a, b)) / a;
  return 1 - (front * betaFraction(1 - x, b, a)) / b;
}

/** Lentz's evaluation of the incomplete beta continued fraction. */
function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  const qab = a + b;
  const qap = a + 1;
  const qam = a - 1;
  let c = 1;
  let d = 1 - (qab * x) / qap;
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 100_000; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-16) break;
  }
  return h;
}

/** {@link PairedStats} as JSON holds it: JSON has no Infinity, so an infinite t is the string "Infinity" or "-Infinity". */
export type PairedStatsJson = Omit<PairedStats, "t"> & { t: number | "Infinity" | "-Infinity" | null };

/** `s` ready for JSON.stringify: an infinite t (zero variance) written as "Infinity" / "-Infinity". */
export function statsToJson(s: PairedStats): PairedStatsJson {
  const t = s.t === Number.POSITIVE_INFINITY ? "Infinity" : s.t === Number.NEGATIVE_INFINITY ? "-Infinity" : s.t;
  return { ...s, t };
}

/** Reads back what {@link statsToJson} wrote (a parsed JSON value); throws on a value that is no PairedStats. */
export function statsFromJson(v: unknown): PairedStats {
  const o = v as Record<string, unknown>;
  const isNum = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
  const st = o?.sign_test as Record<string, unknown> | undefined;
  const ci = o?.ci95;
  const okCi = ci === null || (Array.isArray(ci) && ci.length === 2 && isNum(ci[0]) && isNum(ci[1]));
  const okSign = !!st && typeof st === "object" && isNum(st.wins) && isNum(st.losses) && isNum(st.ties) && isNum(st.p);
  const rawT = o?.t;
  const t = rawT === "Infinity" ? Number.POSITIVE_INFINITY : rawT === "-Infinity" ? Number.NEGATIVE_INFINITY : rawT;
  if (!o || typeof o !== "object" || !isNum(o.n) || !isNum(o.mean_gain) || !isNum(o.sd) || !okCi || !okSign || !(t === null || typeof t === "number")) {
    throw new Error("not a paired statistics record (n, mean_gain, sd, t, ci95, sign_test)");
  }
  return {
    n: o.n,
    mean_gain: o.mean_gain,
    sd: o.sd,
    t: t as number | null,
    ci95: ci === null ? null : [(ci as number[])[0], (ci as number[])[1]],
    sign_test: { wins: st!.wins as number, losses: st!.losses as number, ties: st!.ties as number, p: st!.p as number },
  };
}

/**
 * The error that stops an eval, screen or round when any attempt of `harness` never reached its model (no upstream,
 * unreachable, auth, 5xx): such an attempt says nothing of the harness, so nothing is scored, judged or appended to
 * memory from the run, and the command exits non-zero saying why. Undefined when every attempt met its model.
 */
export function modelUnavailableError(harness: string, attempts: readonly Attempt[], logs: string): EvolveError | undefined {
  const bad = attempts.filter((a) => a.model_unavailable);
  if (bad.length === 0) return undefined;
  return new EvolveError(
    "attempts_model_unavailable",
    `${bad.length} of ${attempts.length} attempts of ${harness} never reached their model (${bad[0].task}: ${bad[0].invalid_reason ?? "model unavailable"}); nothing was scored or appended to memory`,
    `give the model an upstream (gateway.toml, or the provider's *_API_KEY) and run it again; logs under ${logs}`,
  );
}
