/**
 * A hostile agent against evolve's persist, on real podman trials (fixtures/tasks/hostile/persist-attack: the
 * reference solution plays the attacker when ATTACK=1). The attacker plants evolve's old redaction temp names over
 * a pid range that holds this process's pid, a 100 GB sparse file holding the secret, the secret deeper than PATH_MAX beside a set-uid
 * shell and a FIFO, and a tree 400 levels deep. The trial is still scored, honestly (it did not do the task: 0), so
 * the mean keeps it; the secret is nowhere in plain text; what persist did not keep is recorded; no message carries
 * evolve's pid. The honest run of the same task scores 1.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import { LABEL_TRIAL, type Engine } from "../engine/driver/types.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import { primaryReward } from "../engine/trial/reward.ts";

const TASK = join(__dirname, "..", "fixtures", "tasks", "hostile", "persist-attack");
const TOKEN = "persist-token-7c2e91";
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;

let home: string;
let engine: Engine;
let store: Store;
const ran = new Map<string, { rec: TrialRecord; dir: string; log: string; ms: number }>();
const honestTeardown: Teardown[] = [];
let leftAfterSettle: unknown[] = [];

/** What the trial asked of its engine to end its boxes, with the trial's status and result.json's presence then. */
type Teardown = { op: "halt" | "remove"; box: string; status?: string; result: boolean };

async function trial(attack: boolean, teardown?: Teardown[]) {
  const id = newId();
  const dir = join(home, "trials", id);
  const seen = (op: Teardown["op"], box: string) => teardown?.push({ op, box, status: store.getTrial(id)?.status, result: existsSync(join(dir, "result.json")) });
  const watched: Engine = teardown
    ? Object.assign(Object.create(engine), {
        halt: (box: string) => (seen("halt", box), engine.halt(box)),
        remove: (box: string) => (seen("remove", box), engine.remove(box)),
      })
    : engine;
  const t0 = Date.now();
  const rec = await runTrial(
    {
      trialId: id,
      jobId: "JOB-PERSIST",
      home,
      task: { dir: TASK, digest: await taskDigest(TASK), name: "persist-attack" },
      agent: { name: "oracle" },
      timeoutMultiplier: 1,
      // PID_BLOCK (under 4 characters: never redacted) lets the box plant the names around this process's pid
      secrets: { HOSTILE_TOKEN: TOKEN, ATTACK: attack ? "1" : "0", PID_BLOCK: String(Math.floor(process.pid / 10000)) },
    },
    { engine: watched, store },
  );
  return { rec, dir, log: readFileSync(join(dir, "trial.log"), "utf8"), ms: Date.now() - t0 };
}

/** Every file under `dir` holding `needle` (grep -r walks by descriptors: deeper than PATH_MAX included). */
function holding(dir: string, needle: string): string[] {
  const r = spawnSync("grep", ["-rlaF", needle, dir], { encoding: "utf8" });
  if (r.status === 1) return [];
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout.trim().split("\n");
}

