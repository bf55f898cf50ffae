/**
 * Where a trial's time goes (`bun scripts/bench/trial-profile.ts [--agent nop|oracle] [--runs 3]`): runs trials of
 * the benchmark's tiny task and prints, for the last run, every engine REST call with its start offset and
 * duration, the phase timings, and the trial's total. A diagnostic for the overhead work of trial-overhead.ts.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { importTasks } from "../../engine/dataset.ts";
import { openEngine } from "../../engine/engine-choice.ts";
import { newId, openStore } from "../../engine/store/index.ts";
import { runTrial, settleRemovals } from "../../engine/trial/run.ts";

const { values } = parseArgs({
  options: { agent: { type: "string", default: "oracle" }, runs: { type: "string", default: "3" }, sleep: { type: "string", default: "0" }, image: { type: "string", default: "debian:bookworm-slim" } },
});
const scratch = mkdtempSync(join(tmpdir(), "evolve-profile-"));
const home = join(scratch, "home");
const dir = join(scratch, "task");
mkdirSync(join(dir, "environment"), { recursive: true });
mkdirSync(join(dir, "tests"), { recursive: true });
mkdirSync(join(dir, "solution"), { recursive: true });
writeFileSync(join(dir, "task.toml"), `[task]\nname = "bench/profile"\n\n[environment]\nnetwork_mode = "no-network"\n`);
writeFileSync(join(dir, "instruction.md"), "Do nothing.\n");
writeFileSync(join(dir, "environment", "Dockerfile"), `FROM ${values.image}\nWORKDIR /app\n`);
writeFileSync(join(dir, "tests", "test.sh"), "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n");
writeFileSync(join(dir, "solution", "solve.sh"), `#!/bin/bash\nsleep ${values.sleep}\n`);
for (const f of ["tests/test.sh", "solution/solve.sh"]) chmodSync(join(dir, f), 0o755);

const store = openStore(home);
const engine = await openEngine({ home });
const calls: { at: number; ms: number; what: string }[] = [];
let t0 = 0;
const orig = engine.rest.request.bind(engine.rest);
engine.rest.request = async (method: string, path: string, opts?: any) => {
  const s = performance.now();
  try {
    return await orig(method, path, opts);
  } finally {
    calls.push({ at: Math.round(s - t0), ms: Math.round(performance.now() - s), what: `${method} ${path.replace(/[0-9a-f]{64}/g, "<id>").slice(0, 60)}${opts?.query?.path ? ` path=${opts.query.path}` : ""}` });
  }
};
try {
  const task = (await importTasks(store, home, dir, { secrets: new Set() })).tasks[0];
  const totals: number[] = [];
  for (let i = 0; i < Number(values.runs); i++) {
    calls.length = 0;
    t0 = performance.now();
    const rec = await runTrial(
      { trialId: newId(), jobId: "profile", home, task: { dir: task.dir, digest: task.digest, name: task.name }, agent: { name: values.agent! }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );
    totals.push(Math.round(performance.now() - t0));
    if (rec.status !== "SCORED") throw new Error(`${rec.status}: ${rec.exception?.message}`);
    if (i === Number(values.runs) - 1) {
      for (const c of calls) console.log(`${String(c.at).padStart(6)} ms +${String(c.ms).padStart(4)} ms  ${c.what}`);
      const pt = rec.phase_timings as Record<string, { started_at: string; finished_at?: string }>;
      for (const [p, s] of Object.entries(pt)) console.log(`phase ${p.padEnd(8)} ${s.finished_at ? Date.parse(s.finished_at) - Date.parse(s.started_at) : "?"} ms`);
    }
    await settleRemovals();
  }
  console.log(`totals: ${totals.join(" ")} ms`);
} finally {
  await settleRemovals();
  await engine.close();
  await store.close();
  rmSync(scratch, { recursive: true, force: true });
}
