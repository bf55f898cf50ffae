/**
 * Registered agents: any other CLI, declared in a TOML manifest (`evolve agent register <manifest.toml>`) and kept
 * as `$EVOLVE_HOME/agents/registered/<name>.toml`. {@link manifestSpec} turns a manifest into the same CliSpec the
 * built-in CLIs declare, so the trial runner treats both alike:
 *
 * ```toml
 * name = "mytool"
 * version = "1.2.0"
 * command = "mytool --prompt {instruction} --model {model} --cwd {workdir}"
 * api = "openai-chat"          # or a table: [api] openai = "openai-responses", anthropic = "anthropic"
 * key_env = "OPENAI_API_KEY"   # the variable it reads its key from (default EVOLVE_GATEWAY_KEY)
 * stdout = "stdout.log"        # its stdout's name under agent/ (default stdout.log)
 * parser = "codex"             # an existing parser, or left out for none
 * [install]
 * npm = ["mytool@1.2.0"]       # vendored on the host like the built-ins (exact versions) …
 * entry = "lib/node_modules/mytool/bin/mytool.js"
 * node = ">=20"                # … on the vendored Node (implied for a .js/.mjs/.cjs entry)
 * # script = "curl -fsSL https://example.com/install.sh | sh"   # … or installed in the box (needs network)
 * [env]
 * MYTOOL_TELEMETRY = "0"
 * ```
 *
 * The command runs under `sh -c`: each placeholder is replaced by its value shell-quoted, the vendored `bin/` (and
 * Node) come first on PATH, and `$EVOLVE_GATEWAY_URL` and the API's usual base-URL variable point at the gateway.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parse } from "smol-toml";
import { z } from "zod";
import { evolveHome } from "../config.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { builtinSpec, isBuiltinAgentName, parserFor, parserNames } from "./catalog.ts";
import type { CliSpec, Invocation, InvocationInput, NpmPackage } from "./cli-types.ts";
import type { WireApi } from "../providers.ts";
import { validAgentName, validVersion } from "./vendor.ts";

const WIRE_APIS = ["anthropic", "openai-chat", "openai-responses", "gemini"] as const;
/** The placeholders a command template may hold. */
export const PLACEHOLDERS = ["instruction", "model", "workdir"] as const;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PKG = /^((?:@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*)@([0-9][0-9A-Za-z.+_-]*)$/;

const wireApi = z.enum(WIRE_APIS);
const schema = z
  .object({
    name: z.string().refine(validAgentName, "lowercase letters, digits and . _ - (at most 64), starting with a letter or digit"),
    version: z.string().refine(validVersion, "a version: digits, letters and . + _ - (e.g. 1.2.0)"),
    description: z.string().optional(),
    install: z
      .object({
        npm: z.array(z.string().regex(PKG, "an npm package at an exact version: name@1.2.3")).min(1, "at least one package").optional(),
        entry: z
          .string()
          .refine((e) => e.length > 0 && !e.startsWith("/") && !e.split("/").includes(".."), "a path inside the vendored tree (lib/node_modules/<pkg>/…)")
          .optional(),
        node: z.string().regex(/^>=\s*\d+(\.\d+){0,2}$/, 'the lowest Node it runs on, as ">=20" or ">=22.19"').optional(),
        script: z.string().min(1, "a shell script").optional(),
      })
      .strict()
      .superRefine((i, ctx) => {
        if ((i.npm === undefined) === (i.script === undefined)) ctx.addIssue({ code: "custom", message: "give either npm = [...] or script = \"...\", not both or neither" });
        if (i.npm !== undefined && i.entry === undefined) ctx.addIssue({ code: "custom", path: ["entry"], message: "npm installs need the entry: the program's path in the vendored tree" });
        if (i.script !== undefined && (i.entry !== undefined || i.node !== undefined)) ctx.addIssue({ code: "custom", message: "entry and node belong to npm installs" });
      }),
    command: z.string().min(1, "the command line template"),
    env: z.record(z.string().regex(ENV_NAME, "an environment variable name"), z.string()).default({}),
    api: z.union([wireApi, z.record(z.string().min(1), wireApi)]),
    key_env: z.string().regex(ENV_NAME, "an environment variable name").optional(),
    stdout: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, "a plain file name (stdout.log)").default("stdout.log"),
    parser: z.string().optional(),
    home: z.string().regex(/^\/logs\/agent\/[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/, "a folder under /logs/agent").optional(),
  })
  .strict();

/** A registered agent's manifest, as validated. */
export type AgentManifest = z.output<typeof schema>;

/** One thing wrong with a manifest: the TOML key it is about and why. */
export interface ManifestFinding {
  key: string;
  message: string;
}

/** The placeholders of a command template (`{{` and `}}` are literal braces), and anything else in braces. */
function templateParts(command: string): { text: string; name?: string }[] {
  const parts: { text: string; name?: string }[] = [];
  let i = 0;
  let text = "";
  while (i < command.length) {
    if (command.startsWith("{{", i) || command.startsWith("}}", i)) {
      text += command[i];
      i += 2;
    } else if (command[i] === "{") {
      const end = command.indexOf("}", i);
      if (end === -1) throw new Error(`an unclosed { at character ${i + 1}`);
      if (text) parts.push({ text });
      text = "";
      parts.push({ text: command.slice(i, end + 1), name: command.slice(i + 1, end) });
      i = end + 1;
    } else if (command[i] === "}") throw new Error(`a } without its { at character ${i + 1} (write }} for a literal one)`);
    else text += command[i++];
  }
  if (text) parts.push({ text });
  return parts;
}

/** Single-quotes `s` for sh: nothing in it is expanded. */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Checks a parsed TOML document against the manifest schema; the findings name the key at fault. */
export function checkManifest(doc: unknown): { manifest?: AgentManifest; findings: ManifestFinding[] } {
  const r = schema.safeParse(doc);
  const findings: ManifestFinding[] = [];
  if (!r.success) {
    for (const i of r.error.issues) {
      const key = i.path.join(".") || "(top level)";
      const message = i.code === "unrecognized_keys" ? (i.path.length === 0 ? "unknown key" : `unknown key${i.keys.length > 1 ? "s" : ""} ${i.keys.join(", ")}`) : i.code === "invalid_type" && i.input === undefined
            ? "missing"
            : i.code === "invalid_key"
              ? `${JSON.stringify(i.path.at(-1))} is not ${i.issues[0]?.message ?? "a valid key"}`
              : i.message;
      findings.push({ key: i.code === "unrecognized_keys" && i.path.length === 0 ? i.keys.join(", ") : key, message });
    }
    return { findings };
  }
  const m = r.data;
  try {
    const names = templateParts(m.command).filter((p) => p.name !== undefined).map((p) => p.name as string);
    for (const n of names) if (!(PLACEHOLDERS as readonly string[]).includes(n)) findings.push({ key: "command", message: `{${n}} is no placeholder (only ${PLACEHOLDERS.map((p) => `{${p}}`).join(", ")})` });
    if (!names.includes("instruction")) findings.push({ key: "command", message: "it never passes {instruction}: the agent would not get the task" });
  } catch (e) {
    findings.push({ key: "command", message: firstLine(e) });
  }
  if (m.parser !== undefined && m.parser !== "none" && !parserNames().includes(m.parser)) {
    const known = parserNames();
    findings.push({ key: "parser", message: `no parser named ${JSON.stringify(m.parser)} (${known.length ? `known: ${known.join(", ")}` : "none is known yet"}; or "none")` });
  }
  if (isBuiltinAgentName(m.name)) findings.push({ key: "name", message: `${m.name} is a built-in agent` });
  return findings.length ? { findings } : { manifest: m, findings };
}

/** Reads and checks a manifest file; fails `agent_manifest_invalid` with every finding (`agent_name_reserved` for a built-in's name). */
export function readManifestFile(file: string): { manifest: AgentManifest; text: string } {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new EvolveError("usage", `cannot read ${file}: ${firstLine(e)}`);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw new EvolveError("agent_manifest_invalid", `${file} is not valid TOML: ${firstLine(e)}`, "see README: Registered agents for the manifest format");
  }
  const { manifest, findings } = checkManifest(doc);
  if (!manifest) {
    const reserved = findings.find((f) => f.key === "name" && f.message.endsWith("is a built-in agent"));
    if (reserved && findings.length === 1) throw new EvolveError("agent_name_reserved", `${file}: ${reserved.message} and cannot be registered`, "give the manifest another name");
    throw new EvolveError("agent_manifest_invalid", `${file}: ${findings.map((f) => `${f.key}: ${f.message}`).join("; ")}`, "see README: Registered agents for the manifest format");
  }
  return { manifest, text };
}

