/**
 * opencode (`opencode run --format json`), the facts of ../shared/reference/agent-clis.md "opencode": a Bun-compiled
 * native binary from npm, pointed at the gateway by a provider entry in an `opencode.json` of its own.
 */
import type { CliSpec, Invocation, InvocationInput, McpServer } from "../cli-types.ts";
import type { WireApi } from "../../providers.ts";
import { opencodeParser } from "../../trace/parsers/opencode.ts";

/** The provider id in opencode's config: `-m evolve/<model>`. */
const PROVIDER_ID = "evolve";

/** The AI-SDK package opencode bundles for each wire API (no npm install at run time). */
const SDK: Partial<Record<WireApi, string>> = {
  anthropic: "@ai-sdk/anthropic",
  "openai-responses": "@ai-sdk/openai",
  "openai-chat": "@ai-sdk/openai-compatible",
};

/** opencode's MCP entry: `local` runs a command, `remote` talks to a URL (it picks SSE or streamable HTTP itself). */
function mcpEntry(s: McpServer): Record<string, unknown> {
  if (s.transport === "stdio") return { type: "local", command: [s.command ?? "", ...(s.args ?? [])], enabled: true };
  return { type: "remote", url: s.url ?? "", enabled: true };
}

/** The `opencode.json` the run reads (OPENCODE_CONFIG): only a `{env:…}` reference to the key, never the key. */
function config(input: InvocationInput): string {
  const sdk = SDK[input.api];
  const mcp = Object.fromEntries(input.mcpServers.map((s) => [s.name, mcpEntry(s)]));
  const doc: Record<string, unknown> = {
    $schema: "https://opencode.ai/config.json",
    provider: {
      [PROVIDER_ID]: {
        npm: sdk,
        name: "evolve gateway",
        options: { baseURL: `${input.gatewayUrl}/v1`, apiKey: `{env:${input.keyEnv}}` },
        models: { [input.model]: {} },
      },
    },
    model: `${PROVIDER_ID}/${input.model}`,
    // The title generator is a metered call nobody asked for; `--title` skips it, and small_model keeps any other
    // small-model call on the trial's own model rather than a default from a provider the box cannot reach.
    small_model: `${PROVIDER_ID}/${input.model}`,
    autoupdate: false,
    share: "disabled",
    // A headless run has nobody to answer a permission prompt.
    permission: { "*": "allow" },
  };
  if (input.mcpServers.length > 0) doc.mcp = mcp;
  return JSON.stringify(doc, null, 2) + "\n";
}

/** The opencode version whose plugin package its config dir is told it already has (the vendored default). */
const PLUGIN_VERSION = "1.18.33";

/**
 * opencode runs `npm install @opencode-ai/plugin` into its config dir at every start (a detached "background
 * dependency install" that reaches registry.npmjs.org whatever the flags). npm finds nothing to do when the dir's
 * package.json, package-lock.json and node_modules/.package-lock.json already agree on that package: three small
 * files stop the call (observed with strace: no connection but the gateway's). No plugin is loaded from there.
 */
function pluginStubs(configDir: string): { path: string; content: string }[] {
  const dep = { "@opencode-ai/plugin": PLUGIN_VERSION };
  const installed = { "node_modules/@opencode-ai/plugin": { version: PLUGIN_VERSION } };
  const lock = (packages: Record<string, unknown>) => JSON.stringify({ name: "opencode", lockfileVersion: 3, requires: true, packages }) + "\n";
  return [
    { path: `${configDir}/package.json`, content: JSON.stringify({ dependencies: dep }) + "\n" },
    { path: `${configDir}/package-lock.json`, content: lock({ "": { dependencies: dep }, ...installed }) },
    { path: `${configDir}/node_modules/.package-lock.json`, content: lock(installed) },
  ];
}

/** opencode: its model API is the model provider's own, through the gateway. */
export const opencode: CliSpec = {
  name: "opencode",
  vendor: {
    packages: [
      { name: "opencode-ai", version: "1.18.33" },
      { name: "opencode-linux-x64", version: "1.18.33" },
    ],
    // The platform package's binary, not `bin/opencode.exe`: that one is a hard link made by a postinstall script.
    // Both packages are listed, so npm's optional ones (the -baseline build too: 354 MB in all) are left out and
    // the platform package sits beside opencode-ai (checked: `agent pull` gives 177 MB, `--version` 1.18.33).
    entry: "lib/node_modules/opencode-linux-x64/bin/opencode",
    viaNode: false,
    omitOptional: true,
    imageCommand: "opencode",
  },
  apiFor(provider) {
    if (provider === "anthropic") return "anthropic";
    if (provider === "openai") return "openai-responses";
    return undefined;
  },
  options: {
    variant: { description: "model variant, opencode's provider-specific reasoning effort (`--variant`: e.g. minimal, low, medium, high, max)", pattern: /^[a-z][a-z0-9-]{0,31}$/ },
    agent: { description: "the opencode agent to run (`--agent`): build (default, may edit) or plan (read-only)", values: ["build", "plan"] },
  },
  home: "/logs/agent/.opencode",
  invocation(input): Invocation {
    const home = input.home;
    const argv = [...input.program, "run", "--format", "json", "--thinking", "--title", "evolve trial", "--auto", "-m", `${PROVIDER_ID}/${input.model}`];
    if (input.options.variant) argv.push("--variant", input.options.variant);
    if (input.options.agent) argv.push("--agent", input.options.agent);
    return {
      argv,
      env: {
        OPENCODE_CONFIG: `${home}/opencode.json`,
        // Its state (SQLite sessions, logs, snapshots) under the home, at the XDG folders' usual names.
        XDG_CONFIG_HOME: `${home}/.config`,
        XDG_DATA_HOME: `${home}/.local/share`,
        XDG_STATE_HOME: `${home}/.local/state`,
        XDG_CACHE_HOME: `${home}/.cache`,
        // Side calls: the models.dev catalog, self-update, sharing, LSP server downloads (and the plugin install:
        // pluginStubs).
        OPENCODE_DISABLE_MODELS_FETCH: "1",
        OPENCODE_DISABLE_AUTOUPDATE: "1",
        OPENCODE_DISABLE_SHARE: "1",
        OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
        OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
        // It would otherwise read ~/.claude's prompts and skills from the image.
        OPENCODE_DISABLE_CLAUDE_CODE: "1",
        OPENCODE_FAKE_VCS: "git",
        NO_COLOR: "1",
      },
      files: [{ path: `${home}/opencode.json`, content: config(input) }, ...pluginStubs(`${home}/.config/opencode`)],
      // One positional prompt with spaces reaches the model wrapped in quotes; stdin arrives as written.
      stdin: input.instruction,
    };
  },
  stdoutName: "opencode.txt",
  parser: opencodeParser,
  versionArgs: ["--version"],
};
