/**
 * The trial's record writes: a phase's end, the next phase's start and a status move between them go to the store
 * as one write (each write is a synchronous LMDB transaction), and nothing is lost when no write follows.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { newId, openStore, type Store } from "../store/index.ts";
import { toRunning } from "./lifecycle.ts";
import { TrialRecorder } from "./recorder.ts";
import type { TrialDeps, TrialRequest } from "./types.ts";

class Recorder extends TrialRecorder {}

let home: string;
let store: Store;
let writes: number;

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-recorder-"));
  store = openStore(home);
  writes = 0;
  const put = store.putTrials.bind(store);
  store.putTrials = (recs) => (writes++, put(recs));
});

afterEach(() => {
  store.close();
  rmSync(home, { recursive: true, force: true });
});

function recorder(): { r: Recorder; id: string } {
  const id = newId();
  const req: TrialRequest = { trialId: id, jobId: "JOB", home, task: { dir: home, digest: "d", name: "t" }, agent: { name: "nop" }, timeoutMultiplier: 1, secrets: {} };
  return { r: new Recorder(req, { store } as unknown as TrialDeps), id };
}

const turn = () => new Promise((r) => setImmediate(r));

describe("trial record writes", () => {
  it("one phase's end, a status move and the next phase's start in one turn are one store write", async () => {
    const { r, id } = recorder();
    r.update(toRunning());
    await r.phase("build", async () => undefined);
    const before = writes;
    await r.phase("boot", async () => {
      r.update(toRunning());
      expect(store.getTrial(id)?.attempt_phase).toBe("boot");
      expect(store.getTrial(id)?.phase_timings.build?.finished_at).toBeDefined();
    });
    // build's end and boot's start rode on the status write; boot's end goes out at the turn's end
    expect(writes - before).toBe(1);
    await turn();
    expect(writes - before).toBe(2);
    const rec = store.getTrial(id)!;
    expect(rec.phase_timings.boot?.finished_at).toBeDefined();
    expect(rec.attempt_phase).toBe("boot");
  });

  it("a phase's start is in the store once the phase waits on anything, with no other write to carry it", async () => {
    const { r, id } = recorder();
    r.update(toRunning());
    let seen: string | undefined;
    await r.phase("agent", async () => {
      await turn();
      seen = store.getTrial(id)?.attempt_phase;
    });
    expect(seen).toBe("agent");
  });
});
