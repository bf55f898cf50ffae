/**
 * Qwen Code (`qwen --output-format stream-json --yolo`, npm `@qwen-code/qwen-code`), the facts of
 * ../shared/reference/agent-clis.md "qwen-code": one JavaScript bundle run by the vendored Node (engines says
 * Node ≥ 22), pointed at the gateway by a `modelProviders` entry in `QWEN_HOME/settings.json` whose `envKey` names
 * the variable holding the key, so one variable serves every wire API it speaks.
 */
import type { CliSpec, Invocation, InvocationInput, McpServer } from "../cli-types.ts";
import type { WireApi } from "../../providers.ts";
import { qwenCodeParser } from "../../trace/parsers/qwen-code.ts";

/** Its auth type (the `modelProviders` protocol id) for each wire API. */
const AUTH_TYPE: Record<WireApi, string> = {
  "openai-chat": "openai",
  "openai-responses": "openai",
  anthropic: "anthropic",
  gemini: "gemini",
};

/** A task MCP server as settings.json `mcpServers` takes it: `httpUrl` is streamable HTTP, `url` SSE. */
function mcpEntry(s: McpServer): Record<string, unknown> {
  if (s.transport === "stdio") return { command: s.command ?? "", args: s.args ?? [] };
  if (s.transport === "sse") return { url: s.url ?? "" };
  return { httpUrl: s.url ?? "" };
}

/** The base URL each protocol's client wants: OpenAI's includes /v1, Anthropic's and Gemini's are the root. */
function baseUrl(input: InvocationInput): string {
  return input.api === "openai-chat" || input.api === "openai-responses" ? `${input.gatewayUrl}/v1` : input.gatewayUrl;
}

/** The settings.json of the run: the gateway as the one model provider, every side call off, no key in it. */
function settings(input: InvocationInput): string {
  const auth = AUTH_TYPE[input.api];
  const entry: Record<string, unknown> = { id: input.model, name: input.model, baseUrl: baseUrl(input), envKey: input.keyEnv };
  if (input.api === "openai-responses") entry.wireApi = "responses";
  if (input.api === "openai-chat") entry.wireApi = "chat-completions";
  const model: Record<string, unknown> = { name: input.model };
  if (input.options.max_turns) model.maxSessionTurns = Number(input.options.max_turns);
  if (input.options.reasoning_effort) model.reasoningEffort = input.options.reasoning_effort;
  const doc: Record<string, unknown> = {
    modelProviders: { [auth]: [entry] },
    security: { auth: { selectedType: auth } },
    model,
    // RUM usage statistics (rum.aliyuncs.com).
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { enableAutoUpdate: false },
    ide: { enabled: false },
    // By default a "managed memory extraction" subagent makes one more metered call after each turn.
    memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false },
  };
  if (input.mcpServers.length > 0) doc.mcpServers = Object.fromEntries(input.mcpServers.map((s) => [s.name, mcpEntry(s)]));
  return JSON.stringify(doc, null, 2) + "\n";
}

/** qwen-code: OpenAI chat completions, Anthropic Messages or the Gemini API, whichever is the model provider's. */
export const qwenCode: CliSpec = {
  name: "qwen-code",
  vendor: {
    packages: [{ name: "@qwen-code/qwen-code", version: "0.24.4" }],
    nodeMin: "22.0.0",
    // The bin wrapper: it relaunches cli.js with --expose-gc for its memory-pressure monitor.
    entry: "lib/node_modules/@qwen-code/qwen-code/cli-entry.js",
    viaNode: true,
    imageCommand: "qwen",
  },
  apiFor(provider) {
    if (provider === "openai") return "openai-chat";
    if (provider === "anthropic") return "anthropic";
    if (provider === "gemini") return "gemini";
    return undefined;
  },
  options: {
    max_turns: { description: "the most turns in the session (settings.json `model.maxSessionTurns`; exit 55 past it)", pattern: /^[1-9][0-9]{0,4}$/ },
    max_tool_calls: { description: "the most tool calls in the session (`--max-tool-calls`)", pattern: /^[1-9][0-9]{0,4}$/ },
    reasoning_effort: { description: "reasoning effort sent to the model (settings.json `model.reasoningEffort`)", values: ["low", "medium", "high"] },
  },
  home: "/logs/agent/.qwen",
  invocation(input): Invocation {
    const argv = [...input.program, "--output-format", "stream-json", "--yolo", "--auth-type", AUTH_TYPE[input.api], "-m", input.model];
    if (input.options.max_tool_calls) argv.push("--max-tool-calls", input.options.max_tool_calls);
    return {
      argv,
      env: {
        QWEN_HOME: input.home,
        QWEN_CODE_SUPPRESS_YOLO_WARNING: "1",
        NO_COLOR: "1",
      },
      files: [{ path: `${input.home}/settings.json`, content: settings(input) }],
      // Piped input alone is one headless turn; on argv an instruction starting with `-` would read as a flag.
      stdin: input.instruction,
    };
  },
  stdoutName: "qwen-code.txt",
  parser: qwenCodeParser,
  versionArgs: ["--version"],
};
