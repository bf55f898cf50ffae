/**
 * The conductor, evolve's own agent: its `.agent/` folder (init, layout, instructions), its loop and its episodes.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { appendEpisode, episodeOf } from "./episodes.ts";
export { initAgentDir } from "./init.ts";
export { checkAgentRoot } from "./instructions.ts";
export { AGENT_PATHS, agentPath } from "./layout.ts";
export { runConductor } from "./loop.ts";
