/**
 * The store: the LMDB records of datasets, jobs and trials, and their integrity checks.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { openStore, resolveTrial, taskBlobDir, trialDir } from "./index.ts";
export type { JobRecord, Store, TrialRecord } from "./index.ts";
