/**
 * Registered agents (engine/harness/manifest.ts): a good manifest becomes a CliSpec whose command line quotes every
 * placeholder, and each bad field is refused with a finding that names it.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InvocationInput } from "./cli-types.ts";
import { agentSpec, loadRegistered, manifestSpec, readManifestFile, registerAgent, registeredAgents } from "./manifest.ts";
import { expectCode } from "../../tests/support/expect-code.ts";

const GOOD = readFileSync(resolve(__dirname, "../../fixtures/vendor/mytool.toml"), "utf8");
let home: string;

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-manifest-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

function file(text: string, name = "m.toml"): string {
  const f = join(home, name);
  writeFileSync(f, text);
  return f;
}

const input = (over: Partial<InvocationInput> = {}): InvocationInput => ({
  instruction: "fix it's \"bug\" in $HOME `now`",
  model: "gpt-5",
  provider: "openai",
  api: "openai-chat",
  gatewayUrl: "http://evolve-gateway:4000",
  keyEnv: "MYTOOL_API_KEY",
  home: "/logs/agent/mytool-home",
  workdir: "/app dir",
  agentRoot: "/opt/evolve/agent",
  program: [],
  options: {},
  mcpServers: [],
  ...over,
});

describe("a good manifest", () => {
  it("registers, and reads back as a CliSpec with its vendoring, API, key variable, stdout and env", async () => {
    const r = await registerAgent(file(GOOD), home);
    expect(r).toMatchObject({ replaced: false, path: join(home, "agents/registered/mytool.toml") });
    expect(readFileSync(r.path, "utf8")).toBe(GOOD);
    const [spec] = registeredAgents(home);
    expect(spec.name).toBe("mytool");
    expect(spec.vendor).toEqual({ packages: [{ name: "mytool", version: "1.2.0" }], entry: "lib/node_modules/mytool/bin/mytool", viaNode: false });
    expect(spec.keyEnv).toBe("MYTOOL_API_KEY");
    expect(spec.stdoutName).toBe("mytool.txt");
    expect(spec.parser).toBeUndefined();
    expect(spec.apiFor("openai")).toBe("openai-chat");
    expect(spec.apiFor("openrouter")).toBe("openai-chat");
    expect(spec.apiFor("anthropic")).toBeUndefined();
    expect(agentSpec("mytool", home)?.name).toBe("mytool");
    expect((await registerAgent(file(GOOD), home)).replaced).toBe(true);
  });

  it("runs the command under sh with each placeholder shell-quoted and the vendored bin/ first on PATH", () => {
    const spec = manifestSpec(readManifestFile(file(GOOD)).manifest);
    const inv = spec.invocation(input());
    expect(inv.argv.slice(0, 2)).toEqual(["sh", "-c"]);
    expect(inv.env).toMatchObject({ EVOLVE_GATEWAY_URL: "http://evolve-gateway:4000", OPENAI_BASE_URL: "http://evolve-gateway:4000/v1", MYTOOL_TELEMETRY: "0", HOME: "/logs/agent/mytool-home" });
    expect(Object.keys(inv.env)).not.toContain("MYTOOL_API_KEY");
    // run the script for real with a stand-in `mytool` that prints each argument on a line
    const bin = mkdtempSync(join(home, "root-"));
    execFileSync("mkdir", ["-p", join(bin, "bin")]);
    writeFileSync(join(bin, "bin", "mytool"), '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n', { mode: 0o755 });
    const out = execFileSync(inv.argv[0], inv.argv.slice(1).map((a) => a.replaceAll("/opt/evolve/agent", bin)), { env: { PATH: process.env.PATH } }).toString();
    expect(out.split("\n").slice(0, 6)).toEqual(["--prompt", "fix it's \"bug\" in $HOME `now`", "--model", "gpt-5", "--cwd", "/app dir"]);
  });

  it("an install script runs before the command, and its failure stops the run", () => {
    const m = readManifestFile(file(GOOD.replace(/^npm = .*\n/m, 'script = "echo installing; exit 3"\n').replace(/^entry = .*\n/m, ""))).manifest;
    const inv = manifestSpec(m).invocation(input({ agentRoot: undefined }));
    expect(inv.argv[2]).toMatch(/^\( echo installing; exit 3\n\) >\/logs\/agent\/install\.log 2>&1 \|\| \{/);
    expect(manifestSpec(m).vendor.packages).toEqual([]);
  });

  it("a JavaScript entry runs on the vendored Node; [api] tables pick the API per provider", () => {
    const m = readManifestFile(
      file(GOOD.replace('entry = "lib/node_modules/mytool/bin/mytool"', 'entry = "lib/node_modules/mytool/cli.mjs"\nnode = ">=22.19"').replace('api = "openai-chat"', "")
        + '\n[api]\nanthropic = "anthropic"\n"*" = "openai-responses"\n'),
    ).manifest;
    const spec = manifestSpec(m);
    expect(spec.vendor).toMatchObject({ viaNode: true, nodeMin: "22.19" });
    expect(spec.apiFor("anthropic")).toBe("anthropic");
    expect(spec.apiFor("openai")).toBe("openai-responses");
  });
});

describe("a bad manifest is refused, naming the key", () => {
  const bad: [string, (t: string) => string, RegExp][] = [
    ["not TOML", () => "name = ", /is not valid TOML/],
    ["an unknown key", (t) => `colour = "red"\n${t}`, /colour: unknown key/],
    ["a bad name", (t) => t.replace('name = "mytool"', 'name = "My Tool"'), /name: lowercase letters/],
    ["no name", (t) => t.replace('name = "mytool"\n', ""), /name: missing/],
    ["a bad version", (t) => t.replace('version = "1.2.0"', 'version = "1 2"'), /version: a version/],
    ["no command", (t) => t.replace(/^command = .*\n/m, ""), /command: missing/],
    ["an unknown placeholder", (t) => t.replace("{model}", "{modle}"), /command: \{modle\} is no placeholder \(only \{instruction\}, \{model\}, \{workdir\}\)/],
    ["no {instruction}", (t) => t.replace("--prompt {instruction} ", ""), /command: it never passes \{instruction\}/],
    ["an unclosed brace", (t) => t.replace("{workdir}", "{workdir"), /command: an unclosed \{/],
    ["a bad api", (t) => t.replace('api = "openai-chat"', 'api = "soap"'), /api: /],
    ["a bad key_env", (t) => t.replace('key_env = "MYTOOL_API_KEY"', 'key_env = "MY-KEY"'), /key_env: an environment variable name/],
    ["a bad stdout", (t) => t.replace('stdout = "mytool.txt"', 'stdout = "../x.txt"'), /stdout: a plain file name/],
    ["an unknown parser", (t) => t.replace('stdout = "mytool.txt"', 'stdout = "mytool.txt"\nparser = "nosuch"'), /parser: no parser named "nosuch"/],
    ["a bad env name", (t) => t.replace("MYTOOL_TELEMETRY", '"BAD NAME"'), /env.BAD NAME: "BAD NAME" is not an environment variable name/],
    ["a non-string env value", (t) => t.replace('MYTOOL_TELEMETRY = "0"', "MYTOOL_TELEMETRY = 0"), /env.MYTOOL_TELEMETRY: /],
    ["npm and script both", (t) => t.replace("[install]\n", '[install]\nscript = "true"\n'), /install: give either npm/],
    ["neither npm nor script", (t) => t.replace(/^npm = .*\n/m, "").replace(/^entry = .*\n/m, ""), /install: give either npm/],
    ["npm without entry", (t) => t.replace(/^entry = .*\n/m, ""), /install.entry: npm installs need the entry/],
    ["an entry climbing out", (t) => t.replace('entry = "lib/node_modules/mytool/bin/mytool"', 'entry = "../../bin/sh"'), /install.entry: a path inside the vendored tree/],
    ["a version range", (t) => t.replace('npm = ["mytool@1.2.0"]', 'npm = ["mytool@^1.2.0"]'), /install.npm.0: an npm package at an exact version/],
    ["a bad node", (t) => t.replace("[install]\n", '[install]\nnode = "20"\n'), /install.node: the lowest Node/],
    ["a home outside /logs/agent", (t) => `home = "/root"\n${t}`, /home: a folder under \/logs\/agent/],
  ];
  for (const [what, edit, pattern] of bad) {
    it(what, async () => {
      const e = await expectCode(() => registerAgent(file(edit(GOOD)), home), "agent_manifest_invalid");
      expect(e.message).toMatch(pattern);
      expect(registeredAgents(home)).toEqual([]);
    });
  }

  it("a built-in agent's name (agent_name_reserved)", async () => {
    for (const name of ["oracle", "nop", "claude-code", "kimi-code"]) {
      const e = await expectCode(() => registerAgent(file(GOOD.replace('name = "mytool"', `name = "${name}"`)), home), "agent_name_reserved");
      expect(e.message).toContain(`${name} is a built-in agent`);
    }
  });

  it("a registration edited into an invalid one is left out and named", async () => {
    const r = await registerAgent(file(GOOD), home);
    writeFileSync(r.path, GOOD.replace("{instruction}", "{x}"));
    const loaded = loadRegistered(home);
    expect(loaded.agents).toEqual([]);
    expect(loaded.invalid).toEqual([{ file: r.path, message: expect.stringContaining("{x} is no placeholder") }]);
  });
});
