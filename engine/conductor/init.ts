/**
 * `evolve harness init`: a working default `.agent/` the conductor runs as it is and the evolver changes file by
 * file. It holds the same defaults the conductor uses when a file is absent, so starting from it changes nothing
 * but makes every policy visible and editable.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EvolveError } from "../errors.ts";
import { AGENT_PATHS, DEFAULT_CONDUCTOR_CONFIG, TOOL_NAMES } from "./layout.ts";
import { BUILTIN_PLANNING } from "./seats.ts";
import { DEFAULT_TOOL_SCHEMAS } from "./tools.ts";

const KNOWLEDGE_README = `# Knowledge

Every \`*.md\` file in this folder is appended to the agent's instructions, in name order, under a heading with
its file name. Put here what the agent should know about its tasks: conventions, pitfalls, where things are.

This file is an example: it is appended too, so keep it short or replace it.
`;

const SAMPLE_HOOK = `#!/bin/sh
# A sample pre_tool_call hook. It is not used until it is renamed to pre_tool_call and made executable:
#   mv hooks/pre_tool_call.sample hooks/pre_tool_call && chmod +x hooks/pre_tool_call
#
# The conductor runs it before every tool call, with the call as JSON on stdin:
#   {"tool": "shell", "input": {"command": "..."}, "id": "...", "turn": 3, "workdir": "/app"}
# Exit 0 lets the call run. Any other exit vetoes it; what the hook printed is the reason the model sees.
call=$(cat)
case "$call" in
  *'"tool":"shell"'*'rm -rf /'*) echo "refusing to delete the root file system"; exit 1 ;;
esac
exit 0
`;

/** The files of a default `.agent/`, relative to it. */
export function defaultAgentFiles(): Record<string, string> {
  const files: Record<string, string> = {
    [AGENT_PATHS.planning]: `${BUILTIN_PLANNING}\n`,
    [AGENT_PATHS.config]: `${JSON.stringify(DEFAULT_CONDUCTOR_CONFIG, null, 2)}\n`,
    [AGENT_PATHS.seats]: "{}\n",
    [`${AGENT_PATHS.knowledge}/README.md`]: KNOWLEDGE_README,
    [`${AGENT_PATHS.preToolCall}.sample`]: SAMPLE_HOOK,
  };
  for (const n of TOOL_NAMES) files[`${AGENT_PATHS.toolSchemas}/${n}.json`] = `${JSON.stringify(DEFAULT_TOOL_SCHEMAS[n], null, 2)}\n`;
  return files;
}

/**
 * Writes a default `.agent/` in `dir` (created if needed) and returns its path and the files written (relative to
 * it, sorted). An existing `.agent/` that is not an empty folder is refused (`agent_dir_exists`): init never
 * overwrites a policy.
 */
export function initAgentDir(dir: string): { agentRoot: string; files: string[] } {
  const root = join(dir, ".agent");
  if (existsSync(root) || isLink(root)) {
    const empty = !isLink(root) && lstatSync(root).isDirectory() && readdirSync(root).length === 0;
    if (!empty) throw new EvolveError("agent_dir_exists", `${root} already exists and is not an empty folder`, "pick another directory, or move the old .agent/ aside");
  }
  const files = defaultAgentFiles();
  try {
    for (const [rel, text] of Object.entries(files)) {
      const file = join(root, rel);
      mkdirSync(join(file, ".."), { recursive: true });
      writeFileSync(file, text, { flag: "wx", mode: 0o644 });
    }
    mkdirSync(join(root, "memory"), { recursive: true });
  } catch (e) {
    throw new EvolveError("agent_dir_unwritable", `cannot write ${root}: ${String((e as Error).message).split("\n")[0]}`, "check the directory's permissions and free space");
  }
  return { agentRoot: root, files: Object.keys(files).sort() };
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}
