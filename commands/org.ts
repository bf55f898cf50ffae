/**
 * `evolve auth org create|invite|invites|join|use|members|leave|delete` (platform-teams.md): argument parsing and printing only; who may
 * do what, invites and default orgs are engine/org's. You are the local identity engine/org names ($EVOLVE_USER, else
 * the OS user name).
 */
import { EvolveError } from "../engine/errors.ts";
import { changeMember, createInvite, createOrg, DEFAULT_INVITE_TTL_MS, defaultOrg, deleteOrg, joinOrg, leaveOrg, listInvites, localUser, orgMembers, PERSONAL, revokeInvite, roleOf, useOrg, userOrgs, type InviteRow, type MemberChange } from "../engine/org/mod.ts";
import { out, outJson, outTable, style, when } from "./output.ts";
import { withStore } from "./store.ts";

/** `auth org create <name> [--display-name D]`: you become its owner. */
export async function orgCreateCommand(name: string, opts: { displayName?: string; json?: boolean }): Promise<number> {
  return withStore((store) => {
    const org = createOrg(store, localUser(), name, opts.displayName);
    if (opts.json) return outJson({ name: org.name, display_name: org.display_name, role: "owner", created_at: org.created_at }), 0;
    out(`${style.green("created")} ${org.name}${org.display_name !== org.name ? ` (${org.display_name})` : ""}: you are its owner; invite people with: evolve auth org invite ${org.name}`);
    return 0;
  });
}

/** `--expires`: a duration (`7d`, `12h`); the default when absent. */
function parseExpires(v: string | undefined): number {
  if (v === undefined) return DEFAULT_INVITE_TTL_MS;
  const m = /^(\d+)([mhdw])$/.exec(v.trim());
  const ms = m ? Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[m[2] as "m" | "h" | "d" | "w"] : 0;
  if (!(ms > 0)) throw new EvolveError("usage", `--expires ${v}: expected a duration like 30m, 12h, 7d or 2w`, "e.g. --expires 3d");
  return ms;
}

/** `auth org invite <org> [--expires 7d]`: prints a single-use invite token once; only its hash is kept. `--revoke <id>` revokes one. */
export async function orgInviteCommand(name: string | undefined, opts: { expires?: string; revoke?: string; json?: boolean }): Promise<number> {
  if (opts.revoke !== undefined) {
    if (name !== undefined || opts.expires !== undefined) throw new EvolveError("usage", "--revoke <id> takes no org and no --expires: the invite's id names its org", "e.g. evolve auth org invite --revoke <id>");
    const id = opts.revoke;
    return withStore((store) => {
      const row = revokeInvite(store, localUser(), id);
      if (opts.json) return outJson(row), 0;
      out(`${style.green("revoked")} invite ${row.id} into ${row.org}: joining with it is refused`);
      return 0;
    });
  }
  if (name === undefined) throw new EvolveError("usage", "name the organization to invite into, or --revoke <invite id>", "e.g. evolve auth org invite acme");
  const ttl = parseExpires(opts.expires);
  return withStore((store) => {
    const { token, invite } = createInvite(store, localUser(), name, ttl);
    if (opts.json) return outJson({ token, id: invite.id, org: invite.org, expires_at: invite.expires_at }), 0;
    out(token);
    process.stderr.write(style.dim(`invite ${invite.id} into ${invite.org}: shown once, single use, expires ${invite.expires_at}; the invitee runs: evolve auth org join <token>\n`));
    return 0;
  });
}

/** `auth org join <token>`: you join the invite's org as a member. */
export async function orgJoinCommand(token: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const { org, role } = joinOrg(store, localUser(), token);
    if (opts.json) return outJson({ name: org.name, display_name: org.display_name, role }), 0;
    out(`${style.green("joined")} ${org.name} as ${role}; run under it with --org ${org.name}, or make it your default: evolve auth org use ${org.name}`);
    return 0;
  });
}