/** Whether a registered agent's `api` lets it talk to a model of `provider`. */
function apiFor(api: AgentManifest["api"], provider: string): WireApi | undefined {
  if (typeof api !== "string") return api[provider] ?? api["*"];
  // a single API speaks for the providers whose models the gateway serves in it: no translation
  if (api === "anthropic") return provider === "anthropic" ? api : undefined;
  if (api === "gemini") return provider === "gemini" ? api : undefined;
  return provider === "anthropic" || provider === "gemini" ? undefined : api;
}

/** The variable holding the gateway's URL in the usual spelling of each API's SDKs. */
function baseUrlEnv(api: WireApi, gatewayUrl: string): Record<string, string> {
  if (api === "anthropic") return { ANTHROPIC_BASE_URL: gatewayUrl };
  if (api === "gemini") return { GOOGLE_GEMINI_BASE_URL: gatewayUrl, GEMINI_BASE_URL: gatewayUrl };
  return { OPENAI_BASE_URL: `${gatewayUrl}/v1` };
}

/** The CliSpec of a registered agent. */
export function manifestSpec(m: AgentManifest): CliSpec {
  const npm: NpmPackage[] = (m.install.npm ?? []).map((s) => {
    const [, name, version] = PKG.exec(s) as RegExpExecArray;
    return { name, version };
  });
  const entry = m.install.entry ?? "";
  const viaNode = npm.length > 0 && (m.install.node !== undefined || /\.(m|c)?js$/.test(entry));
  const nodeMin = viaNode ? (m.install.node ?? ">=20").replace(/^>=\s*/, "") : undefined;
  const parts = templateParts(m.command);
  const home = m.home ?? `/logs/agent/${m.name}-home`;
  const script = m.install.script;
  return {
    name: m.name,
    vendor: { packages: npm, entry, viaNode, ...(nodeMin ? { nodeMin } : {}) },
    apiFor: (provider) => apiFor(m.api, provider),
    options: {},
    ...(m.key_env ? { keyEnv: m.key_env } : {}),
    home,
    stdoutName: m.stdout,
    // checked when the manifest was read: the name is a built-in's parser
    ...(m.parser && m.parser !== "none" ? { parser: parserFor(m.parser) } : {}),
    invocation(input: InvocationInput): Invocation {
      const values: Record<string, string> = { instruction: input.instruction, model: input.model, workdir: input.workdir };
      const line = parts.map((p) => (p.name !== undefined ? shQuote(values[p.name]) : p.text)).join("");
      const steps: string[] = [];
      if (input.agentRoot) steps.push(`PATH=${shQuote(`${input.agentRoot}/bin`)}:${shQuote(`${input.agentRoot}/node/bin`)}:"$PATH"; export PATH`);
      if (script) {
        steps.push(`( ${script}\n) >/logs/agent/install.log 2>&1 || { echo "evolve: the agent's install script failed (see agent/install.log)" >&2; exit 1; }`);
      }
      steps.push(`exec ${line}`);
      return {
        argv: ["sh", "-c", steps.join("\n")],
        env: { HOME: home, EVOLVE_GATEWAY_URL: input.gatewayUrl, ...baseUrlEnv(input.api, input.gatewayUrl), ...m.env },
        files: [],
      };
    },
  };
}

