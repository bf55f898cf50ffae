/**
 * The unit tier (`npm run test:unit`): every test file except the ones that need a container engine, run with no
 * engine in reach, so that the tier stays fast and a file that quietly needs podman or docker fails instead of
 * skipping. Podman and docker on PATH are stubs that record every call (tests/support/no-engine), CONTAINER_HOST
 * and DOCKER_HOST name sockets nothing listens on, and XDG_RUNTIME_DIR is a fresh folder so the podman service
 * evolve starts per user is not found either. Any recorded call fails the run, naming the file
 * (tests/support/unit-tier.ts).
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig, mergeConfig } from "vitest/config";
import base from "./vitest.config.ts";

/**
 * The files that need a container engine (they open one, spawn podman or docker, or run trials): `npm test`
 * only. A new test file is in the unit tier unless it is added here.
 */
export const ENGINE_TESTS = [
  "tests/binary.test.ts",
  "tests/build-hostlocal.test.ts",
  // the compiled binary (built after the unit tier runs in CI)
  "tests/conductor-binary.test.ts",
  "tests/docker.test.ts",
  "tests/doctor.test.ts",
  "tests/model-unavailable.test.ts",
  "tests/driver.test.ts",
  "tests/evolve-dataset.test.ts",
  "tests/evolve-screen-dataset.test.ts",
  "tests/evolve-cards-box.test.ts",
  "tests/metaharness-cards-box.test.ts",
  "tests/metaharness-run.test.ts",
  "tests/metaharness-proposer.test.ts",
  "tests/run-cli.test.ts",
  // evolve serve's POST /api/v1/jobs runs an oracle job on podman
  "tests/serve-run.engine.test.ts",
  // evolve run on podman writes a Harbor job folder
  "tests/results-run.test.ts",
  // evolve pack / unpack on podman: a pack runs on a fresh home with no build
  "tests/pack-engine.test.ts",
  "tests/run-interrupt.test.ts",
  "tests/trial-agents.test.ts",
  "tests/trial-changes.test.ts",
  "tests/trial-commands.test.ts",
  "tests/trial-gateway-net.test.ts",
  "tests/trial-gateway.test.ts",
  "tests/trial-hostile.test.ts",
  "tests/trial-verifier-trojans.test.ts",
  "tests/trial-images.test.ts",
  "tests/trial-network.test.ts",
  "tests/trial-outlive.test.ts",
  "tests/trial-persist.test.ts",
  "tests/trial-run.test.ts",
  "tests/task-shapes.test.ts",
  "tests/trial-userns.test.ts",
  // not an engine but the network: it pulls from the npm registry
  "tests/vendor-net.test.ts",
  // not an engine but the real claude and codex binaries, seconds per run: the full suite's
  "tests/agent-real-clis.test.ts",
];

const root = fileURLToPath(new URL(".", import.meta.url));
// a renamed file would otherwise drop into the unit tier and fail there for a reason that takes a while to see
const gone = ENGINE_TESTS.filter((f) => !existsSync(join(root, f)));
if (gone.length > 0) throw new Error(`vitest.unit.config.ts: ENGINE_TESTS names missing files: ${gone.join(", ")}`);

const scratch = mkdtempSync(join(tmpdir(), "evolve-unit-"));

export default mergeConfig(
  base,
  defineConfig({
    test: {
      exclude: ENGINE_TESTS,
      // most of these files wait on child processes and polls rather than compute: more workers than cores overlap them
      maxWorkers: 3,
      // a fresh worker per file paid the engine's import again for each file (most of the tier's CPU time); files
      // share workers instead, and tests/support/unit-tier-file.ts puts back the env and cwd each file leaves
      isolate: false,
      globalSetup: ["./tests/support/unit-tier.ts"],
      setupFiles: ["./tests/support/unit-tier-file.ts"],
      env: {
        PATH: [resolve(root, "tests/support/no-engine"), process.env.PATH ?? ""].join(delimiter),
        CONTAINER_HOST: `unix://${join(scratch, "no-podman.sock")}`,
        DOCKER_HOST: `unix://${join(scratch, "no-docker.sock")}`,
        XDG_RUNTIME_DIR: scratch,
        EVOLVE_NO_ENGINE_LOG: join(scratch, "engine-calls.log"),
        // a quarter of the fuzz cases (the full run keeps 2000); EVOLVE_FUZZ_CASES still overrides
        EVOLVE_FUZZ_CASES: process.env.EVOLVE_FUZZ_CASES ?? "500",
      },
    },
  }),
);