/** `auth org use <org|personal>`: your default organization for `run` and `dataset publish`. */
export async function orgUseCommand(name: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const now = useOrg(store, localUser(), name);
    if (opts.json) return outJson({ org: now }), 0;
    out(now === PERSONAL ? "new jobs and datasets go to your personal organization" : `new jobs and datasets go to ${now} (unless --org says otherwise)`);
    return 0;
  });
}

interface MemberOpts {
  makeOwner?: string;
  demote?: string;
  remove?: string;
}

/** At most one of --make-owner, --demote, --remove: the change and the user it names, or undefined for a plain list. */
function memberChange(opts: MemberOpts): [MemberChange, string] | undefined {
  const given = ([["make-owner", opts.makeOwner], ["demote", opts.demote], ["remove", opts.remove]] as const).filter((g) => g[1] !== undefined);
  if (given.length > 1) throw new EvolveError("usage", `one change at a time: ${given.map((g) => `--${g[0]}`).join(", ")}`);
  return given[0] ? [given[0][0], given[0][1]!] : undefined;
}

/** `auth org members [org] [--make-owner|--demote|--remove USER]`: an org's members and roles; without one, your organizations and your role in each. */
export async function orgMembersCommand(name: string | undefined, opts: MemberOpts & { json?: boolean }): Promise<number> {
  const change = memberChange(opts);
  if (change && name === undefined) throw new EvolveError("usage", `--${change[0]} needs the organization: evolve auth org members <org> --${change[0]} ${change[1]}`);
  return withStore((store) => {
    const user = localUser();
    if (name === undefined) {
      const dflt = defaultOrg(store, user);
      const rows = userOrgs(store, user).map((o) => ({ name: o.name, display_name: o.display_name, role: roleOf(o, user)!, members: o.members.length, default: o.name === dflt }));
      if (opts.json) return outJson(rows), 0;
      if (rows.length === 0) return out(`you (${user}) belong to no team yet: evolve auth org create <name>, or join one with an invite`), 0;
      outTable(["ORG", "NAME", "ROLE", "MEMBERS", "DEFAULT"], rows.map((r) => [r.name, r.display_name, r.role, String(r.members), r.default ? "yes" : "-"]));
      return 0;
    }
    const org = memberChange(opts) ? changeMember(store, user, name, ...memberChange(opts)!) : orgMembers(store, user, name);
    const rows = org.members.map((m) => ({ user: m.user, role: m.role, joined_at: m.joined_at }));
    if (opts.json) return outJson(rows), 0;
    outTable(["USER", "ROLE", "JOINED"], rows.map((r) => [r.user === user ? `${r.user} (you)` : r.user, r.role, when(r.joined_at)]));
    return 0;
  });
}

/** `auth org leave <org>`: you leave it (its last owner cannot). */
export async function orgLeaveCommand(name: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const user = localUser();
    const org = leaveOrg(store, user, name);
    if (opts.json) return outJson({ org: org.name, user }), 0;
    out(`${style.green("left")} ${org.name}: its jobs and datasets are no longer yours to see`);
    return 0;
  });
}

/** `auth org invites <org>`: an owner's list of the org's invites, never their tokens. */
export async function orgInvitesCommand(name: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const rows: InviteRow[] = listInvites(store, localUser(), name);
    if (opts.json) return outJson(rows), 0;
    if (rows.length === 0) return out(`no invites into ${name}: evolve auth org invite ${name}`), 0;
    outTable(["ID", "CREATED", "EXPIRES", "STATE", "BY"], rows.map((r) => [r.id, when(r.created_at), when(r.expires_at), r.state === "used" ? `used by ${r.used_by}` : r.state, r.created_by]));
    return 0;
  });
}

/** `auth org delete <org>`: an owner deletes an empty org (one holding jobs or datasets is refused, org_not_empty). */
export async function orgDeleteCommand(name: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    deleteOrg(store, localUser(), name);
    if (opts.json) return outJson({ deleted: name }), 0;
    out(`${style.green("deleted")} ${name} and its invites`);
    return 0;
  });
}
