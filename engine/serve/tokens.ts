/**
 * API tokens of `evolve serve` (`evolve auth token create|list|revoke`). A token is `evk_<id>_<secret>`: the id names
 * its record, and only the sha256 of the whole token is stored, so a copy of the store hands out no token. A token is
 * shown once, when it is made. Scopes: `read` reads every route; `run` also starts jobs. A token acts as the local
 * identity that made it (engine/org): it sees that user's jobs and datasets and their organizations'.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { EvolveError } from "../errors.ts";
import { newId, type ApiTokenRecord, type Store } from "../store/index.ts";

/** What a token may do: read every route, or also start jobs. */
export const TOKEN_SCOPES = ["read", "run"] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

const PREFIX = "evk_";

/** Hex sha256 of a token as given. */
function digest(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** The record as listings show it: never the hash (it is useless to a reader and need not travel). */
export function tokenRow(r: ApiTokenRecord) {
  return { id: r.id, name: r.name, scope: r.scope, created_at: r.created_at, revoked_at: r.revoked_at, last_used_at: r.last_used_at };
}

/** Makes a token, stores its hash, and returns the token itself: the only time it exists outside its holder. */
export function createToken(store: Store, o: { scope?: string; name?: string; user?: string } = {}): { token: string; record: ApiTokenRecord } {
  const scope = o.scope ?? "read";
  if (!(TOKEN_SCOPES as readonly string[]).includes(scope)) throw new EvolveError("usage", `--scope ${scope}: expected read or run`, "read reads every route; run also starts jobs (POST /api/v1/jobs)");
  const id = newId();
  const token = `${PREFIX}${id}_${randomBytes(32).toString("base64url")}`;
  const record: ApiTokenRecord = { id, name: o.name ?? "", scope: scope as TokenScope, sha256: digest(token), created_at: new Date().toISOString(), revoked_at: null, last_used_at: null, ...(o.user !== undefined ? { user: o.user } : {}) };
  store.putToken(record);
  return { token, record };
}

/** Every token, oldest first, revoked ones included (they say when). */
export function listTokens(store: Store) {
  return store.listTokens().map(tokenRow);
}

/** Revokes a token by id; revoking one twice keeps its first time. */
export function revokeToken(store: Store, id: string) {
  return store.transaction(() => {
    const r = store.getToken(id);
    if (!r) throw new EvolveError("token_not_found", `no API token ${JSON.stringify(id)}`, "see `evolve auth token list`");
    const rec = r.revoked_at ? r : { ...r, revoked_at: new Date().toISOString() };
    if (rec !== r) store.putToken(rec);
    return tokenRow(rec);
  });
}

/** Whether any token that still works exists: binding beyond loopback needs one. */
export function hasLiveToken(store: Store): boolean {
  return store.listTokens().some((r) => r.revoked_at === null);
}

/**
 * The live record a presented token belongs to, or undefined for anything else (malformed, unknown, revoked): the
 * caller answers all of them alike, so a guesser learns nothing about which ids exist. Compared in constant time.
 */
export function checkToken(store: Store, token: string): ApiTokenRecord | undefined {
  const m = /^evk_([0-9A-Z]{1,64})_[A-Za-z0-9_-]{20,}$/.exec(token);
  if (!m) return undefined;
  const r = store.getToken(m[1]!);
  if (!r || r.revoked_at !== null) return undefined;
  const a = Buffer.from(digest(token), "hex");
  const b = Buffer.from(r.sha256, "hex");
  return a.length === b.length && timingSafeEqual(a, b) ? r : undefined;
}

/** Whether a token's scope allows `need`: run covers read. */
export function scopeAllows(have: TokenScope, need: TokenScope): boolean {
  return have === "run" || need === "read";
}
