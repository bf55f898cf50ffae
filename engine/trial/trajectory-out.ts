/**
 * `agent/trajectory.json` at persist: the stored trace (the harness's events, then the gateway's per-call usage
 * events, which give `final_metrics`) turned into ATIF by engine/trace/atif.ts and checked by its validator. Only a
 * trajectory the validator accepts is written: a file every reader must second-guess is worse than none, and the
 * findings go to trial.log.
 */
import { firstLine } from "../errors.ts";
import type { HarnessSettle } from "../harness/types.ts";
import { buildTrajectory } from "../trace/atif.ts";
import { validateTrajectory } from "../trace/atif-validate.ts";

/** The agent a trajectory names (ATIF `agent`). */
export interface TrajectoryAgent {
  name: string;
  version: string | null;
  model: string;
}

/** Builds, validates and writes `agent/trajectory.json`; never throws (a failure is logged). Whether it was written. */
export async function writeTrajectory(st: HarnessSettle, agent: TrajectoryAgent): Promise<boolean> {
  try {
    const doc = buildTrajectory(st.events(), { agent: { name: agent.name, version: agent.version ?? "unknown", model_name: agent.model }, sessionId: st.trialId });
    const findings = validateTrajectory(doc);
    if (findings.length > 0) {
      st.log(`trajectory.json not written: the validator refused it: ${findings.slice(0, 5).map((f) => `${f.path}: ${f.message}`).join("; ")}`);
      return false;
    }
    await st.writeAgentFile("trajectory.json", st.redact(JSON.stringify(doc, null, 2)) + "\n");
    return true;
  } catch (e) {
    st.log(`trajectory.json not written: ${firstLine(e)}`);
    return false;
  }
}