describe.skipIf(!hasPodman)("a hostile agent against evolve's persist", () => {
  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), "evolve-persist-"));
    engine = await openEngine({ home });
    store = openStore(home);
    const [hostile, honest] = await Promise.all([trial(true), trial(false, honestTeardown)]);
    ran.set("hostile", hostile);
    ran.set("honest", honest);
    await settleRemovals();
    leftAfterSettle = await engine.list({ [LABEL_TRIAL]: honest.rec.id });
  }, 400_000);

  afterAll(async () => {
    await settleRemovals();
    store?.close();
    await engine?.close();
    // rm -rf walks by descriptors too: whatever the trials left, deep or not
    if (home) execFileSync("rm", ["-rf", home]);
  });

  it("is scored honestly (0) and stays in the mean beside the honest run's 1, its secret redacted", () => {
    const { rec, dir } = ran.get("hostile")!;
    const honest = ran.get("honest")!;
    expect(rec.exception).toBeNull();
    expect(rec.status).toBe("SCORED");
    expect(rec.rewards).toEqual({ reward: 0 });
    expect(honest.rec.status).toBe("SCORED");
    expect(honest.rec.rewards).toEqual({ reward: 1 });
    const scored = [rec, honest.rec].filter((t) => t.status === "SCORED").map((t) => primaryReward(t.rewards)!);
    expect(scored.reduce((a, b) => a + b, 0) / scored.length).toBe(0.5);
    expect(readFileSync(join(dir, "agent", "said.txt"), "utf8")).toBe("token=[redacted]\n");
    expect(readFileSync(join(honest.dir, "agent", "said.txt"), "utf8")).toBe("token=[redacted]\n");
    // the planted names are the box's own files, left alone; evolve's temp folder is gone
    expect(existsSync(join(dir, "agent", ".said.txt.evolve-redact-1"))).toBe(true);
    expect(readdirSync(dir).filter((n) => n.startsWith(".evolve-tmp-"))).toEqual([]);
  });

  it("leaves the secret nowhere in plain text: not in the 100 GB sparse file, not deeper than PATH_MAX, not 400 levels down", () => {
    const { dir, ms } = ran.get("hostile")!;
    const hole = join(dir, "artifacts", "hole.bin");
    // the all-hole file is kept (nothing to read); grep would read its 100 GB of zeros, so it is left out
    expect(existsSync(hole)).toBe(true);
    expect(spawnSync("grep", ["-rlaF", "--exclude=hole.bin", TOKEN, dir], { encoding: "utf8" }).status).toBe(1);
    expect(existsSync(join(dir, "artifacts", "big.bin"))).toBe(false);
    // the deep file is redacted in place; its set-uid shell defused and its FIFO gone (find walks by descriptors)
    const deep = execFileSync("find", [dir, "-name", "deep*"], { encoding: "utf8" }).trim().split("\n");
    expect(deep.map((p) => p.split("/").pop()).sort()).toEqual(["deep.txt", "deepsh"]);
    expect(execFileSync("find", [dir, "-perm", "/6000"], { encoding: "utf8" }).trim()).toBe("");
    // no sparse file made persist read 100 GB: the whole trial, with the planting, well within its minutes
    expect(ms).toBeLessThan(240_000);
    expect(holding(join(dir, "agent"), TOKEN)).toEqual([]);
  });

  it("records what it did not keep as written, in persist-skipped.json and trial.log, with no pid in any message", () => {
    const { rec, dir, log } = ran.get("hostile")!;
    const skipped = JSON.parse(readFileSync(join(dir, "persist-skipped.json"), "utf8"));
    const by = (reason: string) => skipped.entries.filter((e: { reason: string }) => e.reason === reason);
    expect(by("too_large")).toEqual([expect.objectContaining({ path: "artifacts/big.bin", action: "removed", bytes: 100 * 1024 ** 3 })]);
    expect(by("all_hole")).toEqual([expect.objectContaining({ path: "artifacts/hole.bin", action: "kept" })]);
    expect(by("too_deep")).toHaveLength(1);
    expect(log).toMatch(/persist: \d+ entries the boxes wrote not kept as written \(.*too_large.*\).*persist-skipped\.json/);
    expect(log).toMatch(/cleared set-id bits on 1 file/);
    expect(log).not.toMatch(/evolve-redact-\d|EEXIST|TrialPersistError/);
    expect(log + JSON.stringify(rec) + JSON.stringify(skipped)).not.toContain(TOKEN);
    expect(JSON.stringify(skipped)).not.toMatch(new RegExp(`\\b${process.pid}\\b`));
  });

  it("halts the box before persist writes into its folders, and removes it only once the record has settled", () => {
    const halted = honestTeardown.filter((t) => t.op === "halt");
    expect(halted).toHaveLength(1);
    // no process of the box is left when the sweep and result.json come; the trial is not settled yet
    expect(halted[0]).toMatchObject({ status: "SCORING", result: false });
    // the box's removal (its storage torn down) is off the trial's critical path: after SCORED and result.json
    const removed = honestTeardown.filter((t) => t.op === "remove" && t.box === halted[0].box);
    expect(removed).toEqual([{ op: "remove", box: halted[0].box, status: "SCORED", result: true }]);
    expect(honestTeardown.indexOf(removed[0])).toBeGreaterThan(honestTeardown.indexOf(halted[0]));
    // and settleRemovals (the job runner's last step) leaves nothing of the trial behind
    expect(leftAfterSettle).toEqual([]);
  });
});
