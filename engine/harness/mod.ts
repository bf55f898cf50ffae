/**
 * The agents: the registry of agent CLIs, their manifests, and vendored copies for offline boxes.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { PLAIN_AGENT_NAMES, builtinSpecs, requireParser } from "./catalog.ts";
export type { CliSpec } from "./cli-types.ts";
export { checkAgentName, checkAgentRequest, harnessNames, parseAgentOptions } from "./index.ts";
export { agentSpec, loadRegistered, registerAgent } from "./manifest.ts";
export { agentsDir, defaultVersion, exportAgents, importAgents, listVendored, needsVendoring, pullAgent, vendorForRun, verifyVendored } from "./vendor.ts";
export type { Vendored, VerifyProblem } from "./vendor.ts";
