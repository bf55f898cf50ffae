/**
 * Factory's droid (`droid exec --output-format stream-json`), the facts of ../shared/reference/agent-clis.md
 * "droid": a Bun-compiled native binary from npm, pointed at the gateway by a BYOK custom model in its
 * `.factory/settings.json`; no Factory login.
 */
import type { BoxFile, CliSpec, Invocation, InvocationInput, McpServer } from "../cli-types.ts";
import type { WireApi } from "../../providers.ts";
import { droidParser } from "../../trace/parsers/droid.ts";

/** The custom model's display name; droid's `-m` id for it is `custom:<name with dashes>-<index>`. */
const DISPLAY_NAME = "Evolve Gateway";
const MODEL_ID = "custom:Evolve-Gateway-0";

/** droid's BYOK `provider` for each wire API, and the base URL it wants (anthropic's SDK adds `/v1` itself). */
const PROVIDER: Partial<Record<WireApi, { provider: string; path: string }>> = {
  anthropic: { provider: "anthropic", path: "" },
  "openai-responses": { provider: "openai", path: "/v1" },
  "openai-chat": { provider: "generic-chat-completion-api", path: "/v1" },
};

function mcpEntry(s: McpServer): Record<string, unknown> {
  if (s.transport === "stdio") return { type: "stdio", command: s.command ?? "", args: s.args ?? [] };
  return { type: "http", url: s.url ?? "" };
}

/**
 * A `ps` for boxes without one (debian:*-slim has no procps). droid runs each Execute command under a bash supervisor
 * whose watcher polls `ps -o ppid= -p $$` to see that droid still owns it, and SIGKILLs the command's process group
 * the first time that fails: with no `ps` it fails at once, so a command dies "by signal: SIGKILL" unless it ends
 * first (a bare printf did in about two runs of three). droid puts `<home>/bin` first on the command's PATH, so this answers that one
 * question from /proc and hands any other use to a real `ps` further down PATH, or fails as a missing one would.
 */
const PS_SHIM = `#!/bin/sh
# evolve's stand-in for ps (droid's Execute supervisor asks \`ps -o ppid= -p PID\`); any other use goes to a real ps.
if [ $# -eq 4 ] && [ "$1" = -o ] && [ "$2" = ppid= ] && [ "$3" = -p ]; then
  case $4 in '' | *[!0-9]*) exit 1 ;; esac
  { read -r stat < "/proc/$4/stat"; } 2>/dev/null || exit 1
  # the fields after "(comm) ": state, then ppid
  set -- \${stat##*") "}
  echo "$2"
  exit 0
fi
self=\${0%/*}
IFS=:
for d in $PATH; do
  if [ -n "$d" ] && [ "$d" != "$self" ] && [ -x "$d/ps" ]; then exec "$d/ps" "$@"; fi
done
echo "ps: not found" >&2
exit 127
`;

/** `settings.json`: the one custom model, its key only as `${VAR}` (droid expands it from the environment). */
function settings(input: InvocationInput): string {
  const p = PROVIDER[input.api] ?? PROVIDER["openai-chat"]!;
  return JSON.stringify({
    customModels: [{
      model: input.model,
      displayName: DISPLAY_NAME,
      baseUrl: `${input.gatewayUrl}${p.path}`,
      apiKey: `\${${input.keyEnv}}`,
      provider: p.provider,
      maxOutputTokens: 32000,
    }],
  }, null, 2) + "\n";
}

/** droid: the model provider's own API through the gateway, as a custom model. */
export const droid: CliSpec = {
  name: "droid",
  vendor: {
    // The shim's version and its platform binary's differ on this registry (agent-clis.md): both pinned.
    packages: [
      { name: "@factory/cli", version: "0.225.1" },
      { name: "@factory/cli-linux-x64", version: "0.225.2" },
    ],
    // The binary itself: the shim's `bin/droid` is replaced by it only when its postinstall script ran.
    entry: "lib/node_modules/@factory/cli-linux-x64/bin/droid",
    viaNode: false,
    // The shim's optional platform packages name 0.225.1, which this registry lacks: only the listed pair is wanted
    // (checked: `agent pull` gives 243 MB, `--version` 0.225.2).
    omitOptional: true,
    imageCommand: "droid",
  },
  apiFor(provider) {
    if (provider === "anthropic") return "anthropic";
    if (provider === "openai") return "openai-responses";
    return undefined;
  },
  options: {
    reasoning_effort: { description: "reasoning effort (`-r`)", values: ["off", "none", "minimal", "low", "medium", "high", "xhigh", "max"] },
  },
  home: "/logs/agent/.factory",
  invocation(input): Invocation {
    const home = input.home;
    const argv = [...input.program, "exec", "--output-format", "stream-json", "--skip-permissions-unsafe", "-m", MODEL_ID, "--cwd", input.workdir];
    if (input.options.reasoning_effort) argv.push("-r", input.options.reasoning_effort);
    argv.push(input.instruction);
    const files: BoxFile[] = [{ path: `${home}/settings.json`, content: settings(input) }, { path: `${home}/bin/ps`, content: PS_SHIM, executable: true }];
    if (input.mcpServers.length > 0) {
      files.push({ path: `${home}/mcp.json`, content: JSON.stringify({ mcpServers: Object.fromEntries(input.mcpServers.map((s) => [s.name, mcpEntry(s)])) }, null, 2) + "\n" });
    }
    return {
      argv,
      env: {
        // droid keeps its state in `<override>/.factory`: the home's parent.
        FACTORY_HOME_OVERRIDE: home.replace(/\/\.factory\/?$/, "") || "/",
        // The only switch that stopped api.factory.ai, telemetry.factory.ai and the OTel collector (agent-clis.md).
        FACTORY_AIRGAP_ENABLED: "true",
        // Read by the binary (its config code honours "false"): updates are a side call a box cannot apply anyway.
        FACTORY_DROID_AUTO_UPDATE_ENABLED: "false",
        FACTORY_OTEL_ENABLED: "false",
        FACTORY_DISABLE_KEYRING: "1",
        NO_COLOR: "1",
      },
      files,
    };
  },
  stdoutName: "droid.txt",
  parser: droidParser,
  versionArgs: ["--version"],
};
