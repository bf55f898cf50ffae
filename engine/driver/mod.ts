/**
 * The container engine driver: one REST client for podman and Docker; here the types callers hold.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { LABEL_HOME } from "./types.ts";
export type { Engine, EngineKind } from "./types.ts";
