/**
 * `agent/trajectory.json` at persist: the stored trace (the harness's events, then the gateway's per-call usage
 * events, which give `final_metrics`) turned into ATIF by engine/trace/atif.ts and checked by its validator. Only a
 * trajectory the validator accepts is written: a file every reader must second-guess is worse than none, and the
 * findings go to trial.log.
 *
 * STAND-IN WIRING: engine/trace/atif.ts (wt-atif) is loaded by name at run time until it lands on main; then this
 * becomes a static import and `atifModule` goes.
 */
import type { TraceEvent } from "../trace/events.ts";
import type { HarnessSettle } from "../harness/types.ts";

/** The agent a trajectory names (ATIF `agent`). */
export interface TrajectoryAgent {
  name: string;
  version: string | null;
  model: string;
  provider: string;
}

interface AtifModule {
  buildTrajectory(events: readonly TraceEvent[], opts: Record<string, unknown>): unknown;
  validateTrajectory?(doc: unknown): readonly unknown[] | { ok: boolean; errors?: readonly unknown[] };
}

async function atifModule(): Promise<AtifModule | undefined> {
  const name = "../trace/atif.ts";
  try {
    const m = (await import(/* @vite-ignore */ name)) as Partial<AtifModule>;
    return typeof m.buildTrajectory === "function" ? (m as AtifModule) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether this build can write trajectories (the ATIF builder is present). */
export async function canWriteTrajectories(): Promise<boolean> {
  return (await atifModule()) !== undefined;
}

/** Builds, validates and writes `agent/trajectory.json`; never throws (a failure is logged). */
export async function writeTrajectory(st: HarnessSettle, agent: TrajectoryAgent): Promise<boolean> {
  const atif = await atifModule();
  if (!atif) {
    st.log("trajectory.json not written: this build has no ATIF builder (engine/trace/atif.ts)");
    return false;
  }
  try {
    const events = st.events();
    const doc = atif.buildTrajectory(events, {
      agent: { name: agent.name, version: agent.version ?? "unknown", model_name: agent.model },
      agentName: agent.name,
      agentVersion: agent.version ?? "unknown",
      modelName: agent.model,
      sessionId: st.trialId,
    });
    const v = atif.validateTrajectory?.(doc);
    const errors = Array.isArray(v) ? v : v && !(v as { ok: boolean }).ok ? ((v as { errors?: unknown[] }).errors ?? ["invalid"]) : [];
    if (errors.length > 0) {
      st.log(`trajectory.json not written: the validator refused it: ${errors.slice(0, 5).map((e) => (typeof e === "string" ? e : JSON.stringify(e))).join("; ")}`);
      return false;
    }
    await st.writeAgentFile("trajectory.json", st.redact(JSON.stringify(doc, null, 2)) + "\n");
    return true;
  } catch (e) {
    st.log(`trajectory.json not written: ${(e as Error).message}`);
    return false;
  }
}
