/**
 * An `evolve worker` killed outright leaves its trial's boxes (issue 24 §1): everything a worker creates carries its
 * worker id, and the next incarnation of that worker (the same Slurm array task requeued on the node) removes what
 * the last one left before it claims anything; another worker's boxes are not touched. The Slurm epilog's side is
 * tests/slurm.engine.test.ts's.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL_WORKER, type Engine } from "../engine/driver/types.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { labelled, removeLeftovers } from "../engine/executor/worker.ts";

const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
let engine: Engine;
const suffix = `${process.pid}-${Date.now()}`;

beforeAll(async () => {
  if (!hasPodman) return;
  engine = await openEngine({ home: mkdtempSync(join(tmpdir(), "evolve-leftovers-")) });
});

afterAll(async () => {
  if (!hasPodman) return;
  for (const w of [`old-${suffix}`, `other-${suffix}`]) await removeLeftovers(engine, w);
  await engine.close();
});

describe.skipIf(!hasPodman)("a worker's leftovers", () => {
  it("a worker's next start removes the boxes and networks its killed incarnation made, and only those", async () => {
    const mine = labelled(engine, { [LABEL_WORKER]: `old-${suffix}` });
    const other = labelled(engine, { [LABEL_WORKER]: `other-${suffix}` });
    const spec = { image: "debian:bookworm-slim", cmd: ["sleep", "600"], labels: { "dev.evolve.test": "leftovers" }, network: "none" };
    const box = await mine.create(spec);
    await mine.start(box);
    const net = await mine.createNetwork(`evolve-leftover-${suffix}`, { internal: true, labels: {} });
    const kept = await other.create(spec);
    // the label is added to what the runner asked for, not in place of it
    expect((await engine.inspect(box))!.labels).toMatchObject({ [LABEL_WORKER]: `old-${suffix}`, "dev.evolve.test": "leftovers" });

    const lines: string[] = [];
    await removeLeftovers(engine, `old-${suffix}`, (l) => lines.push(l));
    expect(await engine.list({ [LABEL_WORKER]: `old-${suffix}` })).toEqual([]);
    expect((await engine.listNetworks({ [LABEL_WORKER]: `old-${suffix}` })).map((n) => n.name)).not.toContain(net);
    expect((await engine.list({ [LABEL_WORKER]: `other-${suffix}` })).map((c) => c.id)).toContain(kept);
    expect(lines).toEqual(["removed 1 box(es) and 1 network(s) a previous run of this worker left"]);
  });
});
