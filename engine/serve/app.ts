/**
 * The local API as a hono app (`evolve serve`, issue 23 §1): the route table (routes.ts) under /api/v1, and the
 * dashboard's pages at `/`, behind two middlewares that are the only place their decisions live: the raw path guard,
 * and the token check (every request carries the token unless it came over the unix socket, which only this user can
 * reach). A token travels as `Authorization: Bearer <token>` or, for a browser, which cannot add a header to a link,
 * in the HttpOnly cookie `/login` sets; the cookie is taken for reads only (GET, HEAD), so a page on another site
 * that makes the browser POST here (CSRF) carries no usable credential.
 */
import { Hono, type Context } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import { dashboardApp, loginPage } from "../dashboard/mod.ts";
import { EvolveError } from "../errors.ts";
import { localUser, scopedStore, viewerOf, type Viewer } from "../org/mod.ts";
import type { Store } from "../store/index.ts";
import { checkRawPath, errorResponse } from "./http.ts";
import { API_BASE, openApiDocument } from "./openapi.ts";
import { checkParams, ROUTES, type RouteContext } from "./routes.ts";
import { checkToken, scopeAllows, type TokenScope } from "./tokens.ts";

export interface ServeDeps {
  store: Store;
  home: string;
  /** evolve's version, for the OpenAPI document. */
  version: string;
  /** Starts a job from `run`'s flags in this process, as `user`, and resolves once it is recorded (POST /jobs). */
  startJob?: (flags: Record<string, unknown>, user: string) => Promise<{ id: string }>;
  /** The identity serve runs as (default: this process's, engine/org): the socket's user, and the owner of old tokens and records. */
  user?: string;
  /** The evolution project /evolve/* serves, and the Meta-Harness run folder /metaharness/* serves. */
  project?: string;
  metaharnessRun?: string;
}

/** The cookie `/login` sets: the token itself, HttpOnly so no page script reads it, SameSite=Strict, Path=/. */
export const TOKEN_COOKIE = "evolve_token";
const COOKIE_RE = new RegExp(`(?:^|;\\s*)${TOKEN_COOKIE}=([^;]*)`);
/** Methods a cookie may authenticate: reads. Anything that changes state needs the Bearer header (CSRF). */
const COOKIE_METHODS = new Set(["GET", "HEAD"]);

/** The token a request presents: its Bearer header, else (reads only) the login cookie; undefined for neither. */
function presentedToken(req: Request): { token: string | undefined } | undefined {
  const header = req.headers.get("authorization");
  if (header !== null) return { token: /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] };
  if (!COOKIE_METHODS.has(req.method)) return undefined;
  const cookie = COOKIE_RE.exec(req.headers.get("cookie") ?? "")?.[1];
  return cookie === undefined ? undefined : { token: cookie };
}

/** A token's last use is written at most this often, so reads stay reads under a busy client. */
const LAST_USED_EVERY_MS = 60_000;

/**
 * The scope a request holds and the user it acts as: `run` and serve's own user on the trusted socket, else its
 * token's (a token from before teams acts as serve's user). Throws `serve_token_missing` or `serve_token_refused`
 * (both 401, alike for unknown, malformed and revoked tokens).
 */
function authenticate(deps: ServeDeps, req: Request, trusted: boolean, host: string): { scope: TokenScope; user: string } {
  if (trusted) return { scope: "run", user: host };
  const presented = presentedToken(req);
  if (presented === undefined) throw new EvolveError("serve_token_missing", "this request carries no API token", "send `Authorization: Bearer <token>` (a browser logs in at /login); make one with `evolve auth token create`");
  deps.store.refresh();
  const rec = presented.token !== undefined ? checkToken(deps.store, presented.token) : undefined;
  if (!rec) throw new EvolveError("serve_token_refused", "the API token is unknown or revoked", "see `evolve auth token list`; make a new one with `evolve auth token create`");
  const now = Date.now();
  if (rec.last_used_at === null || now - Date.parse(rec.last_used_at) > LAST_USED_EVERY_MS) {
    try {
      deps.store.putToken({ ...rec, last_used_at: new Date(now).toISOString() });
    } catch {
      // a read-only store still serves reads: the last use is a courtesy, not a condition
    }
  }
  return { scope: rec.scope, user: rec.user ?? host };
}

/**
 * Builds the app. `trusted`: every request is from this user (the unix socket, 0600 in a 0700 folder), so none needs
 * a token; a TCP listener is never trusted.
 */
