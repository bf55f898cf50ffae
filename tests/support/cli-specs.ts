/**
 * STAND-IN CliSpecs of claude-code and codex for the runtime's end-to-end test, from the facts in
 * ../shared/reference/agent-clis.md, used only while engine/harness/agents/ (wt-ac) has not landed: the test takes
 * the registered harness when there is one. Delete this file once the real specs are registered.
 */
import type { CliSpec } from "../../engine/harness/cli-types.ts";

const HOME = "/logs/agent/home";

/** Claude Code 2.1.197, native binary, speaking Anthropic Messages. */
export const claudeStandIn: CliSpec = {
  name: "claude-code",
  vendor: { packages: [{ name: "@anthropic-ai/claude-code", version: "2.1.197" }], entry: "lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe", viaNode: false, imageCommand: "claude" },
  apiFor: (p) => (p === "anthropic" ? "anthropic" : undefined),
  options: { max_turns: { description: "the most agent turns", pattern: /[1-9][0-9]*/ } },
  keyEnv: "ANTHROPIC_API_KEY",
  home: HOME,
  stdoutName: "claude-code.txt",
  parser: "claude-code",
  seedsTrajectory: true,
  versionArgs: ["--version"],
  invocation: (i) => ({
    argv: [...i.program, "-p", "--output-format", "stream-json", "--verbose", "--model", i.model, "--permission-mode", "bypassPermissions", ...(i.options.max_turns ? ["--max-turns", i.options.max_turns] : []), i.instruction],
    env: {
      HOME: i.home,
      CLAUDE_CONFIG_DIR: `${i.home}/.claude`,
      ANTHROPIC_BASE_URL: i.gatewayUrl,
      IS_SANDBOX: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
      DISABLE_AUTOUPDATER: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    },
    files: [],
  }),
};

/** Codex 0.171.0, its static musl binary, speaking OpenAI Responses through a custom provider. */
export const codexStandIn: CliSpec = {
  name: "codex",
  vendor: {
    packages: [{ name: "@openai/codex", version: "0.171.0" }],
    entry: "lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    viaNode: false,
    imageCommand: "codex",
  },
  apiFor: (p) => (p === "openai" ? "openai-responses" : undefined),
  options: { reasoning_effort: { description: "the model's reasoning effort", values: ["minimal", "low", "medium", "high"] } },
  home: HOME,
  stdoutName: "codex.txt",
  parser: "codex",
  seedsTrajectory: true,
  versionArgs: ["--version"],
  invocation: (i) => ({
    argv: [...i.program, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C", i.workdir, i.instruction],
    env: { HOME: i.home, CODEX_HOME: `${i.home}/.codex` },
    files: [
      {
        path: `${i.home}/.codex/config.toml`,
        content: [
          `model = "${i.model}"`,
          'model_provider = "evolve"',
          ...(i.options.reasoning_effort ? [`model_reasoning_effort = "${i.options.reasoning_effort}"`] : []),
          "",
          "[model_providers.evolve]",
          'name = "evolve gateway"',
          `base_url = "${i.gatewayUrl}/v1"`,
          `env_key = "${i.keyEnv}"`,
          'wire_api = "responses"',
          "supports_websockets = false",
          "request_max_retries = 0",
          "stream_max_retries = 0",
          "",
        ].join("\n"),
      },
    ],
  }),
};
