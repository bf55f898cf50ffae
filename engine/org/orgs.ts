/**
 * Teams on one machine (platform-teams.md): organizations, their owners and members, invites, and each user's default
 * organization. Every user has a personal organization that is never stored: a record without an `org` is its
 * creator's personal one. Owners manage members and invites; members run and read.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { EvolveError } from "../errors.ts";
import { newId, type InviteRecord, type OrgRecord, type Store } from "../store/index.ts";

/** The name every user's personal organization answers to (`--org personal`, `auth org use personal`). */
export const PERSONAL = "personal";
/** Org names: lower-case, digits and dashes, as in a URL. */
const ORG_NAME = /^[a-z0-9][a-z0-9-]{0,38}$/;
/** How long an invite stays good unless `--expires` says otherwise. */
export const DEFAULT_INVITE_TTL_MS = 7 * 86_400_000;
const INVITE_PREFIX = "evi_";

const settingOf = (user: string) => `default_org:${user}`;
const digest = (token: string) => createHash("sha256").update(token, "utf8").digest("hex");

/**
 * Refused alike whether the org does not exist or the user is not in it: which teams exist on a machine is no
 * business of a non-member.
 */
function notMember(name: string): EvolveError {
  return new EvolveError("org_not_member", `you are not a member of an organization ${JSON.stringify(name)}`, "see your organizations: evolve auth org members <org>; ask an owner for an invite");
}

/** The org, when `user` is a member of it; `org_not_member` otherwise (also for an org that does not exist). */
export function memberOrg(store: Store, user: string, name: string): OrgRecord {
  const org = ORG_NAME.test(name) ? store.getOrg(name) : undefined;
  if (!org || !org.members.some((m) => m.user === user)) throw notMember(name);
  return org;
}

/** The role of `user` in `org`, or undefined. */
export function roleOf(org: OrgRecord, user: string): "owner" | "member" | undefined {
  return org.members.find((m) => m.user === user)?.role;
}

function ownerOrg(store: Store, user: string, name: string): OrgRecord {
  const org = memberOrg(store, user, name);
  if (roleOf(org, user) !== "owner") throw new EvolveError("org_not_owner", `only an owner of ${name} may do that; you are a member`, `ask an owner: evolve auth org members ${name}`);
  return org;
}

/** `auth org create`: a new organization whose only member, its owner, is `user`. */
export function createOrg(store: Store, user: string, name: string, displayName?: string): OrgRecord {
  if (!ORG_NAME.test(name) || name === PERSONAL) {
    throw new EvolveError("usage", `organization name ${JSON.stringify(name)}: expected lower-case letters, digits and dashes (at most 39), not "${PERSONAL}"`, "e.g. evolve auth org create acme");
  }
  return store.transaction(() => {
    if (store.getOrg(name)) throw new EvolveError("org_exists", `an organization ${JSON.stringify(name)} already exists on this machine`, "pick another name, or ask its owner for an invite");
    const at = new Date().toISOString();
    const rec: OrgRecord = { name, display_name: displayName ?? name, created_at: at, created_by: user, members: [{ user, role: "owner", joined_at: at }] };
    store.putOrg(rec);
    return rec;
  });
}

/** `auth org invite`: an owner makes a single-use invite good for `ttlMs`; the token is returned once, only its hash kept. */
export function createInvite(store: Store, user: string, name: string, ttlMs: number = DEFAULT_INVITE_TTL_MS): { token: string; invite: InviteRecord } {
  return store.transaction(() => {
    ownerOrg(store, user, name);
    const id = newId();
    const token = `${INVITE_PREFIX}${id}_${randomBytes(24).toString("base64url")}`;
    const now = Date.now();
    const invite: InviteRecord = {
      id,
      org: name,
      sha256: digest(token),
      created_by: user,
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + ttlMs).toISOString(),
      used_at: null,
      used_by: null,
      revoked_at: null,
    };
    store.putInvite(invite);
    return { token, invite };
  });
}

/**
 * `auth org join`: `user` becomes a member of the invite's org, and the invite is spent. Unknown, malformed, used,
 * revoked and expired invites are refused alike (`invite_refused`), so a guesser learns nothing.
 */
export function joinOrg(store: Store, user: string, token: string, now: number = Date.now()): { org: OrgRecord; role: "owner" | "member" } {
  const refused = new EvolveError("invite_refused", "the invite is unknown, already used, revoked or expired", "ask an owner for a new one: evolve auth org invite <org>");
  const m = /^evi_([0-9A-Z]{1,64})_[A-Za-z0-9_-]{20,}$/.exec(token.trim());
  if (!m) throw refused;
  return store.transaction(() => {
    const inv = store.getInvite(m[1]!);
    if (!inv || inv.used_at !== null || inv.revoked_at !== null || Date.parse(inv.expires_at) <= now) throw refused;
    const a = Buffer.from(digest(token.trim()), "hex");
    const b = Buffer.from(inv.sha256, "hex");
    if (a.length !== b.length || !timingSafeEqual(a, b)) throw refused;
    const org = store.getOrg(inv.org);
    if (!org) throw refused;
    const at = new Date(now).toISOString();
    store.putInvite({ ...inv, used_at: at, used_by: user });
    const had = roleOf(org, user);
    if (had) return { org, role: had };
    const joined = { ...org, members: [...org.members, { user, role: "member" as const, joined_at: at }] };
    store.putOrg(joined);
    return { org: joined, role: "member" };
  });
}

/** `auth org members`: the members of an org `user` belongs to, with their roles. */
export function orgMembers(store: Store, user: string, name: string): OrgRecord {
  return memberOrg(store, user, name);
}

/** The orgs `user` belongs to, by name. */
export function userOrgs(store: Store, user: string): OrgRecord[] {
  return store.listOrgs().filter((o) => o.members.some((m) => m.user === user));
}

/** `auth org use`: sets (or, with `personal`, clears) `user`'s default organization; returns the name now in use. */
export function useOrg(store: Store, user: string, name: string): string {
  if (name === PERSONAL) {
    store.putSetting(settingOf(user), undefined);
    return PERSONAL;
  }
  memberOrg(store, user, name);
  store.putSetting(settingOf(user), name);
  return name;
}

/** `user`'s default organization's name, or undefined for personal. */
export function defaultOrg(store: Store, user: string): string | undefined {
  const v = store.getSetting(settingOf(user));
  return typeof v === "string" && v !== "" ? v : undefined;
}

/**
 * The org a new job or dataset of `user` lands in (undefined: personal): `--org` when given, else the default one.
 * `org_not_member` for an org the user is not (or no longer) a member of.
 */
export function resolveOrg(store: Store, user: string, given?: string): string | undefined {
  const name = given ?? defaultOrg(store, user);
  if (name === undefined || name === PERSONAL) return undefined;
  memberOrg(store, user, name);
  return name;
}
