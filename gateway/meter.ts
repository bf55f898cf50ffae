/**
 * Metering: an in-memory aggregate of every model call per trial and lane, and the parsed-trace `usage` events
 * the gateway contributes to a trial's trace.
 *
 * Live spend is a lower bound: a call whose cost is unknown (no price) adds its tokens but no money, and is
 * counted in `unpricedCalls` so no reader mistakes the sum for the whole. The `sink` hook hands every record to
 * the engine, which persists it where it keeps trials; the gateway itself stores nothing.
 */
import type { CallRecord, Lane, Meter as MeterFn, Usage } from "./types.ts";

/** Token and money totals for one lane of one trial (or of a job). */
export interface LaneTotals {
  calls: number;
  /** Calls answered with an error status (>= 400) or a transport error. */
  errors: number;
  /** Sum of priced calls, USD: a lower bound while `unpricedCalls` > 0 or calls are in flight. */
  spentUsd: number;
  unpricedCalls: number;
  tokens: Usage;
}

/** Both lanes of one trial. */
export interface TrialTotals {
  agent: LaneTotals;
  judge: LaneTotals;
}

/** Options for `CallMeter`. */
export interface CallMeterOptions {
  /** Receives every record as it is metered (e.g. the engine's store writer). Its errors are reported, not thrown. */
  sink?: (call: CallRecord) => void;
  /** Called when the sink throws, so a failing store cannot break the proxied call. */
  onSinkError?: (err: unknown, call: CallRecord) => void;
  /** Keep each trial's records in memory for `records()` (default true); the engine calls `forget` once persisted. */
  keepRecords?: boolean;
}

const zeroUsage = (): Usage => ({ input_tokens: 0, cached_read_tokens: 0, cache_write_tokens: 0, output_tokens: 0, reasoning_tokens: 0 });
/** Totals of a lane with no calls. */
export const zeroLane = (): LaneTotals => ({ calls: 0, errors: 0, spentUsd: 0, unpricedCalls: 0, tokens: zeroUsage() });

function add(t: LaneTotals, c: CallRecord): void {
  t.calls++;
  if (c.status >= 400 || c.error !== undefined) t.errors++;
  if (c.usage) {
    t.tokens.input_tokens += c.usage.input_tokens;
    t.tokens.cached_read_tokens += c.usage.cached_read_tokens;
    t.tokens.cache_write_tokens += c.usage.cache_write_tokens;
    if (c.usage.cache_write_1h_tokens) t.tokens.cache_write_1h_tokens = (t.tokens.cache_write_1h_tokens ?? 0) + c.usage.cache_write_1h_tokens;
    t.tokens.output_tokens += c.usage.output_tokens;
    t.tokens.reasoning_tokens += c.usage.reasoning_tokens;
  }
  // A call that used tokens but has no cost is unpriced; a call with no usage at all (an error before any
  // token) cost nothing we can know of either, and is counted as unpriced only if it was answered at all.
  if (c.cost_usd !== null) t.spentUsd += c.cost_usd;
  else if (c.usage || c.status < 400) t.unpricedCalls++;
}

/** The per-trial, per-lane aggregator. `meter` is the function to inject into the gateway app. */
export class CallMeter {
  private readonly trials = new Map<string, TrialTotals>();
  private readonly jobs = new Map<string, TrialTotals>();
  private readonly kept = new Map<string, CallRecord[]>();

  constructor(private readonly opts: CallMeterOptions = {}) {}

  /** Records one finished call. Bound, so it can be passed as the gateway's `Meter`. */
  readonly meter: MeterFn = (call: CallRecord) => {
    let t = this.trials.get(call.trialId);
    if (!t) this.trials.set(call.trialId, (t = { agent: zeroLane(), judge: zeroLane() }));
    add(t[call.lane], call);
    if (call.jobId !== undefined) {
      let j = this.jobs.get(call.jobId);
      if (!j) this.jobs.set(call.jobId, (j = { agent: zeroLane(), judge: zeroLane() }));
      add(j[call.lane], call);
    }
    if (this.opts.keepRecords !== false) {
      const list = this.kept.get(call.trialId);
      if (list) list.push(call);
      else this.kept.set(call.trialId, [call]);
    }
    if (this.opts.sink) {
      try {
        this.opts.sink(call);
      } catch (err) {
        this.opts.onSinkError?.(err, call);
      }
    }
  };

  /** A trial's totals per lane (zeros for a trial with no calls). */
  trial(trialId: string): TrialTotals {
    return structuredClone(this.trials.get(trialId) ?? { agent: zeroLane(), judge: zeroLane() });
  }

  /** A job's totals per lane, over all its trials. */
  job(jobId: string): TrialTotals {
    return structuredClone(this.jobs.get(jobId) ?? { agent: zeroLane(), judge: zeroLane() });
  }

  /** Live spend of a trial's lane, USD: a lower bound (see `LaneTotals.spentUsd`). */
  liveSpentUsd(trialId: string, lane: Lane = "agent"): number {
    return this.trials.get(trialId)?.[lane].spentUsd ?? 0;
  }

  /** A trial's records in call order (empty when `keepRecords` is false or after `forget`). */
  records(trialId: string): CallRecord[] {
    return [...(this.kept.get(trialId) ?? [])];
  }

  /** Drops a trial's kept records and totals once the engine has persisted them. */
  forget(trialId: string): void {
    this.kept.delete(trialId);
    this.trials.delete(trialId);
  }
}

/** Token counts as a trace usage event carries them. */
export interface TraceUsage {
  /** All prompt tokens, cached included (the ATIF/OpenAI sense of "prompt"). */
  promptTokens: number;
  completionTokens: number;
  /** Uncached input only. */
  inputTokens: number;
  cachedReadTokens: number;
  cachedWriteTokens: number;
  /** Reasoning tokens, part of `completionTokens`. */
  thoughtTokens: number;
  totalTokens: number;
}

