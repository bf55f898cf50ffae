/**
 * The local API as a hono app (`evolve serve`, issue 23 §1): the route table (routes.ts) under /api/v1, behind two
 * middlewares that are the only place their decisions live: the raw path guard, and the token check (every request
 * carries `Authorization: Bearer <token>` unless it came over the unix socket, which only this user can reach).
 */
import { Hono } from "hono";
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

/** A token's last use is written at most this often, so reads stay reads under a busy client. */
const LAST_USED_EVERY_MS = 60_000;

/**
 * The scope a request holds and the user it acts as: `run` and serve's own user on the trusted socket, else its
 * token's (a token from before teams acts as serve's user). Throws `serve_token_missing` or `serve_token_refused`
 * (both 401, alike for unknown, malformed and revoked tokens).
 */
function authenticate(deps: ServeDeps, req: Request, trusted: boolean, host: string): { scope: TokenScope; user: string } {
  if (trusted) return { scope: "run", user: host };
  const header = req.headers.get("authorization");
  if (header === null) throw new EvolveError("serve_token_missing", "this request carries no API token", "send `Authorization: Bearer <token>`; make one with `evolve auth token create`");
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  deps.store.refresh();
  const rec = m ? checkToken(deps.store, m[1]!) : undefined;
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
  app.use("*", async (c, next) => {
    // the token first: a stranger learns nothing, not even which paths would be refused
    const who = authenticate(deps, c.req.raw, o.trusted === true, host);
    c.set("scope", who.scope);
    c.set("user", who.user);
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
  return app;
}
