/**
 * `evolve trace export <trial|job> --otlp FILE|URL`: settled trials as OpenTelemetry traces (engine/otel), and the
 * `--otlp` of `evolve run`, which streams each trial as it settles. Parsing and printing only.
 *
 * Exit codes: 0 when every trial was sent; 2 for a destination, header or protocol that is refused before anything
 * is sent, an endpoint that cannot be reached or refuses a request (`otlp_*`), or a reference that names no trial or
 * job (`otlp_target_not_found`).
 */
import { exportTrials, liveExporter, resolveTarget, shownUrl, selectForExport, type OtlpOptions, type OtlpTarget } from "../engine/otel/mod.ts";
import type { TrialRecord } from "../engine/store/mod.ts";
import { out, outJson, style } from "./output.ts";
import { withStore } from "./store.ts";

/** The flags of `trace export`, as commander hands them over. */
export interface TraceExportOptions {
  otlp: string;
  protocol?: string;
  header?: string[];
  timeout?: number;
  json?: boolean;
}

/** The destination as messages show it (a URL without credentials or query). */
function shown(t: OtlpTarget): string {
  return t.kind === "url" ? shownUrl(t.url) : t.path;
}

/** The checked destination of `--otlp` and its companions (`timeout` in seconds). */
export function otlpTarget(o: { otlp: string; protocol?: string; header?: string[]; timeout?: number }): OtlpTarget {
  const opts: OtlpOptions = { dest: o.otlp, protocol: o.protocol, headers: o.header };
  if (o.timeout !== undefined) opts.timeoutMs = o.timeout * 1000;
  return resolveTarget(opts);
}

/** `evolve trace export <trial|job> --otlp FILE|URL`. `--json` prints `{destination, protocol, trials, spans, job_id, unsettled}`. */
export async function traceExportCommand(ref: string, opts: TraceExportOptions): Promise<number> {
  // the destination is checked before the store is read, so a bad URL costs nothing
  const target = otlpTarget(opts);
  return withStore(async (store, home) => {
    const sel = selectForExport(store, ref);
    const report = await exportTrials(home, sel.trials, target, (t, n) => {
      if (!opts.json) out(`${style.dim("sent")} trial ${t.id} ${style.dim(`(${n} span${n === 1 ? "" : "s"})`)}`);
    });
    if (opts.json) {
      outJson({ destination: shown(target), protocol: target.protocol, job_id: sel.jobId ?? null, trials: report.trials, spans: report.spans, unsettled: sel.unsettled });
      return 0;
    }
    out(`exported ${report.trials} trial${report.trials === 1 ? "" : "s"} (${report.spans} spans) to ${shown(target)} as ${target.protocol}`);
    if (sel.unsettled.length > 0) out(style.dim(`${sel.unsettled.length} trial(s) still running were left out: export the job again once they settle`));
    return 0;
  });
}

/**
 * The `--otlp` of `evolve run`: an `onEvent` wrapper that sends each trial once it settles, and `done` to wait for
 * the sends still queued. An export failure is a warning (through `warn`); the trial's stored status is never touched.
 */
export function liveOtlp(home: string, o: { otlp: string; otlpProtocol?: string; otlpHeader?: string[] }, warn: (line: string) => void) {
  const target = otlpTarget({ otlp: o.otlp, protocol: o.otlpProtocol, header: o.otlpHeader });
  const live = liveExporter(home, target, warn);
  return {
    onEvent<E extends { kind: string }>(inner: ((e: E) => void) | undefined): (e: E) => void {
      return (e) => {
        if (e.kind === "trial_settled") live.settled((e as unknown as { trial: TrialRecord }).trial);
        inner?.(e);
      };
    },
    done: () => live.done(),
  };
}
