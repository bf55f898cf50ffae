/**
 * Records opencode's fixtures (fixtures/agents/opencode/): `node_modules/.bin/bun scripts/record/opencode.ts [case…]`
 * with opencode installed under $EVOLVE_AGENT_CACHE/opencode (npm's global layout; default /work/agent-cache).
 */
import { join } from "node:path";
import { opencode } from "../../engine/harness/agents/opencode.ts";
import { AGENT_CACHE, recordCli } from "./record.ts";

await recordCli({
  spec: opencode,
  provider: "openai",
  model: "gpt-fixture",
  // The host's copy came from a plain `npm i -g opencode-ai`: its platform package sits under opencode-ai, not beside
  // it as in the vendored tree (vendor.omitOptional).
  program: [join(AGENT_CACHE, "opencode/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode")],
  shellTool: "bash",
  shellInput: { command: "echo hello-from-tool > out.txt", description: "Write out.txt" },
  cases: process.argv.slice(2),
});
