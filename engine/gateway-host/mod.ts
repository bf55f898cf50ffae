/**
 * The LLM gateway as trials use it: one in-process gateway per evolve process, a lease per trial, its stop setting.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { ModelGateway, STOP_SETTING, publishedInFlight } from "./model-gateway.ts";
