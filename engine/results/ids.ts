/**
 * The names Harbor's files need from evolve's ids: Harbor's models type `id` and `job_id` as UUIDs, and name a trial's
 * folder `<task[:32]>__<7-char short id>`. evolve's ids are ULIDs (engine/store/ids.ts), 128 bits like a UUID, so
 * the UUID is the same bits re-spelled (a reader can map it back); anything else is hashed to a stable UUID.
 */
import { createHash } from "node:crypto";

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** The UUID spelling of `id`: a ULID's own 128 bits, else a name-based (version 5 style) UUID of its sha256. */
export function harborUuid(id: string): string {
  let hex: string;
  if (/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/.test(id)) {
    let v = 0n;
    for (const c of id) v = v * 32n + BigInt(CROCKFORD.indexOf(c));
    hex = v.toString(16).padStart(32, "0");
  } else {
    const h = createHash("sha256").update(id).digest();
    h[6] = (h[6] & 0x0f) | 0x50;
    h[8] = (h[8] & 0x3f) | 0x80;
    hex = h.subarray(0, 16).toString("hex");
  }
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A name safe as one path segment: no separator, no dot-only name, printable ASCII of a short length. */
export function isSafeSegment(name: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$/.test(name) && !name.includes("..");
}

/**
 * A trial's folder in a job folder, Harbor's way: the task's last path part cut to 32 characters (trailing `_` and
 * `-` dropped), `__`, and the trial id's last 7 characters (a ULID's random tail; unique within a job in practice,
 * and the whole id is in the folder's result.json). Characters outside a safe set become `_`.
 */
export function trialFolderName(taskName: string, trialId: string): string {
  const last = taskName.split("/").pop() || "task";
  const task = last.replace(/[^A-Za-z0-9._-]/g, "_").replace(/^\.+/, "_").slice(0, 32).replace(/[_-]+$/, "") || "task";
  const short = trialId.replace(/[^A-Za-z0-9]/g, "").slice(-7).toLowerCase() || "0000000";
  return `${task}__${short}`;
}

/** A job's folder name: its `--job-name` when that is a safe path segment, else its id. */
export function jobFolderName(jobId: string, name: string | undefined): string {
  return name !== undefined && isSafeSegment(name) ? name : isSafeSegment(jobId) ? jobId : harborUuid(jobId);
}
