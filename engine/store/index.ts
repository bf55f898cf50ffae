/** The embedded store: the one module that opens LMDB. See docs/store.md. */
export { openStore, Store, STORE_MARKER, MAX_KEY_BYTES, type VerifyReport } from "./store.ts";
export { newId, idTime } from "./ids.ts";
export { taskBlobDir, trialDir } from "./paths.ts";
export { SCHEMA_VERSION } from "./migrations.ts";
export * from "./records.ts";
export { resolveJob, resolveJobId, resolveTrial, resolveTrialId } from "./resolve.ts";
