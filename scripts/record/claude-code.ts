/**
 * Records Claude Code's fixtures (fixtures/agents/claude-code/): `node_modules/.bin/bun scripts/record/claude-code.ts
 * [case…]` with claude-code installed under $EVOLVE_AGENT_CACHE/claude-code (npm's global layout; default
 * /work/agent-cache).
 */
import { join } from "node:path";
import { claudeCode } from "../../engine/harness/agents/claude-code.ts";
import { AGENT_CACHE, recordCli } from "./record.ts";

await recordCli({
  spec: claudeCode,
  provider: "anthropic",
  model: "claude-sonnet-4-6",
  program: [join(AGENT_CACHE, "claude-code", claudeCode.vendor.entry)],
  shellTool: "Bash",
  shellInput: { command: "echo hello-from-tool > out.txt", description: "Write out.txt" },
  toolText: "I will write the file with the shell.",
  cases: process.argv.slice(2),
});
