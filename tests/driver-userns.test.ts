/**
 * engine/driver/userns.ts on a real file system: what the engine made with unmapped box ids in a box's own layer is
 * given to the box's mapped ids; entries already mapped, ids that are no box ids and the targets of links are left
 * alone; the walk is bounded. Needs root (it chowns); the engine tier proves it on real boxes (task-shapes.engine.test.ts).
 */
import { lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync, chownSync, lchownSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { mapEngineMade, mapWorkdirPath } from "../engine/driver/userns.ts";
import { nonRootUser } from "../engine/trial/phases/build.ts";
import { startFailure } from "../engine/trial/box.ts";
import { EvolveError } from "../engine/errors.ts";
import { EXCEPTIONS, TrialFailure } from "../engine/outcome.ts";

const MAP = { hostId: 2_000_000_000, size: 65536 };
const isRoot = process.getuid?.() === 0;
const dirs: string[] = [];

function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), "evolve-userns-map-"));
  dirs.push(d);
  return d;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!isRoot)("mapping what the engine made (needs root)", () => {
  it("gives a WORKDIR the engine made as host root, and its new parents, to box root; a user's folder to that user's mapped id", async () => {
    const layer = scratch();
    mkdirSync(join(layer, "srv/site/build"), { recursive: true }); // engine-made: host root, unmapped
    chownSync(join(layer, "srv/site/build"), 1001, 1001); // chowned to the image user's unmapped id
    mkdirSync(join(layer, "etc"));
    chownSync(join(layer, "etc"), MAP.hostId, MAP.hostId); // made right by the engine: left as it is
    const changed = await mapEngineMade(layer, layer, MAP);
    expect(changed.sort()).toEqual(["srv", "srv/site", "srv/site/build"]);
    expect(statSync(join(layer, "srv")).uid).toBe(MAP.hostId);
    expect(statSync(join(layer, "srv/site")).gid).toBe(MAP.hostId);
    expect(statSync(join(layer, "srv/site/build")).uid).toBe(MAP.hostId + 1001);
    expect(statSync(join(layer, "etc")).uid).toBe(MAP.hostId);
  });

  it("never follows a link: the link is mapped, its target on the host keeps its owner", async () => {
    const layer = scratch();
    const outside = scratch();
    writeFileSync(join(outside, "secret"), "x");
    symlinkSync(join(outside, "secret"), join(layer, "app"));
    symlinkSync(outside, join(layer, "dir-link"));
    lchownSync(join(layer, "app"), 0, 0);
    const changed = await mapEngineMade(layer, layer, MAP);
    expect(changed.sort()).toEqual(["app", "dir-link"]);
    expect(lstatSync(join(layer, "app")).uid).toBe(MAP.hostId);
    expect(statSync(join(outside, "secret")).uid).toBe(0);
    expect(statSync(outside).uid).toBe(0);
  });

  it("leaves ids outside the box's range (the overflow id, another box's) alone", async () => {
    const layer = scratch();
    writeFileSync(join(layer, "f"), "");
    chownSync(join(layer, "f"), 65534 + MAP.size, 0);
    expect(await mapEngineMade(layer, layer, MAP)).toEqual([]);
    expect(statSync(join(layer, "f")).uid).toBe(65534 + MAP.size);
  });

  it("looks at no more than its limit of entries", async () => {
    const layer = scratch();
    for (let i = 0; i < 20; i++) writeFileSync(join(layer, `f${i}`), "");
    expect((await mapEngineMade(layer, layer, MAP, 5)).length).toBe(5);
  });

  it("without an upper layer, maps the WORKDIR's path components and stops at a link", async () => {
    const rootfs = scratch();
    mkdirSync(join(rootfs, "a/b"), { recursive: true });
    chownSync(join(rootfs, "a"), MAP.hostId, MAP.hostId);
    symlinkSync("/elsewhere", join(rootfs, "a/b/link"));
    expect(await mapWorkdirPath(rootfs, "/a/b/link/c", MAP)).toEqual(["a/b", "a/b/link"]);
    expect(await mapWorkdirPath(rootfs, "/missing/x", MAP)).toEqual([]);
  });
});

describe("the image's USER the agent runs as without [agent] user", () => {
  it("is the user part of a non-root USER, and nothing for root or an unset USER", () => {
    expect(nonRootUser("dev")).toBe("dev");
    expect(nonRootUser("1001:1001")).toBe("1001");
    for (const u of ["", "root", "0", "0:0", "root:root", undefined]) expect(nonRootUser(u)).toBeUndefined();
  });
});

describe("a box that could not start (engine/trial/box.ts startFailure: the agent's, a verifier's and each compose service's)", () => {
  const unmappable = new EvolveError("box_userns_failed", "cannot give the folders podman made for box 0123456789ab to its mapped root (host uid 2000000000): EPERM", "run evolve as root beside rootful podman on this host, or set [box] userns = false in config.toml");

  it("is BoxUsernsError with the fix when what the engine made could not be mapped, for a compose sidecar as for the agent's box", () => {
    for (const what of ["compose service web", "the container from evolve-env:abc"]) {
      const f = startFailure(unmappable, what);
      expect(f.type).toBe("BoxUsernsError");
      expect(f.message).toBe(`${what}: ${unmappable.message}; ${unmappable.hint}`);
      expect(f.status).toBe("INFRASTRUCTURE_ERROR");
      expect(EXCEPTIONS.BoxUsernsError.deterministic).toBe(true);
    }
  });

  it("is EnvironmentStartError for anything else, and keeps a trial failure as it is", () => {
    const f = startFailure(new EvolveError("engine_error", "podman POST /containers/x/start: 500 oci runtime error", ""), "compose service db");
    expect(f.type).toBe("EnvironmentStartError");
    expect(f.message).toBe("compose service db did not start: podman POST /containers/x/start: 500 oci runtime error");
    const given = new TrialFailure("HealthcheckError", "never healthy");
    expect(startFailure(given, "compose service db")).toBe(given);
  });
});
