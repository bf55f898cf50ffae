/**
 * Anthropic's Claude Code (`claude -p --output-format stream-json --verbose`), the facts of
 * ../shared/reference/agent-clis.md "Claude Code": a native binary from npm, pointed at the gateway by
 * `ANTHROPIC_BASE_URL` with the trial's credential in `ANTHROPIC_API_KEY`; its state (sessions under
 * `projects/<cwd>/<session>.jsonl`) in `CLAUDE_CONFIG_DIR`.
 */
import { createHash } from "node:crypto";
import { EvolveError } from "../../errors.ts";
import type { BoxFile, CliSpec, Invocation, InvocationInput, McpServer } from "../cli-types.ts";

/** A task MCP server as `--mcp-config` takes it. */
function mcpEntry(s: McpServer): Record<string, unknown> {
  if (s.transport === "stdio") return { type: "stdio", command: s.command ?? "", args: s.args ?? [] };
  // Claude Code names streamable HTTP `http`; `sse` is its own transport.
  return { type: s.transport === "sse" ? "sse" : "http", url: s.url ?? "" };
}

/** A UUID-shaped id derived from `parts`: the seeded session is the same for the same trajectory. */
function derivedUuid(...parts: string[]): string {
  const h = createHash("sha256").update(parts.join("\0")).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The folder name Claude Code keeps a working directory's sessions under (`/app` → `-app`). */
export function projectDirName(cwd: string): string {
  return cwd.replace(/[^a-zA-Z0-9]/g, "-");
}

/** An ATIF message (a string or content parts) as text. */
function atifText(message: unknown): string {
  if (typeof message === "string") return message;
  if (!Array.isArray(message)) return "";
  return message.map((p) => (p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : "")).join("");
}

/**
 * An ATIF trajectory as a Claude Code session file (`projects/<cwd>/<id>.jsonl`) that `--resume <id>` continues:
 * user steps as user messages, agent steps as assistant messages with their tool calls, each call answered by its
 * observation (a call without one gets an empty result: the API refuses a tool_use left unanswered). System steps
 * are left out: Claude Code brings its own system prompt.
 */
export function seedSession(trajectory: string, cwd: string, model: string): { sessionId: string; text: string } {
  let doc: { steps?: unknown };
  try {
    doc = JSON.parse(trajectory);
  } catch (e) {
    throw new EvolveError("trajectory_seed_invalid", `trajectory.json is not JSON: ${(e as Error).message}`, "give trajectory.json as an ATIF document (harbor.md §4)");
  }
  if (!doc || typeof doc !== "object" || !Array.isArray(doc.steps)) {
    throw new EvolveError("trajectory_seed_invalid", "trajectory.json has no `steps` list: it is no ATIF trajectory", "give trajectory.json as an ATIF document (harbor.md §4)");
  }
  const sessionId = derivedUuid("claude-seed", trajectory);
  const lines: Record<string, unknown>[] = [];
  let parent: string | null = null;
  const push = (type: "user" | "assistant", message: Record<string, unknown>, timestamp: unknown) => {
    const uuid = derivedUuid(sessionId, String(lines.length));
    lines.push({
      parentUuid: parent, isSidechain: false, type, message, uuid,
      timestamp: typeof timestamp === "string" ? timestamp : new Date(0).toISOString(),
      userType: "external", cwd, sessionId,
    });
    parent = uuid;
  };
  for (const [i, raw] of doc.steps.entries()) {
    const step = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
    const text = atifText(step.message);
    if (step.source === "user") {
      if (text) push("user", { role: "user", content: text }, step.timestamp);
      continue;
    }
    if (step.source !== "agent") continue;
    const calls = Array.isArray(step.tool_calls) ? (step.tool_calls as Record<string, unknown>[]) : [];
    const content: Record<string, unknown>[] = [];
    if (text) content.push({ type: "text", text });
    for (const c of calls) content.push({ type: "tool_use", id: String(c.tool_call_id ?? ""), name: String(c.function_name ?? ""), input: c.arguments && typeof c.arguments === "object" ? c.arguments : {} });
    if (content.length === 0) continue;
    push("assistant", {
      id: `msg_seed_${i + 1}`, type: "message", role: "assistant", model: typeof step.model_name === "string" ? step.model_name : model, content,
      stop_reason: calls.length > 0 ? "tool_use" : "end_turn", stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 },
    }, step.timestamp);
    if (calls.length === 0) continue;
    const results = Array.isArray((step.observation as { results?: unknown } | undefined)?.results) ? ((step.observation as { results: Record<string, unknown>[] }).results) : [];
    push("user", {
      role: "user",
      content: calls.map((c) => {
        const r = results.find((x) => x.source_call_id === c.tool_call_id);
        return { type: "tool_result", tool_use_id: String(c.tool_call_id ?? ""), content: r ? atifText(r.content) : "", is_error: false };
      }),
    }, step.timestamp);
  }
  return { sessionId, text: lines.map((l) => JSON.stringify(l)).join("\n") + "\n" };
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
    const files: BoxFile[] = [];
    if (input.seedTrajectory !== undefined) {
      const seed = seedSession(input.seedTrajectory, input.workdir, input.model);
      files.push({ path: `${input.home}/projects/${projectDirName(input.workdir)}/${seed.sessionId}.jsonl`, content: seed.text });
      argv.push("--resume", seed.sessionId);
    }
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
  seedsTrajectory: true,
  versionArgs: ["--version"],
};