export function createServeApp(deps: ServeDeps, o: { trusted?: boolean } = {}): Hono<{ Variables: { scope: TokenScope; user: string } }> {
  const app = new Hono<{ Variables: { scope: TokenScope; user: string } }>();
  const host = deps.user ?? localUser();
  app.onError((e) => errorResponse(e));
  app.notFound((c) => errorResponse(new EvolveError("serve_route_unknown", `no route ${c.req.method} ${new URL(c.req.url).pathname}`, `routes: GET ${API_BASE}/openapi.json`)));
  // the login pages need no token (they are how a browser gets one in); everything else does
  app.get(LOGIN_PATH, (c) => login(c, c.req.query("token"), c.req.query("next")));
  app.post(LOGIN_PATH, async (c) => {
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    return login(c, typeof form.token === "string" ? form.token : undefined, typeof form.next === "string" ? form.next : undefined);
  });
  app.post("/logout", (c) => {
    deleteCookie(c, TOKEN_COOKIE, { path: "/" });
    return c.redirect(LOGIN_PATH, 303);
  });
  app.use("*", async (c, next) => {
    // the token first: a stranger learns nothing, not even which paths would be refused
    try {
      const who = authenticate(deps, c.req.raw, o.trusted === true, host);
      c.set("scope", who.scope);
      c.set("user", who.user);
    } catch (e) {
      // a browser asking for a page goes to the login form; an API client gets the 401 it can act on
      const path = new URL(c.req.url).pathname;
      if (c.req.method === "GET" && !path.startsWith("/api/") && e instanceof EvolveError) return c.redirect(`${LOGIN_PATH}?next=${encodeURIComponent(path + new URL(c.req.url).search)}`, 303);
      throw e;
    }
    checkRawPath(c.req.url);
    await next();
  });
  const openapi = openApiDocument(deps.version);
  for (const r of ROUTES) {
    app.on(r.method, API_BASE + r.path, async (c) => {
      const have = c.get("scope");
      if (!scopeAllows(have, r.scope)) throw new EvolveError("serve_scope_refused", `${r.method} ${API_BASE}${r.path} needs a ${r.scope}-scoped token; this one is ${have}-scoped`, "make one with `evolve auth token create --scope run`");
      const params = checkParams(c.req.param() as Record<string, string>);
      deps.store.refresh();
      // org scopes: every route reads the store as this user sees it, so another org's record is simply absent (404,
      // the body of a missing one); the served project and Meta-Harness run are serve's own user's, personal
      const viewer: Viewer = viewerOf(deps.store, c.get("user"), host);
      const own = viewer.user === host;
      const startJob = deps.startJob && ((flags: Record<string, unknown>) => deps.startJob!(flags, viewer.user));
      return await r.handle({ store: scopedStore(deps.store, viewer), home: deps.home, req: c.req.raw, params, query: new URL(c.req.url).searchParams, viewer, startJob, project: own ? deps.project : undefined, metaharnessRun: own ? deps.metaharnessRun : undefined, openapi: () => openapi });
    });
  }
  // an unknown API path answers as the API does, never as a dashboard page
  app.all("/api/*", (c) => errorResponse(new EvolveError("serve_route_unknown", `no route ${c.req.method} ${new URL(c.req.url).pathname}`, `routes: GET ${API_BASE}/openapi.json`)));
  // the pages read the store as this user sees it, like every API route: another org's job is a page not found
  app.all("*", (c) => {
    deps.store.refresh();
    const viewer: Viewer = viewerOf(deps.store, c.get("user"), host);
    const own = viewer.user === host;
    const dashboard = dashboardApp({ home: deps.home, store: scopedStore(deps.store, viewer), project: own ? deps.project : undefined, metaharnessRun: own ? deps.metaharnessRun : undefined });
    return dashboard.fetch(c.req.raw);
  });
  return app;

  /** Checks a token from the login form or link; a good one is set as the cookie and the browser sent on. */
  function login(c: Context, token: string | undefined, next: string | undefined): Response {
    const to = safeNext(next);
    if (token === undefined || token === "") return c.html(loginPage({ next: to }), 200, NO_STORE);
    // a form posted from another site must not log this browser in under someone else's token
    const origin = c.req.header("origin");
    if (c.req.method === "POST" && origin !== undefined && origin !== new URL(c.req.url).origin) return c.html(loginPage({ next: to, error: "This form was posted from another site." }), 403, NO_STORE);
    deps.store.refresh();
    if (!checkToken(deps.store, token)) return c.html(loginPage({ next: to, error: "That token is unknown or revoked." }), 401, NO_STORE);
    setCookie(c, TOKEN_COOKIE, token, { httpOnly: true, sameSite: "Strict", path: "/", secure: new URL(c.req.url).protocol === "https:" });
    return c.redirect(to, 303);
  }
}

/** Where the dashboard's login form lives. */
export const LOGIN_PATH = "/login";
const NO_STORE = { "cache-control": "no-store" };

/** Where a login sends the browser: a path on this server only (`/x`, never `//host` or a URL), else `/`. */
function safeNext(next: string | undefined): string {
  return next !== undefined && /^\/(?![/\\])/.test(next) ? next : "/";
}
