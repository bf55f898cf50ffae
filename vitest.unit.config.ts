/**
 * The unit tier (`npm run test:unit`): every test file except the ones that need a container engine, run with no
 * engine in reach, so that the tier stays fast and a file that quietly needs podman or docker fails instead of
 * skipping. Podman and docker on PATH are stubs that record every call (tests/support/no-engine), CONTAINER_HOST
 * and DOCKER_HOST name sockets nothing listens on, and XDG_RUNTIME_DIR is a fresh folder so the podman service
 * evolve starts per user is not found either. Any recorded call fails the run, naming the file
 * (tests/support/unit-tier.ts).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig, mergeConfig } from "vitest/config";
import base from "./vitest.config.ts";

/**
 * The files that need a container engine (they open one, spawn podman or docker, run trials, reach the network or
 * run the compiled binary) are told apart by name: `<name>.engine.test.ts`, run by `npm test` only. Any other test
 * file is in the unit tier; one that quietly calls podman or docker fails it (tests/support/unit-tier.ts) and is
 * renamed, not listed.
 */
export const ENGINE_TESTS = "**/*.engine.test.ts";

const root = fileURLToPath(new URL(".", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "evolve-unit-"));

export default mergeConfig(
  base,
  defineConfig({
    test: {
      exclude: [...configDefaults.exclude, ENGINE_TESTS],
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
