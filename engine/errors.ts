import { ERROR_CODES, type ErrorCode } from "./error-codes.ts";

/**
 * The one error type that crosses from engine to CLI. `code` is stable (scripts match on it) and registered in
 * engine/error-codes.ts, `message` is one line, `hint` tells the user what to do next. `exit` follows the CLI
 * convention (1 = ran and found problems, 2 = usage or environment error) and defaults to the code's registered one.
 */
export class EvolveError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly hint = "",
    readonly exit: 1 | 2 = ERROR_CODES[code].exit,
  ) {
    super(message);
    this.name = "EvolveError";
  }
}

/** The first line of an error's message (or of any thrown value), for one-line error messages. */
export function firstLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split("\n")[0];
}

/** Whether a thrown value is the operating system saying the disk (or a quota, or a size limit) is full. */
export function isDiskFull(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === "ENOSPC" || code === "EDQUOT" || code === "EFBIG") return true;
  return /\b(ENOSPC|EDQUOT|No space left on device|Disk quota exceeded|File too large)\b/i.test(String((e as Error)?.message ?? e));
}

/**
 * A full disk as the user sees it: `disk_full`, naming the path that could not be written. Deterministic (the trial
 * runner must not retry it: a retry fills the same disk). Returns `e` itself when it is not a full disk, so callers
 * can write `throw diskFullError(e, path)` in a catch that rethrows everything else unchanged.
 */
export function diskFullError(e: unknown, path: string): unknown {
  if (!isDiskFull(e)) return e;
  return new EvolveError("disk_full", `no space left on the device holding ${path} (${firstLine(e)})`, "free space there (or raise the quota) and run the command again; what was stored before is intact");
}
