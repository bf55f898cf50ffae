/**
 * Teams on one machine through the CLI (platform-teams.md): `evolve auth org create|invite|join|use|members`, invites
 * single use and expiring, `--org` refused for an org you are not in (alike for one that does not exist), `dataset
 * publish --org` and `job list --scope my|shared|org`; owners manage members (make owner, demote, remove), invites
 * (list, revoke) and delete an empty org, and an org always keeps an owner. Several users share one $EVOLVE_HOME,
 * each as $EVOLVE_USER.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createJob } from "../engine/job/job.ts";
import { changeMember, createInvite, createOrg, joinOrg } from "../engine/org/mod.ts";
import { createServeApp } from "../engine/serve/app.ts";
import { API_BASE } from "../engine/serve/openapi.ts";
import { createToken } from "../engine/serve/tokens.ts";
import { openStore } from "../engine/store/index.ts";
import { cliHost } from "./support/cli-host.ts";
import { expectCode } from "./support/expect-code.ts";
import { jobConfig } from "./support/job-config.ts";

const root = resolve(__dirname, "..");
const host = cliHost();
const home = mkdtempSync(join(tmpdir(), "evolve-org-cli-"));
afterAll(() => {
  host.close();
  rmSync(home, { recursive: true, force: true });
});

function as(user: string, args: string[], at: string = home) {
  return host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: at, EVOLVE_AGENTS_DIR: join(at, "agents"), EVOLVE_USER: user, NO_COLOR: "1" }, timeoutMs: 60_000 });
}
const json = (r: { code: number | null; stdout: string; stderr: string }) => {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};

describe("evolve auth org", () => {
  it("creates a team, invites once, and a member joins; members see roles; only an owner invites", () => {
    expect(json(as("ann", ["auth", "org", "create", "acme", "--display-name", "Acme Lab", "--json"]))).toMatchObject({ name: "acme", display_name: "Acme Lab", role: "owner" });
    expect(as("bo", ["auth", "org", "create", "acme"]).stderr).toContain("org_exists");
    expect(as("bo", ["auth", "org", "invite", "acme"]).stderr).toContain("org_not_member");
    const inv = json(as("ann", ["auth", "org", "invite", "acme", "--json"]));
    expect(inv.token).toMatch(/^evi_/);
    expect(json(as("bo", ["auth", "org", "join", inv.token, "--json"]))).toEqual({ name: "acme", display_name: "Acme Lab", role: "member" });
    // single use: a second join with it is refused, as an unknown one is
    expect(as("cy", ["auth", "org", "join", inv.token]).stderr).toContain("invite_refused");
    expect(as("cy", ["auth", "org", "join", "evi_nope"]).stderr).toContain("invite_refused");
    expect(json(as("bo", ["auth", "org", "members", "acme", "--json"])).map((m: { user: string; role: string }) => [m.user, m.role])).toEqual([
      ["ann", "owner"],
      ["bo", "member"],
    ]);
    expect(as("bo", ["auth", "org", "invite", "acme"]).stderr).toContain("org_not_owner");
    expect(as("cy", ["auth", "org", "members", "acme"]).stderr).toContain("org_not_member");
    expect(json(as("bo", ["auth", "org", "members", "--json"]))).toEqual([{ name: "acme", display_name: "Acme Lab", role: "member", members: 2, default: false }]);
    // the invite is kept hashed: the store holds no token
    const store = openStore(home);
    try {
      expect(JSON.stringify(store.getInvite(inv.id))).not.toContain(inv.token.slice(inv.token.indexOf("_", 4) + 1));
    } finally {
      void store.close();
    }
  });

  it("refuses an org you are not in, or one that does not exist, alike with org_not_member (run, dataset publish, use)", () => {
    const a = as("cy", ["run", "-p", "fixtures/tasks/valid/minimal", "--org", "acme"]);
    const b = as("cy", ["run", "-p", "fixtures/tasks/valid/minimal", "--org", "nosuch"]);
    expect(a.code).toBe(2);
    expect(a.stderr).toContain("org_not_member");
    expect(b.stderr.replace("nosuch", "acme")).toBe(a.stderr);
    expect(as("cy", ["dataset", "publish", "fixtures/tasks/valid/minimal", "--name", "d", "--version", "1", "--org", "acme"]).stderr).toContain("org_not_member");
    expect(as("cy", ["auth", "org", "use", "acme"]).stderr).toContain("org_not_member");
  });

  it("dataset publish --org places a new dataset in the org, and a new version stays where its dataset is", () => {
    const first = json(as("ann", ["dataset", "publish", "fixtures/tasks/valid/minimal", "--name", "team-ds", "--version", "1.0", "--org", "acme", "--json"]));
    expect(first.dataset).toMatchObject({ org: "acme", created_by: "ann" });
    expect(json(as("ann", ["auth", "org", "use", "acme", "--json"]))).toEqual({ org: "acme" });
    // with a default org, a new dataset lands there without --org
    expect(json(as("ann", ["dataset", "publish", "fixtures/tasks/valid/minimal", "--name", "by-default", "--version", "1.0", "--json"])).dataset.org).toBe("acme");
    expect(json(as("ann", ["auth", "org", "use", "personal", "--json"]))).toEqual({ org: "personal" });
    expect(json(as("ann", ["dataset", "publish", "fixtures/tasks/valid/minimal", "--name", "mine", "--version", "1.0", "--json"])).dataset.org).toBeUndefined();
    const second = json(as("bo", ["dataset", "publish", "fixtures/tasks/valid/healthcheck", "--name", "team-ds", "--version", "2.0", "--org", "personal", "--json"]));
    expect(second.dataset).toMatchObject({ org: "acme", created_by: "bo" });
  });

  it("job list --scope: my (yours), shared (teammates'), org (everything in your organizations); old jobs are yours", () => {
    const store = openStore(home);
    let ids: Record<string, string>;
    try {
      ids = {
        legacy: createJob(store, jobConfig()).id,
        annTeam: createJob(store, jobConfig(), undefined, undefined, { org: "acme", created_by: "ann" }).id,
        boTeam: createJob(store, jobConfig(), undefined, undefined, { org: "acme", created_by: "bo" }).id,
        boOwn: createJob(store, jobConfig(), undefined, undefined, { created_by: "bo" }).id,
        cyOwn: createJob(store, jobConfig(), undefined, undefined, { created_by: "cy" }).id,
      };
    } finally {
      void store.close();
    }
    const list = (user: string, scope: string) => new Set(json(as(user, ["job", "list", "--scope", scope, "--limit", "0", "--json"])).map((j: { id: string }) => j.id));
    // a job from before teams has no creator: it is the reader's own, as it always was on a one-user store
    expect(list("bo", "my")).toEqual(new Set([ids.boTeam, ids.boOwn, ids.legacy]));
    expect(list("bo", "shared")).toEqual(new Set([ids.annTeam]));
    expect(list("bo", "org")).toEqual(new Set([ids.annTeam, ids.boTeam, ids.boOwn, ids.legacy]));
    expect(list("cy", "org")).toEqual(new Set([ids.cyOwn, ids.legacy]));
    expect(list("cy", "shared")).toEqual(new Set());
    expect(as("bo", ["job", "list", "--scope", "team"]).stderr).toContain("usage");
  });
});

describe("invites", () => {
  it("an expired invite is refused like an unknown one; a used one cannot be reused", async () => {
    const h = mkdtempSync(join(tmpdir(), "evolve-org-inv-"));
    const store = openStore(h);
    try {
      createOrg(store, "ann", "lab");
      const { token } = createInvite(store, "ann", "lab", 60_000);
      await expectCode(() => joinOrg(store, "bo", token, Date.now() + 61_000), "invite_refused");
      expect(joinOrg(store, "bo", token).role).toBe("member");
      await expectCode(() => joinOrg(store, "cy", token), "invite_refused");
    } finally {
      await store.close();
      rmSync(h, { recursive: true, force: true });
    }
  });
});

describe("owners manage members and invites", () => {
  const h = mkdtempSync(join(tmpdir(), "evolve-org-manage-"));
  afterAll(() => rmSync(h, { recursive: true, force: true }));
  const at = (user: string, args: string[]) => as(user, args, h);
  const roles = (user: string) => json(at(user, ["auth", "org", "members", "lab", "--json"])).map((m: { user: string; role: string }) => `${m.user}:${m.role}`);
  const join2 = (user: string) => json(at(user, ["auth", "org", "join", json(at("ann", ["auth", "org", "invite", "lab", "--json"])).token, "--json"]));

  it("make owner, demote, remove: owners only, never leaving the org without an owner", () => {
    json(at("ann", ["auth", "org", "create", "lab", "--json"]));
    join2("bo");
    join2("cy");
    // only owners manage; a non-member is answered as for a missing org
    expect(at("bo", ["auth", "org", "members", "lab", "--make-owner", "cy"]).stderr).toContain("org_not_owner");
    expect(at("dee", ["auth", "org", "members", "lab", "--remove", "bo"]).stderr).toContain("org_not_member");
    expect(at("dee", ["auth", "org", "members", "nosuch", "--remove", "bo"]).stderr).toContain("org_not_member");
    expect(at("ann", ["auth", "org", "members", "lab", "--remove", "dee"]).stderr).toContain("org_member_missing");
    expect(at("ann", ["auth", "org", "members", "lab", "--remove", "bo", "--demote", "cy"]).stderr).toContain("usage");
    // the last owner cannot demote themself, leave, or be removed
    const last = at("ann", ["auth", "org", "members", "lab", "--demote", "ann"]);
    expect(last.code).toBe(2);
    expect(last.stderr).toContain("org_last_owner");
    expect(at("ann", ["auth", "org", "members", "lab", "--remove", "ann"]).stderr).toContain("org_last_owner");
    expect(at("ann", ["auth", "org", "leave", "lab"]).stderr).toContain("org_last_owner");
    expect(roles("ann")).toEqual(["ann:owner", "bo:member", "cy:member"]);
    // with a second owner, the first may step down, and the new owner manages
    expect(json(at("ann", ["auth", "org", "members", "lab", "--make-owner", "bo", "--json"])).map((m: { role: string }) => m.role)).toEqual(["owner", "owner", "member"]);
    json(at("ann", ["auth", "org", "members", "lab", "--demote", "ann", "--json"]));
    expect(at("ann", ["auth", "org", "members", "lab", "--remove", "cy"]).stderr).toContain("org_not_owner");
    expect(at("bo", ["auth", "org", "members", "lab", "--remove", "bo"]).stderr).toContain("org_last_owner");
    json(at("bo", ["auth", "org", "members", "lab", "--remove", "cy", "--json"]));
    expect(roles("bo")).toEqual(["ann:member", "bo:owner"]);
    // a removed member is out: as for a missing org
    expect(at("cy", ["auth", "org", "members", "lab"]).stderr).toContain("org_not_member");
    // anyone but the last owner leaves; their default org goes with it
    json(at("ann", ["auth", "org", "use", "lab", "--json"]));
    expect(json(at("ann", ["auth", "org", "leave", "lab", "--json"]))).toEqual({ org: "lab", user: "ann" });
    expect(json(at("ann", ["auth", "org", "members", "--json"]))).toEqual([]);
    expect(at("ann", ["auth", "org", "leave", "lab"]).stderr).toContain("org_not_member");
  });

  it("invites: an owner lists them without tokens and revokes one, which then cannot be used", () => {
    const open = json(at("bo", ["auth", "org", "invite", "lab", "--json"]));
    const rows = json(at("bo", ["auth", "org", "invites", "lab", "--json"]));
    expect(JSON.stringify(rows)).not.toContain(open.token.slice(open.token.indexOf("_", 4) + 1));
    expect(rows.map((r: { state: string }) => r.state)).toEqual(["used", "used", "open"]);
    expect(at("bo", ["auth", "org", "invites", "lab"]).stdout).not.toContain(open.token.slice(open.token.indexOf("_", 4) + 1));
    // members and outsiders may not; an invite of someone else's org is answered as an unknown one
    json(at("ann", ["auth", "org", "join", json(at("bo", ["auth", "org", "invite", "lab", "--json"])).token, "--json"]));
    expect(at("ann", ["auth", "org", "invites", "lab"]).stderr).toContain("org_not_owner");
    expect(at("ann", ["auth", "org", "invite", "--revoke", open.id]).stderr).toContain("org_not_owner");
    expect(at("cy", ["auth", "org", "invites", "lab"]).stderr).toContain("org_not_member");
    const outsider = at("cy", ["auth", "org", "invite", "--revoke", open.id]);
    expect(outsider.stderr).toContain("invite_not_found");
    expect(at("cy", ["auth", "org", "invite", "--revoke", "01NOSUCHINVITE"]).stderr.replace("01NOSUCHINVITE", open.id)).toBe(outsider.stderr);
    expect(json(at("bo", ["auth", "org", "invite", "--revoke", open.id, "--json"]))).toMatchObject({ id: open.id, state: "revoked" });
    expect(at("cy", ["auth", "org", "join", open.token]).stderr).toContain("invite_refused");
    expect(at("bo", ["auth", "org", "invite"]).stderr).toContain("usage");
  });

  it("delete: an owner only, refused while the org holds a job, then gone with its invites", () => {
    const store = openStore(h);
    let job: string;
    try {
      job = createJob(store, jobConfig(), undefined, undefined, { org: "lab", created_by: "bo" }).id;
    } finally {
      void store.close();
    }
    expect(at("ann", ["auth", "org", "delete", "lab"]).stderr).toContain("org_not_owner");
    expect(at("cy", ["auth", "org", "delete", "lab"]).stderr).toContain("org_not_member");
    const held = at("bo", ["auth", "org", "delete", "lab"]);
    expect(held.code).toBe(2);
    expect(held.stderr).toContain("org_not_empty");
    const s2 = openStore(h);
    try {
      s2.putJob({ ...s2.getJob(job)!, org: undefined });
    } finally {
      void s2.close();
    }
    expect(json(at("bo", ["auth", "org", "delete", "lab", "--json"]))).toEqual({ deleted: "lab" });
    expect(at("bo", ["auth", "org", "members", "lab"]).stderr).toContain("org_not_member");
    const s3 = openStore(h);
    try {
      expect(s3.listInvites().filter((i) => i.org === "lab")).toEqual([]);
    } finally {
      void s3.close();
    }
  });
});

describe("a removed member over the API", () => {
  it("reads the org's jobs while a member, and not once removed", async () => {
    const h = mkdtempSync(join(tmpdir(), "evolve-org-api-"));
    const store = openStore(h);
    try {
      createOrg(store, "ann", "lab");
      joinOrg(store, "bo", createInvite(store, "ann", "lab").token);
      const job = createJob(store, jobConfig(), undefined, undefined, { org: "lab", created_by: "ann" }).id;
      const tok = createToken(store, { scope: "read", name: "bo", user: "bo" }).token;
      const app = createServeApp({ store, home: h, user: "ann", version: "0-test" });
      const get = () => app.fetch(new Request(`http://127.0.0.1${API_BASE}/jobs/${job}`, { headers: { authorization: `Bearer ${tok}` } }));
      expect((await get()).status).toBe(200);
      changeMember(store, "ann", "lab", "remove", "bo");
      expect((await get()).status).toBe(404);
    } finally {
      await store.close();
      rmSync(h, { recursive: true, force: true });
    }
  });
});
