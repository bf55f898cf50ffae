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

/** The one refusal for anything that would leave an org without an owner. */
function lastOwner(name: string, user: string): EvolveError {
  return new EvolveError("org_last_owner", `${user} is the last owner of ${name}: an organization always keeps an owner`, `make someone else an owner first: evolve auth org members ${name} --make-owner <user>`);
}

/** The org with `target` gone or changed, refused when that leaves it without an owner. */
function withMember(org: OrgRecord, target: string, role: "owner" | "member" | null): OrgRecord {
  const members = role === null ? org.members.filter((m) => m.user !== target) : org.members.map((m) => (m.user === target ? { ...m, role } : m));
  if (!members.some((m) => m.role === "owner")) throw lastOwner(org.name, target);
  return { ...org, members };
}

/** What an owner does to a member: `auth org members <org> --make-owner|--demote|--remove USER`. */
export type MemberChange = "make-owner" | "demote" | "remove";

/**
 * An owner makes another member an owner, demotes one to member, or removes one (themself included, as with leave).
 * `org_member_missing` for a user not in the org; `org_last_owner` when the org would be left without an owner.
 * Making an owner an owner, or demoting a member, changes nothing and is no error.
 */
export function changeMember(store: Store, user: string, name: string, change: MemberChange, target: string): OrgRecord {
  return store.transaction(() => {
    const org = ownerOrg(store, user, name);
    if (!roleOf(org, target)) throw new EvolveError("org_member_missing", `${JSON.stringify(target)} is not a member of ${name}`, `see its members: evolve auth org members ${name}`);
    const next = withMember(org, target, change === "remove" ? null : change === "make-owner" ? "owner" : "member");
    store.putOrg(next);
    if (change === "remove") clearDefault(store, target, name);
    return next;
  });
}

/** `auth org leave`: `user` leaves an org they are in; the last owner cannot (`org_last_owner`). */
export function leaveOrg(store: Store, user: string, name: string): OrgRecord {
  return store.transaction(() => {
    const next = withMember(memberOrg(store, user, name), user, null);
    store.putOrg(next);
    clearDefault(store, user, name);
    return next;
  });
}

/** Someone no longer in `name` has no default there: their next run goes to personal, not to an org refusing them. */
function clearDefault(store: Store, user: string, name: string): void {
  if (defaultOrg(store, user) === name) store.putSetting(settingOf(user), undefined);
}

/** An invite as `auth org invites` lists it: never its hash. `state` is the one that applies now. */
export interface InviteRow {
  id: string;
  org: string;
  created_by: string;
  created_at: string;
  expires_at: string;
  state: "open" | "used" | "revoked" | "expired";
  used_by: string | null;
  used_at: string | null;
  revoked_at: string | null;
}

function inviteRow(inv: InviteRecord, now: number): InviteRow {
  const state = inv.revoked_at !== null ? "revoked" : inv.used_at !== null ? "used" : Date.parse(inv.expires_at) <= now ? "expired" : "open";
  return { id: inv.id, org: inv.org, created_by: inv.created_by, created_at: inv.created_at, expires_at: inv.expires_at, state, used_by: inv.used_by, used_at: inv.used_at, revoked_at: inv.revoked_at };
}

/** `auth org invites <org>`: an owner lists the org's invites, oldest first. */
export function listInvites(store: Store, user: string, name: string, now: number = Date.now()): InviteRow[] {
  ownerOrg(store, user, name);
  return store
    .listInvites()
    .filter((i) => i.org === name)
    .map((i) => inviteRow(i, now));
}

/**
 * `auth org invite --revoke <id>`: an owner of the invite's org revokes it (joining with it is then `invite_refused`).
 * An unknown id and an invite of an org `user` is not in are alike `invite_not_found`; revoking twice keeps the first time.
 */
export function revokeInvite(store: Store, user: string, id: string, now: number = Date.now()): InviteRow {
  return store.transaction(() => {
    const inv = /^[0-9A-Z]{1,64}$/.test(id) ? store.getInvite(id) : undefined;
    const org = inv ? store.getOrg(inv.org) : undefined;
    if (!inv || !org || !roleOf(org, user)) throw new EvolveError("invite_not_found", `no invite ${JSON.stringify(id)} in an organization you belong to`, "list them: evolve auth org invites <org>");
    ownerOrg(store, user, org.name);
    const next = inv.revoked_at === null ? { ...inv, revoked_at: new Date(now).toISOString() } : inv;
    store.putInvite(next);
    return inviteRow(next, now);
  });
}

/**
 * `auth org delete`: an owner deletes an org and its invites. Refused (`org_not_empty`) while any job or dataset is
 * in it: deleting the org would leave those records readable by nobody, and deleting them with it would lose work
 * in one keystroke; delete or move them first, so what goes is always said by name.
 */
export function deleteOrg(store: Store, user: string, name: string): void {
  store.transaction(() => {
    const org = ownerOrg(store, user, name);
    const jobs = store.listJobs().filter((j) => j.org === name).length;
    const datasets = store.listDatasets().filter((d) => d.org === name).length;
    if (jobs + datasets > 0) throw new EvolveError("org_not_empty", `${name} still holds ${jobs} job(s) and ${datasets} dataset version(s)`, `delete them first (evolve job list --scope org; evolve dataset delete <name@version>)`);
    for (const m of org.members) clearDefault(store, m.user, name);
    store.deleteOrg(name);
  });
}
