/**
 * `evolve agent pull|list|show|export|import|register`: argument handling and printing only (the work is in
 * engine/harness/vendor.ts and manifest.ts).
 */
import {
  agentsDir,
  agentSpec,
  builtinSpecs,
  checkAgentName,
  type CliSpec,
  defaultVersion,
  exportAgents,
  importAgents,
  listVendored,
  loadRegistered,
  needsVendoring,
  PLAIN_AGENT_NAMES,
  pullAgent,
  registerAgent,
  type Vendored,
  type VerifyProblem,
  verifyVendored,
} from "../engine/harness/mod.ts";
import { EvolveError } from "../engine/errors.ts";
import { out, outJson, outTable, style } from "./output.ts";
import pkg from "../package.json" with { type: "json" };

/** The providers `agent show` reports an API for. */
const PROVIDERS = ["anthropic", "openai", "gemini"];

function treeBytes(v: Vendored): number {
  return v.manifest.files.reduce((n, f) => n + f.size, 0);
}

function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`;
}

/** The spec of `name`, or the error a user gets for it: `agent_unknown` for a name nothing knows. */
function specOf(name: string): CliSpec {
  const spec = agentSpec(name);
  if (spec) return spec;
  if ((PLAIN_AGENT_NAMES as readonly string[]).includes(name)) throw new EvolveError("usage", `${name} is built into evolve and runs no CLI: there is nothing to vendor or show`);
  checkAgentName(name);
  throw new EvolveError("agent_unknown", `no installed or registered agent named ${JSON.stringify(name)}`, "register it with `evolve agent register <manifest.toml>`");
}

/** `name` or `name@version`. */
function splitRef(ref: string): { name: string; version?: string } {
  const at = ref.lastIndexOf("@");
  return at > 0 ? { name: ref.slice(0, at), version: ref.slice(at + 1) } : { name: ref };
}

/** `evolve agent pull <harness>[@version]` */
export async function pullCommand(ref: string, opts: { json?: boolean; from?: string; nodeFrom?: string }): Promise<number> {
  const { name, version } = splitRef(ref);
  const spec = specOf(name);
  if (spec.vendor.selfBinary) throw new EvolveError("usage", `${name} is the evolve binary itself, mounted into the box: there is nothing to vendor`);
  if (!needsVendoring(spec)) throw new EvolveError("usage", `${name} installs itself in the box (install.script): there is nothing to vendor`);
  if (opts.nodeFrom && !opts.from) throw new EvolveError("usage", "--node-from goes with --from");
  const r = await pullAgent(spec, { version, from: opts.from, nodeFrom: opts.nodeFrom });
  const doc = {
    harness: r.manifest.harness,
    version: r.manifest.version,
    dir: r.dir,
    pulled: r.pulled,
    seconds: Math.round(r.seconds * 1000) / 1000,
    files: r.manifest.files.length,
    bytes: treeBytes(r),
    node_version: r.manifest.node_version,
  };
  if (opts.json) return outJson(doc), 0;
  const what = `${doc.harness}@${doc.version}`;
  if (!r.pulled) out(`${style.dim("vendored")} ${what} is already in ${r.dir}`);
  else out(`${style.green("pulled")} ${what} ${style.dim(`→ ${r.dir} (${doc.files} files, ${mb(doc.bytes)}${doc.node_version ? `, Node ${doc.node_version}` : ""}, ${doc.seconds.toFixed(1)}s)`)}`);
  return 0;
}

/** `evolve agent list` */
export async function listCommand(opts: { json?: boolean }): Promise<number> {
  const vendored = listVendored();
  const versionsOf = (n: string) => vendored.filter((v) => v.manifest.harness === n).map((v) => v.manifest.version);
  const { agents: registered, invalid } = loadRegistered();
  const rows: { name: string; kind: string; available: boolean; version: string | null; vendored: string[] }[] = [];
  for (const n of PLAIN_AGENT_NAMES) rows.push({ name: n, kind: "builtin", available: true, version: null, vendored: [] });
  for (const s of builtinSpecs()) {
    // the conductor ships inside this binary: built in, like oracle and nop, with nothing to vendor (`agent pull` refuses it)
    if (s.vendor.selfBinary) rows.push({ name: s.name, kind: "builtin", available: true, version: null, vendored: [] });
    else rows.push({ name: s.name, kind: "cli", available: true, version: defaultVersion(s), vendored: versionsOf(s.name) });
  }
  for (const r of registered) rows.push({ name: r.manifest.name, kind: "registered", available: true, version: r.manifest.version, vendored: versionsOf(r.manifest.name) });
  // trees imported or pulled for an agent this build does not know: still listed, so they can be found and removed
  const known = new Set(rows.map((r) => r.name));
  for (const h of new Set(vendored.map((v) => v.manifest.harness))) if (!known.has(h)) rows.push({ name: h, kind: "unknown", available: false, version: null, vendored: versionsOf(h) });
  if (opts.json) return outJson({ agents_dir: agentsDir(), agents: rows, invalid_registrations: invalid }), 0;
  outTable(
    ["NAME", "KIND", "VERSION", "VENDORED"],
    rows.map((r) => [r.name, r.available ? r.kind : `${r.kind} (not in this build)`, r.version ?? "-", r.vendored.join(", ") || "-"]),
  );
  for (const i of invalid) out(style.yellow(`warning: ${i.file} is not a valid registration: ${i.message}`));
  return 0;
}

/** `evolve agent show <name>` */
export async function showCommand(name: string, opts: { json?: boolean; verify?: boolean }): Promise<number> {
  const spec = specOf(name);
  const registered = loadRegistered().agents.find((a) => a.manifest.name === name);
  const trees = listVendored().filter((v) => v.manifest.harness === name);
  const checks: { version: string; problems: VerifyProblem[] }[] = [];
  if (opts.verify) for (const t of trees) checks.push({ version: t.manifest.version, problems: await verifyVendored(t.dir) });
  const api = Object.fromEntries(PROVIDERS.map((p) => [p, spec.apiFor(p) ?? null]));
  const options = Object.entries(spec.options).map(([key, o]) => ({ key, description: o.description, values: o.values ? [...o.values] : null, pattern: o.pattern ? o.pattern.source : null }));
  const doc = {
    name: spec.name,
    kind: registered ? "registered" : "cli",
    // the conductor is this evolve: its version is evolve's
    version: registered ? registered.manifest.version : spec.vendor.selfBinary ? pkg.version : defaultVersion(spec),
    packages: spec.vendor.packages.map((p) => ({ name: p.name, version: p.version })),
    entry: spec.vendor.entry,
    via_node: spec.vendor.viaNode,
    node_min: spec.vendor.nodeMin ?? null,
    api,
    key_env: spec.keyEnv ?? "EVOLVE_GATEWAY_KEY",
    options,
    home: spec.home,
    stdout: spec.stdoutName,
    parser: spec.parser?.harness ?? null,
    vendored: trees.map((t) => ({
      version: t.manifest.version,
      dir: t.dir,
      created_at: t.manifest.created_at,
      files: t.manifest.files.length,
      bytes: treeBytes(t),
      node_version: t.manifest.node_version,
      ...(opts.verify ? { problems: checks.find((c) => c.version === t.manifest.version)?.problems ?? [] } : {}),
    })),
  };
  const bad = checks.filter((c) => c.problems.length > 0);
  if (opts.json) return outJson(doc), bad.length ? 1 : 0;
  out(`${style.bold(doc.name)} ${style.dim(`(${doc.kind}, version ${doc.version})`)}`);
  const none = spec.vendor.selfBinary ? "none: the evolve binary itself, mounted read-only in the box" : "(installed in the box by its script)";
  out(`  packages  ${doc.packages.map((p) => `${p.name}@${p.version}`).join(" ") || none}`);
  if (doc.entry) out(`  entry     ${doc.entry}${doc.via_node ? ` on Node ≥ ${doc.node_min ?? "?"}` : ""}`);
  out(`  api       ${PROVIDERS.map((p) => `${p}: ${api[p] ?? "—"}`).join(", ")}`);
  out(`  key env   ${doc.key_env}`);
  out(`  home      ${doc.home}`);
  out(`  stdout    agent/${doc.stdout}`);
  out(`  parser    ${doc.parser ?? "none"}`);
  if (options.length) {
    out("  options (--ak KEY=VALUE):");
    for (const o of options) out(`    ${o.key.padEnd(18)} ${o.description}${o.values ? ` (${o.values.join(" | ")})` : o.pattern ? ` (/${o.pattern}/)` : ""}`);
  }
  if (spec.vendor.selfBinary) out("  vendored  never: the box runs this evolve binary (or $EVOLVE_BINARY, or dist/evolve)");
  else if (trees.length === 0) out(`  vendored  none: evolve agent pull ${name}`);
  for (const t of doc.vendored) {
    const c = checks.find((x) => x.version === t.version);
    const verdict = c ? (c.problems.length ? style.red(` ${c.problems.length} problem(s)`) : style.green(" verified")) : "";
    out(`  vendored  ${t.version} ${style.dim(`${t.dir} (${t.files} files, ${mb(t.bytes)})`)}${verdict}`);
    for (const p of c?.problems.slice(0, 20) ?? []) out(`            ${style.red(p.path)}: ${p.problem}`);
  }
  return bad.length ? 1 : 0;
}

/** `evolve agent export <file> [names...]` */
export async function exportCommand(file: string, names: string[], opts: { json?: boolean }): Promise<number> {
  const r = await exportAgents(file, names);
  if (opts.json) return outJson(r), 0;
  out(`${style.green("exported")} ${r.agents.map((a) => `${a.harness}@${a.version}`).join(", ")} ${style.dim(`→ ${r.file} (${mb(r.bytes)})`)}`);
  out(style.dim(`on the other machine: evolve agent import ${r.file}`));
  return 0;
}

/** `evolve agent import <file>` */
export async function importCommand(file: string, opts: { json?: boolean }): Promise<number> {
  const r = await importAgents(file);
  if (opts.json) return outJson({ agents_dir: agentsDir(), ...r }), 0;
  for (const a of r.imported) out(`${style.green("imported")} ${a.harness}@${a.version}`);
  for (const a of r.skipped) out(`${style.dim("skipped")} ${a.harness}@${a.version} ${style.dim("(already vendored here)")}`);
  return 0;
}

/** `evolve agent register <manifest.toml>` */
export async function registerCommand(file: string, opts: { json?: boolean }): Promise<number> {
  const r = await registerAgent(file);
  const npm = r.manifest.install.npm ?? [];
  if (opts.json) return outJson({ name: r.manifest.name, version: r.manifest.version, path: r.path, replaced: r.replaced, install: npm.length ? "npm" : "script" }), 0;
  out(`${style.green(r.replaced ? "replaced" : "registered")} ${r.manifest.name}@${r.manifest.version} ${style.dim(`(${r.path})`)}`);
  if (npm.length) out(style.dim(`vendor it with: evolve agent pull ${r.manifest.name}`));
  return 0;
}
