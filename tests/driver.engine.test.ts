/**
 * The engine driver against real podman (tests/support/driver-suite.ts; tests/docker.engine.test.ts runs the same suite on
 * Docker), and how the engine is chosen and opened.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../engine/driver/index.ts";
import type { RestEngine } from "../engine/driver/engine.ts";
import { LABEL_MANAGED } from "../engine/driver/types.ts";
import { DEFAULT_USERNS } from "../engine/config.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { driverSuite } from "./support/driver-suite.ts";
import { expectCode } from "./support/expect-code.ts";

driverSuite("podman");

let engine: Engine;
let home: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-driver-"));
  engine = await openEngine({ kind: "podman", home });
});

afterAll(async () => {
  await engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe("openEngine", () => {
  it("docker without a daemon is engine_unavailable with the dockerd command as the hint", async () => {
    const saved = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = `unix://${join(home, "no-docker.sock")}`;
    try {
      const e = await expectCode(() => openEngine({ kind: "docker", home }), "engine_unavailable");
      expect(e.hint).toContain("dockerd -H unix://");
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
  });

  it("EVOLVE_ENGINE picks the engine, and an unknown one is refused", async () => {
    const saved = process.env.EVOLVE_ENGINE;
    const savedHost = process.env.DOCKER_HOST;
    try {
      process.env.EVOLVE_ENGINE = "docker";
      process.env.DOCKER_HOST = `unix://${join(home, "no-docker.sock")}`;
      await expectCode(() => openEngine({ home }), "engine_unavailable");
      process.env.EVOLVE_ENGINE = "lxc";
      await expectCode(() => openEngine({ home }), "engine_unknown");
    } finally {
      if (savedHost === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = savedHost;
      if (saved === undefined) delete process.env.EVOLVE_ENGINE;
      else process.env.EVOLVE_ENGINE = saved;
    }
  });

  it("reuses the running podman service instead of starting another", async () => {
    const again = await openEngine({ kind: "podman", home });
    expect((await again.info()).socket).toBe((await engine.info()).socket);
    await again.close();
  });
});

describe("a user-namespaced podman box's layer", () => {
  it("changedOwners reuses the storage podman reported when the box started: no inspect of its own, the owners as the box sees them", async () => {
    const rest = (engine as RestEngine).rest;
    const map = await engine.boxUserns(DEFAULT_USERNS);
    expect(map).toBeDefined();
    const id = await engine.create({ image: "debian:bookworm-slim", cmd: ["sleep", "infinity"], labels: { [LABEL_MANAGED]: "true" }, network: "none", userns: map });
    try {
      await engine.start(id);
      const r = await engine.exec(id, ["sh", "-c", "touch /made && chown 1000:1000 /made"]);
      expect(r.exitCode).toBe(0);
      const calls: string[] = [];
      const orig = rest.request.bind(rest);
      rest.request = (method, path, opts) => (calls.push(`${method} ${path}`), orig(method, path, opts));
      try {
        expect(await engine.changedOwners(id, ["/made"])).toEqual(new Map([["/made", [1000, 1000]]]));
      } finally {
        rest.request = orig;
      }
      expect(calls.filter((c) => c.includes("/json"))).toEqual([]);
    } finally {
      await engine.remove(id);
    }
  });
});
