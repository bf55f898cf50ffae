/**
 * The `sdk-probe` test agent: fixtures/agents/sdk-probe.ts bundled for node, copied into the box with this host's
 * node binary (debian:bookworm-slim has no node), and run there with exactly the environment the trial hands an
 * agent. It registers like an installed CLI would (`usesModel`), so the trial takes a gateway lease for it.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Harness, HarnessContext } from "../../engine/harness/index.ts";

const ROOT = join(__dirname, "..", "..");

/** Bundles the probe and stages it with node in a fresh host folder; returns that folder. */
export function stageProbe(): string {
  const dir = mkdtempSync(join(tmpdir(), "evolve-probe-"));
  const r = spawnSync(join(ROOT, "node_modules", ".bin", "bun"), ["build", join(ROOT, "fixtures", "agents", "sdk-probe.ts"), "--target=node", `--outfile=${join(dir, "probe.mjs")}`], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`bundling the probe failed: ${r.stderr || r.stdout}`);
  copyFileSync(process.execPath, join(dir, "node"));
  return dir;
}

/**
 * The probe harness. `extraEnv` reaches the probe beside the trial's env (PROBE_* knobs only: nothing secret);
 * `afterRun` sees the live box before the trial removes it (tests scan its environment and files there).
 */
export function probeHarness(staged: string, o: { extraEnv?: Record<string, string>; afterRun?: (ctx: HarnessContext) => Promise<void> } = {}): Harness {
  return {
    name: "sdk-probe",
    usesModel: true,
    async install(ctx) {
      await ctx.engine.copyIn(ctx.containerId, staged, "/opt/probe");
    },
    async run(ctx) {
      const r = await ctx.engine.exec(ctx.containerId, ["sh", "-c", "/opt/probe/node /opt/probe/probe.mjs > /logs/agent/probe.txt 2>&1"], {
        user: ctx.user,
        workdir: ctx.workdir,
        env: { ...ctx.env, ...(o.extraEnv ?? {}) },
        timeoutMs: ctx.timeoutMs,
      });
      await o.afterRun?.(ctx);
      return { exitCode: r.exitCode, timedOut: r.timedOut };
    },
  };
}
