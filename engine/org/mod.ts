/**
 * Teams on one machine (platform-teams.md, issue 23 §1): local identities, organizations with owners and members,
 * invites, the org a new job or dataset lands in, and who sees what (one rule, scope.ts).
 *
 * The room's public surface (issue 21 §5): what commands use, by name; the rest of the folder is private by convention.
 */
export { localUser } from "./identity.ts";
export { changeMember, createInvite, createOrg, DEFAULT_INVITE_TTL_MS, deleteOrg, joinOrg, leaveOrg, listInvites, orgMembers, PERSONAL, resolveOrg, revokeInvite, roleOf, useOrg, userOrgs, defaultOrg, type InviteRow, type MemberChange } from "./orgs.ts";
export { canSee, inScope, JOB_SCOPES, parseJobScope, scopedStore, viewerOf, type JobScope, type Viewer } from "./scope.ts";
