/**
 * The gateway a cards screen's agents reach their model through: the process's ModelGateway served on loopback with
 * one local credential (the same budgets and ledger as `evolve gateway serve`), its spend summed from each metered
 * call, so the cards evaluator attributes spend per attempt by the difference (cards run one at a time). Its
 * `secrets` are every credential a card's log must not show: its own key and every provider key it could send.
 */
import type { Store } from "../store/index.ts";
import { agentModelCall, modelUnavailable, unavailableCall } from "../../gateway/meter.ts";
import type { CallRecord } from "../../gateway/types.ts";
import { loadUpstreams, type Upstreams } from "../../gateway/upstreams.ts";
import { providerKeysFromEnv } from "../trial/recorder.ts";
import { ModelGateway } from "../gateway-host/model-gateway.ts";
import type { CardsGateway } from "./evals.ts";

/** The most calls of one attempt kept for its verdict while none is answered (an agent retrying a dead upstream). */
const WINDOW_MAX_CALLS = 10_000;

/** A served local gateway: what a cards evaluator needs, and `close`. */
export interface LocalGateway extends CardsGateway {
  /** Model calls metered so far. */
  calls(): number;
  close(): Promise<void>;
}

/** Serves a ModelGateway for `home`/`store` on 127.0.0.1 (a free port); upstreams from the home unless given. */
export async function openLocalGateway(o: { home: string; store: Store; upstreams?: Upstreams; warn?: (m: string) => void }): Promise<LocalGateway> {
  const gw = new ModelGateway({ home: o.home, store: o.store, upstreams: o.upstreams, warn: o.warn });
  // read now, not at the gateway's first call: a run that never calls its model can still print gateway.toml
  let configured: string[] = [];
  try {
    configured = [...(o.upstreams ?? loadUpstreams({ home: o.home })).byName.values()].map((u) => u.apiKey).filter((k): k is string => !!k);
  } catch {
    // an unreadable gateway.toml is the gateway's to report at its first call; the environment's keys still count
  }
  let usd = 0;
  let n = 0;
  // the calls of the attempt running now (cards run one at a time), until one of them is answered: from then on
  // the verdict cannot change, so nothing more is kept, and a failing agent's calls are kept up to a bound
  let window: CallRecord[] = [];
  let answered = false;
  let refusal: string | undefined;
  try {
    const { url, key } = await gw.serveLocal({ port: 0, host: "127.0.0.1" }, (c) => {
      n++;
      usd += c.cost_usd ?? 0;
      if (c.refused) refusal ??= c.error ?? `${c.refused}: budget exceeded`;
      if (answered) return;
      if (agentModelCall(c) && !unavailableCall(c)) {
        answered = true;
        window = [];
      } else if (window.length < WINDOW_MAX_CALLS) window.push(c);
    });
    return {
      url,
      key,
      spent: () => usd,
      calls: () => n,
      secrets: () => [key, ...configured, ...gw.providerKeys(), ...providerKeysFromEnv()],
      attempt: () => {
        window = [];
        answered = false;
        refusal = undefined;
        return { modelUnavailable: () => (answered ? undefined : modelUnavailable(window)), budgetRefusal: () => refusal };
      },
      // a call is metered once its response has ended, a moment after the client has read it
      settle: () => new Promise((done) => setTimeout(done, 5)),
      close: () => gw.close(),
    };
  } catch (e) {
    await gw.close();
    throw e;
  }
}
