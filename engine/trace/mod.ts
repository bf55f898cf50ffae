/**
 * Traces: the parsed event store, ATIF trajectories, conversion and the artifact streams.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { ARTIFACT_STREAMS } from "./artifact-streams.ts";
export type { ArtifactStream } from "./artifact-streams.ts";
export { streamArtifact, streamTraceLines } from "./artifacts.ts";
export type { Sink } from "./artifacts.ts";
export { convertRun, convertToAtif } from "./convert.ts";
export { TRACE_KINDS } from "./events.ts";
export type { TraceKind } from "./events.ts";
export { followTrace, hasTrace, traceLines } from "./store.ts";
export type { StoredLine, TraceFilter } from "./store.ts";
export { parseGrep, parseKinds } from "./filter.ts";
