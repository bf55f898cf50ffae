/**
 * `evolve trial stop` across processes: the command marks the trial's record (`stop_requested_at`) and the process
 * running the trial notices within a poll interval and aborts it, so it settles CANCELLED with CancelledError
 * while the rest of its job goes on. The store is the only channel: the stopper needs no pid, no socket, and works
 * the same whether the runner is `evolve run`, `job resume` or a test.
 */
import type { Store } from "../store/index.ts";

/** How often a running trial looks for a stop request. */
export const STOP_POLL_MS = 250;

/**
 * An AbortSignal that fires when `outer` does or when the trial's record asks to stop. Call `dispose` when the
 * trial has settled.
 */
export function watchStopRequest(store: Store, trialId: string, outer?: AbortSignal, intervalMs = STOP_POLL_MS): { signal: AbortSignal; dispose: () => void } {
  const ctl = new AbortController();
  const onOuter = () => ctl.abort(outer?.reason);
  if (outer?.aborted) ctl.abort(outer.reason);
  outer?.addEventListener("abort", onOuter, { once: true });
  const check = () => {
    try {
      if (store.getTrial(trialId)?.stop_requested_at) ctl.abort(new Error("stop requested"));
    } catch {
      // a store read failing here must not crash the trial; the next poll tries again
    }
  };
  check();
  const timer = setInterval(() => {
    check();
    if (ctl.signal.aborted) clearInterval(timer);
  }, intervalMs);
  timer.unref?.();
  return {
    signal: ctl.signal,
    dispose: () => {
      clearInterval(timer);
      outer?.removeEventListener("abort", onOuter);
    },
  };
}
