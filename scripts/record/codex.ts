/**
 * Records Codex's fixtures (fixtures/agents/codex/): `node_modules/.bin/bun scripts/record/codex.ts [case…]` with
 * codex installed under $EVOLVE_AGENT_CACHE/codex (npm's global layout; default /work/agent-cache).
 */
import { join } from "node:path";
import { codex } from "../../engine/harness/agents/codex.ts";
import { AGENT_CACHE, recordCli } from "./record.ts";

await recordCli({
  spec: codex,
  provider: "openai",
  model: "gpt-5",
  program: [join(AGENT_CACHE, "codex", codex.vendor.entry)],
  shellTool: "exec_command",
  shellInput: { cmd: "echo hello-from-tool > out.txt" },
  cases: process.argv.slice(2),
});
