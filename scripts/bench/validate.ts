/**
 * Hostile-input benchmark for the task validator (`bun scripts/bench/validate.ts`).
 *
 * Each shape is a valid task (fixtures/tasks/valid/minimal) with one file replaced by a bad-input pattern of about
 * 1 MB (or a FIFO, a link to /dev/zero, a sparse 1 GiB file). Every shape runs `validateTask` in a child process of
 * its own, so its peak RSS is that shape's alone; the parent watches the child and kills it past a time or memory
 * cap, so a quadratic or unbounded path is reported rather than taking the machine down. Prints one JSON document:
 * per shape its size, the validator's wall time (ms), the child's peak RSS (MB) and whether it met the goal
 * (≤ 1 s and ≤ 300 MB). Exit 0 whatever the figures (they depend on the machine); 2 when it cannot run at all.
 * Beside the wall time, each shape's CPU time (`cpu_ms`, user + system of the validation) and the machine's load
 * average when the run began (`load_avg_1m`): on a shared machine the wall time also counts waiting for a core (a
 * load of 20 on 2 cores made toml-steps take 4 s of wall for 0.3 s of work), and the goal is judged on wall time.
 *
 * Usage: bun scripts/bench/validate.ts [--size BYTES] [--only SHAPE[,SHAPE]] [--cap-mb 2048] [--timeout-s 60]
 */
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The goal each shape must meet. */
export const GOAL = { ms: 1000, rss_mb: 300 };

/** One hostile input: which task file it replaces and how to make it. */
export interface Shape {
  name: string;
  file: string;
  /** Writes the file at `path`; returns its apparent size in bytes. */
  make: (path: string, size: number) => number;
  /** Other task files the shape needs to reach its rule (relative path → content). */
  extra?: Record<string, string>;
}

const text = (s: string) => (path: string) => {
  writeFileSync(path, s);
  return Buffer.byteLength(s);
};
const repeat = (unit: string, size: number) => unit.repeat(Math.max(1, Math.floor(size / unit.length)));
const MINIMAL_TOML = `[task]\nname = "bench/hostile"\n`;

/** `count` `[[environment.mcp_servers]]` tables, server i at `url(i)`. */
function mcpServers(count: number, url: (i: number) => string): string {
  return Array.from({ length: count }, (_, i) => `[[environment.mcp_servers]]\nname = "m${i}"\nurl = "${url(i)}"\n`).join("");
}

/** An allowlist filling half of `size` bytes, and MCP servers on hosts it does not list filling the other half. */
function allowlistTimesMcp(size: number): string {
  const hosts = Array.from({ length: Math.floor(size / 2 / 24) }, (_, i) => `"h${i}.example.com"`).join(", ");
  const servers = mcpServers(Math.floor(size / 2 / 72), (i) => `http://m${i}.example.org:8000/mcp`);
  return `${MINIMAL_TOML}[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = [${hosts}]\n${servers}`;
}

