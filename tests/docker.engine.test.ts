/**
 * The Docker leg: the driver suite (tests/support/driver-suite.ts) and real trials through the CLI on a Docker
 * daemon. Opt-in: it runs only when DOCKER_HOST names a unix socket that answers /_ping (scripts/ci/docker.sh
 * starts one and prints the export); otherwise every test here is skipped.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ping } from "../engine/driver/rest.ts";
import { unixPath } from "../engine/driver/socket.ts";
import { LABEL_HOME } from "../engine/driver/types.ts";
import { driverSuite } from "./support/driver-suite.ts";

const socket = unixPath(process.env.DOCKER_HOST);
const dockerUp = socket ? await ping(socket, 1000) : false;
const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");

describe.skipIf(!dockerUp)("on Docker (DOCKER_HOST answers)", () => {
  driverSuite("docker");

  describe("evolve run --engine docker", () => {
    let home: string;
    const evolve = (args: string[]) => {
      const r = spawnSync(bun, [join(root, "main.ts"), ...args], {
        // the run's ./jobs folder lands in the test's home, never in the checkout
        cwd: home,
        encoding: "utf8",
        env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", EVOLVE_ENGINE: "" },
        timeout: 240_000,
      });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    /** Containers of this test's home on the Docker daemon, running or not. */
    const boxes = () => {
      const r = spawnSync("docker", ["ps", "-aq", "--filter", `label=${LABEL_HOME}=${home}`], { encoding: "utf8" });
      expect(r.status).toBe(0);
      return r.stdout.trim().split("\n").filter(Boolean);
    };

    beforeAll(() => {
      home = mkdtempSync(join(tmpdir(), "evolve-docker-home-"));
    });
    afterAll(() => {
      evolve(["gc", "--engine", "docker"]);
      rmSync(home, { recursive: true, force: true });
    });

    it("scores the oracle on built tasks (entrypoint service, separate verifier, pre_artifacts) and leaves no container", () => {
      const tasks = ["oracle-ok", "entrypoint-service", "separate-verifier", "pre-artifacts"].map((t) => join(root, "fixtures", "tasks", "trials", t));
      for (const task of tasks) {
        const r = evolve(["run", "-p", task, "-a", "oracle", "--engine", "docker", "--json"]);
        expect(r.stderr).toBe("");
        expect(r.code).toBe(0);
        const settled = r.stdout
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l))
          .filter((e) => e.kind === "trial_settled");
        expect(settled).toHaveLength(1);
        expect(settled[0].trial).toMatchObject({ status: "SCORED", reward: 1 });
        const result = JSON.parse(readFileSync(join(home, "trials", settled[0].trial.id, "result.json"), "utf8"));
        expect(result.verifier_result?.rewards ?? result.rewards).toMatchObject({ reward: 1 });
      }
      // removal runs after the trial settles; `evolve run` waits for it before exiting
      expect(boxes()).toEqual([]);
    });

    it("a failed build says why in the builder's own words, and an entrypoint that dies mid-agent is the reason given", () => {
      const settle = (task: string) => {
        const r = evolve(["run", "-p", join(root, "fixtures", "tasks", "trials", task), "-a", "oracle", "--engine", "docker", "--json"]);
        const events = r.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l));
        const id = events.find((e) => e.kind === "trial_settled").trial.id as string;
        const show = evolve(["trial", "show", id, "--json"]);
        return { rec: JSON.parse(show.stdout), dir: join(home, "trials", id) };
      };
      const built = settle("build-fails");
      expect(built.rec).toMatchObject({ status: "INFRASTRUCTURE_ERROR", failed_phase: "build", exception: { type: "EnvironmentBuildError" } });
      expect(built.rec.exception.message.split("\n")[0]).toMatch(/^building evolve-env:[0-9a-f]{24} failed \(exit \d+\): RUN pip3 install requests: \/bin\/sh: 1: pip3: not found$/);
      expect(readFileSync(join(built.dir, "setup.log"), "utf8")).toMatch(/^Step 4\/\d+ : RUN pip3 install requests$/m);
      const died = settle("entrypoint-dies-later");
      expect(died.rec).toMatchObject({ status: "INFRASTRUCTURE_ERROR", failed_phase: "agent", exception: { type: "EnvironmentStartError" } });
      expect(died.rec.exception.message.split("\n")[0]).toBe("the box's entrypoint exited with code 3 during the agent phase: service crashed: lost its database connection");
      expect(readFileSync(join(died.dir, "box.log"), "utf8")).toBe("service listening on :8080\nservice crashed: lost its database connection\n");
      expect(boxes()).toEqual([]);
    });
  });
});
