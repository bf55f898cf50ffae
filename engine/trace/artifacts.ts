/**
 * A settled (or running) trial's artifacts one at a time, for `trial download --stream <name>`: where each lives in
 * the trial folder and how it is read. Absent is an error (`artifact_not_recorded`), never an empty output. Files a
 * box could write (agent/, verifier/) are read through box/fs.ts (no link followed, no FIFO waited on); the parsed
 * trace and the ATIF built from it are streamed from the trace store, never held whole.
 */
import { readFileSync } from "node:fs";
import { join, posix } from "node:path";
import { EvolveError } from "../errors.ts";
import { trialDir, type TrialRecord } from "../store/index.ts";
import { BoxFileRefused, readBoxFile, streamBoxFile } from "../box/fs.ts";
import { agentStreamNames, BOX, trialPaths } from "../box/layout.ts";
import { TrajectoryBuilder } from "./atif.ts";
import { hasTrace, parseLine, traceBytes, traceLines } from "./store.ts";

import type { ArtifactStream } from "./artifact-streams.ts";
export { ARTIFACT_STREAMS, type ArtifactStream } from "./artifact-streams.ts";

/** The harness's stderr in agent/ (the harness writes its stdout under its own name, `<harness>.txt`). */
export const STDERR_FILE = "stderr.log";
/** The ATIF trajectory in agent/, when the trial stored one. */
export const TRAJECTORY_FILE = "trajectory.json";
/** The home capture record in agent/. */
export const AGENT_HOME_FILE = "agent-home.json";

/** Where output goes: resolves once the chunk is taken (a pipe's backpressure is honoured). */
export type Sink = (chunk: string | Buffer) => Promise<void>;

function absent(t: TrialRecord, name: ArtifactStream, why: string): EvolveError {
  return new EvolveError("artifact_not_recorded", `trial ${t.id} has no ${name}: ${why} (${t.status})`, "see `evolve trial show` for what happened");
}

function refused(e: unknown): never {
  if (e instanceof BoxFileRefused) throw new EvolveError("stream_refused", e.message, "the box planted it; the trial's other outputs are unaffected");
  throw e;
}

/** The harness's stdout file's possible paths, in order (layout.ts agentStreamNames decides them). */
function stdoutFiles(t: TrialRecord, agentDir: string): string[] {
  return agentStreamNames(t.agent).map((n) => join(agentDir, n));
}

/** Streams a box-written file to `sink`; false when it is absent. */
async function streamFile(root: string, path: string, sink: Sink): Promise<boolean> {
  let pending: Promise<void> = Promise.resolve();
  let any = false;
  const end = await streamBoxFile(root, path, (b) => {
    any = true;
    pending = pending.then(() => sink(b));
  }).catch(refused);
  await pending;
  // an empty file that exists is the artifact, empty; a missing one is not
  return any || end > 0 || (await readBoxFile(root, path, { limit: 0 }).catch(refused)) !== undefined;
}

/**
 * Writes the artifact `name` of trial `t` to `sink`. Throws `artifact_not_recorded` (exit 1) when the trial did not
 * store it, `stream_refused` when its file is a link or a FIFO the box planted.
 */
export async function streamArtifact(home: string, t: TrialRecord, name: ArtifactStream, sink: Sink): Promise<void> {
  const root = trialDir(home, t.id);
  const p = trialPaths(root);
  switch (name) {
    case "trace-stdout": {
      for (const f of stdoutFiles(t, p.agent)) if (await streamFile(root, f, sink)) return;
      throw absent(t, name, "its agent never wrote to stdout");
    }
    case "trace-stderr":
      if (await streamFile(root, join(p.agent, STDERR_FILE), sink)) return;
      throw absent(t, name, "its agent's stderr was not kept");
    case "verifier":
      if (await streamFile(root, p.testStdout, sink)) return;
      throw absent(t, name, "its verifier never ran");
    case "trace-parsed": {
      if (!hasTrace(home, t.id)) throw absent(t, name, "it stored no parsed trace");
      await streamTraceLines(home, t.id, sink);
      return;
    }
    case "trace-atif": {
      if (await streamFile(root, join(p.agent, TRAJECTORY_FILE), sink)) return;
      if (!hasTrace(home, t.id)) throw absent(t, name, "it stored neither a trajectory nor a parsed trace to build one from");
      const b = new TrajectoryBuilder({ agent: { name: t.agent, version: agentVersion(p.result) ?? "unknown", ...(t.model ? { model_name: t.model } : {}) }, sessionId: t.id });
      for (const s of traceLines(home, t.id)) b.push(parseLine(s));
      await sink(JSON.stringify(b.finish(), null, 2) + "\n");
      return;
    }
    case "agent-home":
      await streamHome(root, t, sink);
      return;
  }
}

/** The harness version result.json recorded (`agent_info.version`), for an ATIF built on the fly. */
function agentVersion(resultFile: string): string | undefined {
  try {
    const r = JSON.parse(readFileSync(resultFile, "utf8")) as { agent_info?: { version?: unknown } };
    return typeof r.agent_info?.version === "string" ? r.agent_info.version : undefined;
  } catch {
    return undefined;
  }
}

/** The stored trace's whole lines as they are stored, chunk by chunk (never decoded, never held whole). */
export async function streamTraceLines(home: string, trialId: string, sink: Sink): Promise<void> {
  for (const b of traceBytes(home, trialId)) await sink(b);
}

/**
 * The home's text view: one JSON object from each captured file's box path to its text, written file by file. A
 * file agent-home.json lists but that is gone or is not text is left out (the record says what was skipped).
 */
async function streamHome(root: string, t: TrialRecord, sink: Sink): Promise<void> {
  const agentDir = trialPaths(root).agent;
  const recText = await readBoxFile(root, join(agentDir, AGENT_HOME_FILE)).catch(refused);
  if (recText === undefined) throw absent(t, "agent-home", "its agent's home was not captured");
  let rec: { files?: { path?: unknown }[] };
  try {
    rec = JSON.parse(recText);
  } catch {
    throw absent(t, "agent-home", `${AGENT_HOME_FILE} is not JSON`);
  }
  await sink("{");
  let first = true;
  for (const f of rec.files ?? []) {
    if (typeof f.path !== "string") continue;
    const rel = posix.relative(BOX.agentLogs, f.path);
    if (rel.startsWith("..") || posix.isAbsolute(rel)) continue;
    let text: string | undefined;
    try {
      text = await readBoxFile(root, join(agentDir, ...rel.split("/")));
    } catch (e) {
      if (e instanceof BoxFileRefused) continue;
      throw e;
    }
    if (text === undefined || text.includes("\uFFFD")) continue;
    await sink(`${first ? "" : ","}\n  ${JSON.stringify(f.path)}: ${JSON.stringify(text)}`);
    first = false;
  }
  await sink(first ? "}\n" : "\n}\n");
}