/** The shapes of issue 9 §4 and issue 21 §6, at `size` bytes each; engine/task/fuzz-shapes.test.ts runs the same list. */
export const SHAPES: Shape[] = [
  { name: "toml-nested-arrays", file: "task.toml", make: (p, n) => text(`${MINIMAL_TOML}[metadata]\nx = ${"[".repeat(n / 2)}${"]".repeat(n / 2)}\n`)(p) },
  { name: "toml-dotted-key", file: "task.toml", make: (p, n) => text(`${MINIMAL_TOML}[metadata]\n${repeat("a.", n).slice(0, -1)} = 1\n`)(p) },
  { name: "toml-array-tables", file: "task.toml", make: (p, n) => text(`${MINIMAL_TOML}${repeat("[[metadata.t]]\n", n)}`)(p) },
  {
    name: "toml-array-tables-distinct",
    file: "task.toml",
    make: (p, n) => text(MINIMAL_TOML + Array.from({ length: Math.floor(n / 16) }, (_, i) => `[[m.t${i}]]\n`).join(""))(p),
  },
  { name: "toml-steps", file: "task.toml", make: (p, n) => text(MINIMAL_TOML + Array.from({ length: Math.floor(n / 24) }, (_, i) => `[[steps]]\nname = "s${i}"\n`).join(""))(p) },
  { name: "toml-inline-tables", file: "task.toml", make: (p, n) => text(`${MINIMAL_TOML}[metadata]\nx = ${"{a=".repeat(n / 4)}1${"}".repeat(n / 4)}\n`)(p) },
  { name: "toml-long-string", file: "task.toml", make: (p, n) => text(`${MINIMAL_TOML}[environment.env]\nA = "${repeat("${", n)}"\n`)(p) },
  { name: "dockerfile-continuations", file: "environment/Dockerfile", make: (p, n) => text(`FROM debian:bookworm-slim\nRUN true \\\n${repeat("  && x \\\n", n)}  && true\n`)(p) },
  { name: "dockerfile-long-line", file: "environment/Dockerfile", make: (p, n) => text(`FROM debian:bookworm-slim\nRUN ${repeat(" ", n)}x\n`)(p) },
  { name: "compose-whitespace-line", file: "environment/docker-compose.yaml", make: (p, n) => text(`services:\n  main:\n    build: .\n${repeat(" ", n)}x\n`)(p) },
  { name: "compose-many-services", file: "environment/docker-compose.yaml", make: (p, n) => text(`services:\n${Array.from({ length: Math.floor((n - 64) / 28) }, (_, i) => `  s${i}:\n    image: a:1\n`).join("")}  main:\n    build: .\n`)(p) },
  {
    // every service's build leaves the task: one finding each, with its line
    name: "compose-many-build-escapes",
    file: "environment/docker-compose.yaml",
    make: (p, n) => text(`services:\n${Array.from({ length: Math.floor((n - 64) / 31) }, (_, i) => `  s${i}:\n    build: ../../x\n`).join("")}  main:\n    build: .\n`)(p),
  },
  {
    // issue 21 §6: every MCP server on an unlisted host is a finding, and each message named the whole allowlist
    name: "toml-allowlist-x-mcp",
    file: "task.toml",
    make: (p, n) => text(allowlistTimesMcp(n))(p),
  },
  {
    // the same with compose services: every MCP server on a one-label host that is no service named every service
    name: "compose-services-x-mcp",
    file: "environment/docker-compose.yaml",
    make: (p, n) => text(`services:\n  main:\n    build: .\n${Array.from({ length: Math.floor((n - 64) / 26) }, (_, i) => `  s${i}:\n    image: a:1\n`).join("")}`)(p),
    extra: { "task.toml": MINIMAL_TOML + mcpServers(2000, (i) => `http://m${i}:8000/mcp`) },
  },
  {
    name: "test-sh-pep723",
    file: "tests/test.sh",
    make: (p, n) => text(`#!/bin/bash\nuv run x.py\n# /// script\n${repeat("# dependencies = [\n", n)}`)(p),
    extra: { "task.toml": `${MINIMAL_TOML}[environment]\nnetwork_mode = "no-network"\n` },
  },
  {
    name: "test-sh-uvx",
    file: "tests/test.sh",
    make: (p, n) => text(`#!/bin/bash\n${repeat("uvx --with ", n)}pytest\n`)(p),
    extra: { "task.toml": `${MINIMAL_TOML}[environment]\nnetwork_mode = "no-network"\n` },
  },
  { name: "instruction-huge-sparse", file: "instruction.md", make: (p) => (writeFileSync(p, "hi\n"), truncateSync(p, 1 << 30), 1 << 30) },
  { name: "instruction-dev-zero", file: "instruction.md", make: (p) => (symlinkSync("/dev/zero", p), 0) },
  { name: "instruction-fifo", file: "instruction.md", make: (p) => (execFileSync("mkfifo", [p]), 0) },
  { name: "task-toml-fifo", file: "task.toml", make: (p) => (execFileSync("mkfifo", [p]), 0) },
];

/** What one child reports. */
interface ChildReport {
  ms: number;
  cpu_ms: number;
  rss_mb: number;
  ok: boolean;
  codes: string[];
}

/** One row of the printed result. */
export interface ShapeResult {
  shape: string;
  file: string;
  size_bytes: number;
  ms: number;
  /** CPU time (user + system) of the validation, where the child reported it. */
  cpu_ms?: number;
  peak_rss_mb: number;
  goal_met: boolean;
  /** `validated` with the verdict, or why the child was stopped. */
  outcome: string;
}

