/**
 * Anthropic's Claude Code (`claude -p --output-format stream-json --verbose`), the facts of
 * ../shared/reference/agent-clis.md "Claude Code": a native binary from npm, pointed at the gateway by
 * `ANTHROPIC_BASE_URL` with the trial's credential in `ANTHROPIC_API_KEY`; its state (sessions under
 * `projects/<cwd>/<session>.jsonl`) in `CLAUDE_CONFIG_DIR`.
 */
import type { CliSpec, Invocation, InvocationInput, McpServer } from "../cli-types.ts";

/** A task MCP server as `--mcp-config` takes it. */
function mcpEntry(s: McpServer): Record<string, unknown> {
  if (s.transport === "stdio") return { type: "stdio", command: s.command ?? "", args: s.args ?? [] };
  // Claude Code names streamable HTTP `http`; `sse` is its own transport.
  return { type: s.transport === "sse" ? "sse" : "http", url: s.url ?? "" };
}

/** Claude Code: the Anthropic Messages API only (`POST /v1/messages?beta=true`). */
export const claudeCode: CliSpec = {
  name: "claude-code",
  vendor: {
    packages: [{ name: "@anthropic-ai/claude-code", version: "2.1.197" }],
    // The platform binary itself: `bin/claude.exe` is only replaced by it when the package's postinstall ran.
    entry: "lib/node_modules/@anthropic-ai/claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    viaNode: false,
    imageCommand: "claude",
  },
  apiFor(provider) {
    return provider === "anthropic" ? "anthropic" : undefined;
  },
  options: {
    max_turns: { description: "the most agent turns before it stops (`--max-turns`)", pattern: /^[1-9][0-9]{0,4}$/ },
    effort: { description: "reasoning effort (`--effort`)", values: ["low", "medium", "high", "xhigh", "max"] },
  },
  keyEnv: "ANTHROPIC_API_KEY",
  home: "/logs/agent/.claude",
  invocation(input: InvocationInput): Invocation {
    const argv = [
      ...input.program,
      "-p",
      "--output-format", "stream-json",
      // stream-json in print mode requires --verbose.
      "--verbose",
      "--permission-mode", "bypassPermissions",
      "--model", input.model,
    ];
    if (input.options.max_turns) argv.push("--max-turns", input.options.max_turns);
    if (input.options.effort) argv.push("--effort", input.options.effort);
    const files = [];
    if (input.mcpServers.length > 0) {
      const path = `${input.home}/evolve-mcp.json`;
      files.push({ path, content: JSON.stringify({ mcpServers: Object.fromEntries(input.mcpServers.map((s) => [s.name, mcpEntry(s)])) }, null, 2) + "\n" });
      argv.push("--mcp-config", path, "--strict-mcp-config");
    }
    return {
      argv,
      env: {
        ANTHROPIC_BASE_URL: input.gatewayUrl,
        CLAUDE_CONFIG_DIR: input.home,
        // As root, bypassPermissions is refused unless the CLI is told it is in a sandbox (agent-clis.md).
        IS_SANDBOX: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1",
        DISABLE_AUTOUPDATER: "1",
        // Without it each session costs one more metered call (its title) beside the warm-up and update checks.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        CLAUDE_CODE_DISABLE_AUTO_MEMORY: "1",
        CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: "1",
        NO_COLOR: "1",
      },
      files,
      // On stdin rather than argv: an instruction that starts with `-` would read as a flag, and argv caps one
      // argument at 128 KiB.
      stdin: input.instruction,
    };
  },
  stdoutName: "claude-code.txt",
  parser: "claude-code",
  versionArgs: ["--version"],
};