/** The parsed-trace event the gateway adds for one call (platform-trial-outputs.md: `source = "gateway"`). */
export interface GatewayUsageEvent {
  type: "usage";
  data: {
    update: {
      sessionUpdate: "usage";
      source: "gateway";
      scope: "call";
      model: string;
      lane: Lane;
      usage: TraceUsage;
      /** Priced cost, USD; null when the model has no price (never 0 for unknown). */
      cost_usd: number | null;
      /** When the call started (ISO) and how long it took: a span's time in an OpenTelemetry export (engine/otel). */
      started_at?: string;
      latency_ms?: number;
    };
  };
}

/** Trace token counts from normalized usage (ACP's names for the cache and thought buckets). */
export function traceUsage(u: Usage): TraceUsage {
  const prompt = u.input_tokens + u.cached_read_tokens + u.cache_write_tokens;
  return {
    promptTokens: prompt,
    completionTokens: u.output_tokens,
    inputTokens: u.input_tokens,
    cachedReadTokens: u.cached_read_tokens,
    cachedWriteTokens: u.cache_write_tokens,
    thoughtTokens: u.reasoning_tokens,
    totalTokens: prompt + u.output_tokens,
  };
}

/**
 * The trace event for one call, or undefined for a call that carried no usage (a refused or failed request, a
 * `/v1/models` listing): such calls spent no tokens we know of and would only add empty lines to the trace.
 */
export function usageEvent(call: CallRecord): GatewayUsageEvent | undefined {
  if (!call.usage) return undefined;
  return {
    type: "usage",
    data: {
      update: {
        sessionUpdate: "usage",
        source: "gateway",
        scope: "call",
        model: call.model,
        lane: call.lane,
        usage: traceUsage(call.usage),
        cost_usd: call.cost_usd,
        started_at: call.started_at,
        latency_ms: call.latency_ms,
      },
    },
  };
}

/** A trial's gateway usage events in call order (by `started_at`, then as recorded), to follow the harness's. */
export function usageEvents(calls: CallRecord[]): GatewayUsageEvent[] {
  return calls
    .map((c, i) => ({ c, i }))
    .sort((a, b) => a.c.started_at.localeCompare(b.c.started_at) || a.i - b.i)
    .map(({ c }) => usageEvent(c))
    .filter((e): e is GatewayUsageEvent => e !== undefined);
}

/** The header the gateway marks a budget's refusal with (its value: the budget's scope), so a client can tell it
 * from a provider's rate limit: both are 429. */
export const REFUSED_HEADER = "x-evolve-refused";

/**
 * What the rule of {@link unavailableCall} reads of a failed call, as the gateway records it or as a client of the
 * gateway sees it: the status (undefined: no answer at all, a client that could not connect), whether a budget
 * refused it (the gateway's record, or {@link REFUSED_HEADER} on the answer) and whether no upstream serves its model.
 */
export interface CallFailure {
  status: number | undefined;
  refused?: unknown;
  unserved?: boolean;
}

/**
 * The one rule of "this call never reached its model", for a reason that is the gateway's or the provider's and
 * never the agent's: no upstream serves the model, no answer at all, the upstream could not be reached (the
 * gateway's 502), it refused the real key (401/403), did not know the model (404), rate-limited it (429 from
 * upstream) or failed (5xx). A 400-class answer to a malformed request is the agent's own, and a budget's refusal
 * (429 too) is settled as a budget. The trial runner (through {@link modelUnavailable}), the evolver's card runs and
 * the conductor's own loop (engine/conductor/loop.ts, which sees only the answer) all ask it.
 */
export function unavailableFailure(f: CallFailure): boolean {
  if (f.refused) return false;
  if (f.unserved) return true;
  const s = f.status;
  return s === undefined || s >= 500 || s === 401 || s === 403 || s === 404 || s === 429;
}

/** {@link unavailableFailure} of a call the gateway metered. */
export function unavailableCall(c: CallRecord): boolean {
  return unavailableFailure(c);
}

/** An agent-lane model call the evidence counts: not a `/v1/models` listing, not a budget's refusal. */
export function agentModelCall(c: CallRecord): boolean {
  return c.lane === "agent" && c.route !== "models" && c.route !== "gemini_models" && !c.refused;
}

/**
 * Why the agent never met its model, from a trial's own calls, or undefined when it did (or made no call, or a
 * call failed for a reason of its own): at least one agent-lane model call, none answered, every failure one the
 * agent could not cause. One good answer makes whatever follows the agent's. `/v1/models` listings do not count.
 */
export function modelUnavailable(calls: readonly CallRecord[]): string | undefined {
  const mine = calls.filter(agentModelCall);
  if (mine.length === 0 || !mine.every(unavailableCall)) return undefined;
  const kinds = new Map<string, number>();
  for (const c of mine) {
    const why = c.unserved ? "no upstream serves it" : c.status === 502 && c.error?.startsWith(`upstream ${c.upstream} unreachable`) ? `upstream ${c.upstream} unreachable` : `upstream ${c.upstream} answered ${c.status}`;
    kinds.set(why, (kinds.get(why) ?? 0) + 1);
  }
  const first = mine[0]!;
  const detail = (first.error ?? "").replace(/\s+/g, " ").trim().slice(0, 200);
  const models = [...new Set(mine.map((c) => c.model))].join(", ");
  const counts = [...kinds].map(([k, n]) => `${k} (${n})`).join(", ");
  return `the agent's ${mine.length} model call${mine.length === 1 ? "" : "s"} to ${models} all failed before any answer: ${counts}${detail ? `; first: ${detail}` : ""}`;
}