const round = (n: number) => Math.round(n * 10) / 10;

function vmRssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** Runs one shape in a child, watching its RSS every 20 ms; kills it past the caps. */
async function runShape(shape: Shape, size: number, capMb: number, timeoutS: number): Promise<ShapeResult> {
  const tmp = mkdtempSync(join(tmpdir(), "evolve-bench-validate-"));
  const dir = join(tmp, "task");
  cpSync(join(ROOT, "fixtures/tasks/valid/minimal"), dir, { recursive: true });
  for (const [rel, body] of Object.entries(shape.extra ?? {})) writeFileSync(join(dir, rel), body);
  const target = join(dir, shape.file);
  rmSync(target, { force: true });
  const bytes = shape.make(target, size);
  const started = performance.now();
  try {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--child", dir], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    let peak = 0;
    let killed = "";
    const timer = setInterval(() => {
      peak = Math.max(peak, vmRssMb(child.pid!));
      if (peak > capMb) killed = `killed: RSS over ${capMb} MB`;
      else if (performance.now() - started > timeoutS * 1000) killed = `killed: over ${timeoutS} s`;
      if (killed) child.kill("SIGKILL");
    }, 20);
    const code: number | null = await new Promise((res) => child.on("close", (c) => res(c)));
    clearInterval(timer);
    const wall = performance.now() - started;
    const base = { shape: shape.name, file: shape.file, size_bytes: bytes };
    if (killed || code !== 0) {
      const why = killed || `child exited ${code}: ${stderr.trim().split("\n").slice(-1)[0] ?? ""}`;
      return { ...base, ms: round(wall), peak_rss_mb: round(peak), goal_met: false, outcome: why };
    }
    const r = JSON.parse(stdout) as ChildReport;
    const rss = Math.max(r.rss_mb, peak);
    return {
      ...base,
      ms: round(r.ms),
      cpu_ms: round(r.cpu_ms),
      peak_rss_mb: round(rss),
      goal_met: r.ms <= GOAL.ms && rss <= GOAL.rss_mb,
      outcome: `validated: ${r.ok ? "ok" : `refused (${r.codes.join(", ")})`}`,
    };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The child: validates one task and reports its own time and peak RSS. */
async function child(dir: string): Promise<void> {
  const { validateTask } = await import("../../engine/task/validate.ts");
  const { DEFAULT_CEILINGS } = await import("../../engine/config.ts");
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const r = await validateTask(dir, { ceilings: DEFAULT_CEILINGS, secrets: new Set() });
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const rep: ChildReport = {
    ms,
    cpu_ms: (cpu.user + cpu.system) / 1000,
    rss_mb: process.resourceUsage().maxRSS / 1024,
    ok: r.ok,
    codes: [...new Set(r.findings.filter((f) => f.severity === "error").map((f) => f.code))],
  };
  process.stdout.write(JSON.stringify(rep));
  process.exit(0);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      child: { type: "string" },
      size: { type: "string", default: String(1 << 20) },
      only: { type: "string" },
      "cap-mb": { type: "string", default: "2048" },
      "timeout-s": { type: "string", default: "60" },
    },
  });
  if (values.child) return child(values.child);
  const size = Number(values.size);
  const only = values.only?.split(",");
  const shapes = SHAPES.filter((s) => !only || only.includes(s.name));
  if (!(size > 0) || shapes.length === 0) {
    process.stderr.write("error[usage]: --size must be a positive number and --only must name known shapes\n");
    process.exit(2);
  }
  const load = round(loadavg()[0]!);
  const results: ShapeResult[] = [];
  for (const s of shapes) {
    const r = await runShape(s, size, Number(values["cap-mb"]), Number(values["timeout-s"]));
    results.push(r);
    process.stderr.write(`${r.shape}: ${r.ms} ms (${r.cpu_ms ?? "?"} ms CPU), ${r.peak_rss_mb} MB, ${r.outcome}\n`);
  }
  const met = results.filter((r) => r.goal_met).length;
  process.stdout.write(`${JSON.stringify({ goal: GOAL, size_bytes: size, runtime: process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.version}`, load_avg_1m: load, met: `${met}/${results.length}`, shapes: results }, null, 2)}\n`);
}

// run only as a script: tests/support/task-fuzz.ts imports SHAPES
if (import.meta.main) await main();
