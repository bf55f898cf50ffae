/**
 * Per-file setup of the unit tier: names the running test file in the environment, so the engine stubs
 * (tests/support/no-engine) can say which file called them, also from a child process the file spawned.
 */
import { relative } from "node:path";
import { expect } from "vitest";

const testPath = expect.getState().testPath;
process.env.EVOLVE_UNIT_FILE = testPath ? relative(process.cwd(), testPath) : "?";
