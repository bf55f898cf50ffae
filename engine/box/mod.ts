/**
 * The lower floor of trials: safe reads of what a box wrote (`fs.ts`), the trial and box layouts, the task scripts.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { BoxFileRefused, readBoxFile, streamBoxFile } from "./fs.ts";
export { agentStreamFile, archivedSteps, trialPaths } from "./layout.ts";
