/**
 * The gateway a cards screen's agents reach their model through: the process's ModelGateway served on loopback with
 * one local credential (the same budgets and ledger as `evolve gateway serve`), its spend summed from each metered
 * call, so the cards evaluator attributes spend per attempt by the difference (cards run one at a time).
 */
import type { Store } from "../store/index.ts";
import type { Upstreams } from "../../gateway/upstreams.ts";
import { ModelGateway } from "../gateway/model-gateway.ts";
import type { CardsGateway } from "./evals.ts";

/** A served local gateway: what a cards evaluator needs, and `close`. */
export interface LocalGateway extends CardsGateway {
  /** Model calls metered so far. */
  calls(): number;
  close(): Promise<void>;
}

/** Serves a ModelGateway for `home`/`store` on 127.0.0.1 (a free port); upstreams from the home unless given. */
export async function openLocalGateway(o: { home: string; store: Store; upstreams?: Upstreams; warn?: (m: string) => void }): Promise<LocalGateway> {
  const gw = new ModelGateway({ home: o.home, store: o.store, upstreams: o.upstreams, warn: o.warn });
  let usd = 0;
  let n = 0;
  try {
    const { url, key } = await gw.serveLocal({ port: 0, host: "127.0.0.1" }, (c) => {
      n++;
      usd += c.cost_usd ?? 0;
    });
    return {
      url,
      key,
      spent: () => usd,
      calls: () => n,
      // a call is metered once its response has ended, a moment after the client has read it
      settle: () => new Promise((done) => setTimeout(done, 5)),
      close: () => gw.close(),
    };
  } catch (e) {
    await gw.close();
    throw e;
  }
}
