/**
 * Per-file setup of the unit tier: names the running test file in the environment, so the engine stubs
 * (tests/support/no-engine) can say which file called them, also from a child process the file spawned.
 *
 * The tier runs files one after another in shared worker processes (isolate: false, vitest.unit.config.ts), so
 * what a file leaves in process.env or as its working directory would reach the next file in that worker: a file
 * that points EVOLVE_AGENTS_DIR or EVOLVE_NPM somewhere, or deletes a variable, at module level without undoing it.
 * Both are put back as they were before the file once it ends, whatever the file did.
 */
import { relative } from "node:path";
import { afterAll, expect } from "vitest";

const env = { ...process.env };
const cwd = process.cwd();

// Registered before any of the file's hooks, so it runs after all of them (after-hooks run in reverse order).
afterAll(() => {
  for (const k of Object.keys(process.env)) if (!(k in env)) delete process.env[k];
  for (const [k, v] of Object.entries(env)) if (process.env[k] !== v) process.env[k] = v;
  if (process.cwd() !== cwd) process.chdir(cwd);
});

const testPath = expect.getState().testPath;
process.env.EVOLVE_UNIT_FILE = testPath ? relative(cwd, testPath) : "?";
