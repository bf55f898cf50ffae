/**
 * Real task shapes under the hardened box: every fixture in fixtures/tasks/shapes (Harbor's hello-world WORKDIR-only
 * Dockerfile, a non-root image USER, a VOLUME, a COPY into new folders, an `[agent] user`, an image user writing
 * its home, one with no home folder, docker-compose.yaml tasks whose main and sidecar working folders no build step
 * made) scores 1 with the oracle, both under the default `[box] userns` (box root is host uid 2000000000) and
 * with `[box] userns = false`. One `evolve run` over the folder per mode, through the real CLI on real podman.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const SHAPES = join(root, "fixtures", "tasks", "shapes");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
const homes: string[] = [];

function evolve(home: string, args: string[]) {
  // cwd: the run's ./jobs folder lands in the home, never in the checkout
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], { cwd: home, encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeout: 400_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs every shape with the oracle in a fresh home whose config.toml holds `config`; returns reward (or why not) by task name. */
function runShapes(config: string): Record<string, string> {
  const home = mkdtempSync(join(tmpdir(), "evolve-shapes-"));
  homes.push(home);
  if (config) writeFileSync(join(home, "config.toml"), config);
  const r = evolve(home, ["run", "-p", SHAPES, "-a", "oracle", "-n", "3", "--json"]);
  const out: Record<string, string> = {};
  for (const line of r.stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const ev = JSON.parse(line);
    if (ev.kind !== "trial_settled") continue;
    const t = ev.trial;
    out[t.task_name] = t.status === "SCORED" && t.reward === 1 ? "1" : `${t.status} ${t.reward} ${t.exception?.type ?? ""}: ${t.exception?.message ?? ""}`;
  }
  expect(Object.keys(out).length, `${r.stderr}\n${r.stdout.slice(-2000)}`).toBe(readdirSync(SHAPES).length);
  return out;
}

afterAll(() => {
  for (const home of homes) evolve(home, ["gc"]);
});

describe.skipIf(!hasPodman)("real task shapes score 1 with the oracle (needs podman and the local debian:bookworm-slim image)", () => {
  const every = () => Object.fromEntries(readdirSync(SHAPES).map((n) => [`evolve-shapes/${n}`, "1"]));

  it("under the default user namespace (box root is an unprivileged host id)", () => {
    expect(runShapes("")).toEqual(every());
  }, 420_000);

  it("with [box] userns = false", () => {
    expect(runShapes("[box]\nuserns = false\n")).toEqual(every());
  }, 420_000);
});
