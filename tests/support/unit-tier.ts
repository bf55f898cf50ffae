/**
 * Global setup of the unit tier (vitest.unit.config.ts): after the run, fails it when any test reached for a
 * container engine, naming the file and the call. A skipIf(!hasPodman) probe counts too: in the unit tier such a
 * file would skip its engine tests in silence, so it is named `<name>.engine.test.ts` instead.
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import type { TestProject } from "vitest/node";

/** Returns the teardown that reads the stubs' log and fails the run when it holds any call. */
export default function setup(project: TestProject): () => void {
  const log = project.config.env.EVOLVE_NO_ENGINE_LOG;
  if (!log) throw new Error("unit tier: EVOLVE_NO_ENGINE_LOG is not set (run it as npm run test:unit)");
  return () => {
    const calls = existsSync(log) ? readFileSync(log, "utf8").trim() : "";
    rmSync(dirname(log), { recursive: true, force: true });
    if (calls) {
      const lines = calls.split("\n").map((l) => `  ${l.replace("\t", ": ")}`);
      // a throw here is only printed ("error during close") and the run would still exit 0
      process.exitCode = 1;
      process.stderr.write(
        `unit tier: ${lines.length} call(s) to a container engine; rename these files to <name>.engine.test.ts (vitest.unit.config.ts) or ` +
          `drop the engine from them:\n${lines.join("\n")}\n`,
      );
    }
  };
}
