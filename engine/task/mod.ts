/**
 * Tasks: the validator, its finding codes, and scaffolding a new task.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export type { Finding, TaskReport } from "./codes.ts";
export { scaffoldTask } from "./scaffold.ts";
export { validateTasks } from "./validate.ts";
