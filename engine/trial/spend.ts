/**
 * The trial's side of the gateway: its lease's totals as the trial record keeps them, and the gateway a trial run
 * on its own uses. The process gateway itself lives in engine/gateway-host/model-gateway.ts.
 */
import type { Store } from "../store/index.ts";
import type { LaneTotals } from "../../gateway/meter.ts";
import { ModelGateway } from "../gateway-host/model-gateway.ts";
import { tokensOfUsage } from "./tokens.ts";

/** The lane totals as the trial record keeps them (the store's `spend` and `tokens`). */
export function spendRecord(t: { agent: LaneTotals; judge: LaneTotals }, final: boolean) {
  const finalOf = (l: LaneTotals) => (final && l.unpricedCalls === 0 ? l.spentUsd : null);
  // prompt counts cached reads and writes (tokens.ts: the one definition)
  const tokens = (l: LaneTotals) => tokensOfUsage(l.tokens);
  const agentFinal = finalOf(t.agent);
  return {
    spend: {
      live_usd: t.agent.spentUsd,
      final_usd: agentFinal,
      source: agentFinal !== null ? "measured" : final ? "lower_bound" : "live",
      calls: t.agent.calls,
      unpriced_calls: t.agent.unpricedCalls,
      ...(t.judge.calls > 0
        ? { judge: { live_usd: t.judge.spentUsd, final_usd: finalOf(t.judge), calls: t.judge.calls, unpriced_calls: t.judge.unpricedCalls, tokens: tokens(t.judge) } }
        : {}),
    },
    tokens: tokens(t.agent),
  };
}

// keyed by the open store, so a store closed and opened again never hands a trial a gateway bound to the old one
const shared = new WeakMap<Store, ModelGateway>();

/**
 * The gateway a trial uses when its caller passed none (a trial run on its own, as tests and `trial retry` do):
 * one per home for the life of the process. Its leases end with their trials, so nothing is left listening.
 */
export function homeGateway(home: string, store: Store): ModelGateway {
  let gw = shared.get(store);
  if (!gw) shared.set(store, (gw = new ModelGateway({ home, store })));
  return gw;
}
