/**
 * Trials: the one lifecycle (statuses and transitions), regrade, the agent's changes, inspection and tokens.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { archiveKept, archiveLive, exclusion, keptChildren, readKeptFile, readManifest, skippedSummary } from "./changes.ts";
export type { KeptManifest } from "./changes.ts";
export { boxChanges, boxList, boxPath, boxProcesses, boxReadFile, findLiveBox } from "./inspect.ts";
export { TRIAL_STATUSES, isLiveStatus, isSettledStatus, runsOnResume, statusClass, stillGoing } from "./lifecycle.ts";
export type { AttemptEntry, TrialStatus } from "./lifecycle.ts";
export type { RegradeVerifier } from "./regrade.ts";
export { tokenCounts } from "./tokens.ts";
export { UNTOUCHED_NOTE, catDocument, keptChanges, keptChangesDocument, keptLsDocument, readKeptPath } from "./kept-read.ts";
export { UNRECORDED, logsDocument, notRecorded, streamParts, unrecordedDocument } from "./logs.ts";
export type { LogStream, StreamPart } from "./logs.ts";
