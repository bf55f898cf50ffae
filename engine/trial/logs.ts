/**
 * A trial's log streams as `trial logs` and the local API (engine/serve) read them: which files make a stream (a
 * multi-step trial's archived steps, then the current one), why one is absent, and the `--json` document of a
 * recorded one, built once here.
 */
import { existsSync } from "node:fs";
import { EvolveError } from "../errors.ts";
import { isSettledStatus } from "./lifecycle.ts";
import type { TrialRecord } from "../store/index.ts";
import { readBoxFile } from "../box/fs.ts";
import { agentStreamFile, archivedSteps, trialPaths } from "../box/layout.ts";

/**
 * The streams `trial logs` knows: the agent's, the verifier's, evolve's own (trial.log), the image builds' (setup.log)
 * and the agent's box's own output (box.log); the last is named but not recorded today.
 */
export const LOG_STREAMS = ["agent", "verifier", "system", "setup", "box", "metrics"] as const;
export type LogStream = (typeof LOG_STREAMS)[number];

export const UNRECORDED: Partial<Record<LogStream, string>> = {
  metrics: "the metrics stream (resource samples of the box) is named but not recorded today",
};

/** One file of a stream: a finished step's archived copy (`step` its name), or the current outputs (`step` null). */
export interface StreamPart {
  step: string | null;
  file: string;
}

/**
 * The files of a stream in reading order: each archived step's copy in the order the steps ran, then the current
 * one; with `step`, that step's copy alone (a step the trial did not archive is `step_unknown`, listing those it did).
 */
export function streamParts(tdir: string, t: TrialRecord, stream: LogStream, step?: string): StreamPart[] {
  const pick = (dir: string): string => {
    if (stream === "verifier") return trialPaths(dir).testStdout;
    return agentStreamFile(trialPaths(dir).agent, t.agent);
  };
  const p = trialPaths(tdir);
  const single = (file: string): StreamPart[] => [{ step: null, file }];
  if (step !== undefined && stream !== "agent" && stream !== "verifier") {
    throw new EvolveError("usage", `--step applies to the agent and verifier streams, not ${stream}`, "each step has its own agent and verifier logs; the other streams are the trial's");
  }
  if (stream === "system") return single(p.log);
  if (stream === "setup") return single(p.setup);
  if (stream === "box") return single(p.box);
  const steps = archivedSteps(tdir, (t.step_results ?? []).map((r) => r.name));
  if (step !== undefined) {
    if (!steps.includes(step)) {
      throw steps.length > 0
        ? new EvolveError("step_unknown", `trial ${t.id} has no step ${JSON.stringify(step)}`, `its steps: ${steps.join(", ")}`)
        : new EvolveError("step_unknown", `trial ${t.id} has no steps: --step is for a multi-step task's trial`, `without --step: evolve trial logs ${t.id} --stream ${stream}`);
    }
    return [{ step, file: pick(p.step(step)) }];
  }
  return [...steps.map((name) => ({ step: name, file: pick(p.step(name)) })), { step: null, file: pick(tdir) }];
}

/** Why a trial has no such stream, as `stream_not_recorded`. */
export function notRecorded(t: TrialRecord, stream: LogStream): EvolveError {
  const where = `${t.status}${t.attempt_phase ? `, phase ${t.attempt_phase}` : ""}`;
  const why = isSettledStatus(t.status)
    ? {
        verifier: "its verifier never ran",
        agent: "its agent never wrote output",
        setup: "it failed before its build phase",
        box: "its box never started",
        system: "it kept no system log",
        metrics: "",
      }[stream]
    : "nothing is recorded yet";
  return new EvolveError("stream_not_recorded", `trial ${t.id} has no ${stream} stream: ${why} (${where})`, isSettledStatus(t.status) ? "see `evolve trial show` for what happened" : `follow it as it arrives: evolve trial logs ${t.id} --stream ${stream} --follow`);
}

/** What `trial logs --json` puts in one document per file: its last 16 MiB (the whole stream prints without --json). */
export const JSON_LOG_LIMIT = 16 * 1024 * 1024;

/**
 * `trial logs --json`'s document of a recorded stream: its files' text (each its last JSON_LOG_LIMIT bytes), and,
 * for one step or a multi-step trial read whole, each part with its step. `parts`: the stream's files that exist
 * (read here from streamParts when not given); none is `stream_not_recorded`.
 */
export async function logsDocument(tdir: string, t: TrialRecord, stream: LogStream, step?: string, parts?: StreamPart[]) {
  const all = streamParts(tdir, t, stream, step);
  const there = parts ?? all.filter((p) => existsSync(p.file));
  if (there.length === 0) throw notRecorded(t, stream);
  const headed = step === undefined && all.some((p) => p.step !== null);
  const texts: string[] = [];
  for (const p of there) texts.push((await readBoxFile(tdir, p.file, { limit: JSON_LOG_LIMIT, tail: true })) ?? "");
  const steps = step !== undefined || headed ? { ...(step !== undefined ? { step } : {}), parts: there.map((p, i) => ({ step: p.step, file: p.file, text: texts[i] })) } : {};
  return { trial_id: t.id, stream, recorded: true, files: there.map((p) => p.file), text: texts.join(""), ...steps };
}

/** `trial logs --json`'s document of a stream that is named but never recorded (UNRECORDED). */
export function unrecordedDocument(trialId: string, stream: LogStream) {
  return { trial_id: trialId, stream, recorded: false, reason: UNRECORDED[stream] ?? "", text: "" };
}
