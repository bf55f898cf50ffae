/**
 * How the local API speaks HTTP: the error body `{error: {code, message, hint}}` with the status each stable code
 * maps to, the JSON body (through the CLI's jsonKeys, so it is the `--json` document), and the guard every path
 * parameter and path query passes before any handler sees it.
 */
import { ERROR_CODES, type ErrorCode } from "../error-codes.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { jsonKeys } from "../json-keys.ts";

/** Codes whose HTTP status is not the default for their exit class. */
const STATUS: Partial<Record<ErrorCode, number>> = {
  serve_token_missing: 401,
  serve_token_refused: 401,
  serve_scope_refused: 403,
  serve_route_unknown: 404,
  evolve_project_missing: 404,
  metaharness_run_missing: 404,
  file_too_large: 413,
  internal: 500,
};

/**
 * The HTTP status of an error code: 401/403 for tokens, 404 for anything not found or never recorded (a trial's
 * missing stream is as absent as a missing trial), 503 when the store cannot serve, else 400 for a request at fault
 * (exit 2: usage) and 422 for a record that cannot give what was asked (exit 1).
 */
export function httpStatus(code: ErrorCode): number {
  const fixed = STATUS[code];
  if (fixed !== undefined) return fixed;
  if (/_not_found$|_not_recorded$|^file_not_kept$|^file_deleted$|^files_unavailable$|^step_unknown$/.test(code)) return 404;
  if (/^store_(unavailable|busy|corrupt|too_new)$|^disk_full$/.test(code)) return 503;
  return ERROR_CODES[code].exit === 2 ? 400 : 422;
}

/** The error body and status for anything a handler threw; an unexpected throw is `internal` (500). */
export function errorResponse(e: unknown): Response {
  const err = e instanceof EvolveError ? e : new EvolveError("internal", `unexpected failure: ${firstLine(e)}`, "a bug in evolve serve; its log has the stack");
  return Response.json({ error: { code: err.code, message: err.message, hint: err.hint } }, { status: httpStatus(err.code) });
}

/** A JSON body spelt as the CLI's `--json` prints the same value. */
export function jsonResponse(value: unknown, init: ResponseInit = {}): Response {
  return new Response(JSON.stringify(jsonKeys(value)), { ...init, headers: { "content-type": "application/json; charset=utf-8", ...(init.headers as Record<string, string> | undefined) } });
}

const refused = (what: string, value: string, why: string) =>
  new EvolveError("path_refused", `${what} ${JSON.stringify(value)} is refused: ${why}`, "give ids and names as they are listed, and file paths relative to the tree's root without '..'");

/**
 * Checks a path parameter (an id, a name, a stream): one segment, no slash or backslash (an encoded `%2f` decodes to
 * one), no NUL, not `.` or `..`.
 */
export function checkSegment(what: string, value: string): string {
  if (value.includes("\0")) throw refused(what, value, "it holds a NUL");
  if (/[/\\]/.test(value)) throw refused(what, value, "it holds a slash");
  if (value === "." || value === "..") throw refused(what, value, "it climbs");
  return value;
}

/**
 * Checks a tree path given in a query (`?path=app/out.txt`): relative to the tree's root, no `..` segment (encoded
 * or not: the query arrives decoded), no NUL or backslash. Returns it as the box path the CLI takes (`/app/out.txt`).
 * Links out of the tree are refused where the file is opened (engine/box/fs.ts, never followed).
 */
export function checkTreePath(value: string | undefined): string {
  if (value === undefined || value === "" || value === ".") return "/";
  if (value.includes("\0")) throw refused("path", value, "it holds a NUL");
  if (value.includes("\\")) throw refused("path", value, "it holds a backslash");
  if (value.startsWith("/")) throw refused("path", value, "it is absolute (give it relative to the tree's root)");
  const parts = value.split("/");
  if (parts.includes("..")) throw refused("path", value, "it climbs out of the tree");
  const clean = parts.filter((p) => p !== "" && p !== ".");
  return clean.length === 0 ? "/" : `/${clean.join("/")}`;
}

/**
 * Checks the request's raw path before routing: an encoded dot, slash, backslash or NUL (`%2e`, `%2f`, `%5c`, `%00`)
 * has no business in any route of this API, and URL parsers differ on whether they resolve them.
 */
export function checkRawPath(url: string): void {
  const path = url.replace(/^[a-z]+:\/\/[^/]*/i, "").split("?")[0]!;
  if (/%(2e|2f|5c|00)/i.test(path)) throw refused("request path", path, "it holds an encoded dot, slash, backslash or NUL");
  if (path.split("/").some((s) => s === ".." || s === ".")) throw refused("request path", path, "it climbs");
}
