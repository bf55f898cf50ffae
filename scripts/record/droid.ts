/**
 * Records droid's fixtures (fixtures/agents/droid/): `node_modules/.bin/bun scripts/record/droid.ts [case…]` with
 * droid installed under $EVOLVE_AGENT_CACHE/droid (npm's global layout; default /work/agent-cache).
 */
import { join } from "node:path";
import { droid } from "../../engine/harness/agents/droid.ts";
import { AGENT_CACHE, recordCli } from "./record.ts";

await recordCli({
  spec: droid,
  provider: "anthropic",
  model: "claude-fixture",
  program: [join(AGENT_CACHE, "droid", droid.vendor.entry)],
  shellTool: "Execute",
  shellInput: { command: "echo hello-from-tool > out.txt", summary: "Write out.txt" },
  cases: process.argv.slice(2),
});
