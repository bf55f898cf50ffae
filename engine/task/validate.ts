/**
 * Static validation of Harbor-format task directories. Pure: reads files, never runs anything.
 * (Skeleton: the full rule set is being written; the signature is the contract.)
 */
import type { TaskReport, ValidateOptions } from "./codes.ts";

/** Validates one task directory against platform-tasks.md and Harbor's task.toml schema. */
export async function validateTask(dir: string, opts: ValidateOptions): Promise<TaskReport> {
  void opts;
  return { dir, name: dir, ok: true, findings: [] };
}
