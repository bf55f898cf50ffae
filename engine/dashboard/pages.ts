/**
 * What every dashboard page module shares: the path-id rule, the two errors a page throws for a bad or unknown
 * address (the app's error handler turns them into 400 and 404 pages), and the HTML response.
 */
import type { Context } from "hono";

/**
 * An id as the store makes them (ULIDs) or a job's `--job-name` characters: letters, digits, `.`, `_`, `-`, never
 * `..`, a slash, NUL or anything a decoder could turn into one. Anything else is refused before any lookup.
 */
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/** Whether a path parameter is an id the store could hold. */
export function validId(s: string | undefined): s is string {
  return s !== undefined && ID_RE.test(s) && !s.includes("..");
}

/** The page asked for names nothing: a 404 page. */
export class NotFound extends Error {}
/** The address is malformed: a 400 page. */
export class BadRequest extends Error {}

/** An HTML response that no cache keeps (the pages show live records). */
export function html(c: Context, body: string, status = 200, headers: Record<string, string> = {}) {
  return c.body(body, status as 200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", ...headers });
}
