/**
 * The one error type that crosses from engine to CLI. `code` is stable (scripts match on it), `message` is one
 * line, `hint` tells the user what to do next. `exit` follows the CLI convention: 1 = ran and found problems,
 * 2 = usage or environment error.
 */
export class EvolveError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly hint = "",
    readonly exit: 1 | 2 = 2,
  ) {
    super(message);
    this.name = "EvolveError";
  }
}

/** The first line of an error's message (or of any thrown value), for one-line error messages. */
export function firstLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split("\n")[0];
}