/** Where registered manifests are kept: `$EVOLVE_HOME/agents/registered/`. */
export function registeredDir(home: string = evolveHome()): string {
  return join(home, "agents", "registered");
}

/** A registered manifest that no longer reads (edited by hand after `agent register`). */
export interface InvalidRegistration {
  file: string;
  message: string;
}

/** Every registered agent, by name, with the files that no longer validate. */
export function loadRegistered(home: string = evolveHome()): { agents: { manifest: AgentManifest; spec: CliSpec; file: string }[]; invalid: InvalidRegistration[] } {
  const dir = registeredDir(home);
  const agents: { manifest: AgentManifest; spec: CliSpec; file: string }[] = [];
  const invalid: InvalidRegistration[] = [];
  if (!existsSync(dir)) return { agents, invalid };
  for (const n of readdirSync(dir).filter((f) => f.endsWith(".toml")).sort()) {
    const file = join(dir, n);
    try {
      const { manifest } = readManifestFile(file);
      if (`${manifest.name}.toml` !== n) throw new Error(`it names ${manifest.name}, not ${n.slice(0, -5)}`);
      agents.push({ manifest, spec: manifestSpec(manifest), file });
    } catch (e) {
      invalid.push({ file, message: firstLine(e) });
    }
  }
  return { agents, invalid };
}

/** The registered agents as CliSpecs (a manifest edited into an invalid one is left out; `agent list` names it). */
export function registeredAgents(home: string = evolveHome()): CliSpec[] {
  return loadRegistered(home).agents.map((a) => a.spec);
}

/**
 * Registers the manifest at `file` under its name (a registration of the same name is replaced): checked first, then
 * written beside its final name and renamed, so a half-written manifest is never read.
 */
export async function registerAgent(file: string, home: string = evolveHome()): Promise<{ manifest: AgentManifest; path: string; replaced: boolean }> {
  const { manifest, text } = readManifestFile(file);
  const dir = registeredDir(home);
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${manifest.name}.toml`);
  const replaced = existsSync(path);
  const tmp = join(dir, `.${manifest.name}.${process.pid}.tmp`);
  await writeFile(tmp, text);
  await rename(tmp, path);
  return { manifest, path, replaced };
}

/** The CliSpec of a built-in or registered agent named `name`, or undefined. */
export function agentSpec(name: string, home: string = evolveHome()): CliSpec | undefined {
  return builtinSpec(name) ?? registeredAgents(home).find((s) => s.name === name);
}
