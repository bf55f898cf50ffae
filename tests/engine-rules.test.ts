/**
 * The rules commands used to hold, asked of the engine now (issue 21 §2): the `--ve` allow-list refused by createJob
 * whatever the caller, the job defaults, pass@1, the dataset-ref pattern, and which file is a trial's agent
 * stream. Real store.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJob } from "../engine/job/job.ts";
import { JOB_DEFAULTS, VE_KEYS } from "../engine/job/job-config.ts";
import { openStore } from "../engine/store/index.ts";
import { isPinnedDatasetRef, namesDataset } from "../engine/dataset-ref.ts";
import { passAt1 } from "../engine/eval/stats.ts";
import { agentStreamFile, agentStreamNames } from "../engine/box/layout.ts";
import { jobConfig } from "./support/job-config.ts";
import { expectCode } from "./support/expect-code.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "evolve-engine-rules-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the engine refuses a verifier env key a job may not set, whatever the caller", () => {
  it("createJob refuses PATH beside an allowed key with ve_key_unsupported, and records nothing", async () => {
    const store = openStore(join(dir, "ve"));
    try {
      const e = await expectCode(() => createJob(store, { ...jobConfig(1), verifier_env: { REWARDKIT_MODEL: "m", PATH: "/x" } }), "ve_key_unsupported");
      expect(e.message).toBe("--ve PATH: only REWARDKIT_JUDGE and REWARDKIT_MODEL may be set");
      expect(e.exit).toBe(2);
      expect(store.listJobs()).toEqual([]);
      expect(store.listTrials()).toEqual([]);
      const job = createJob(store, { ...jobConfig(1), verifier_env: { REWARDKIT_JUDGE: "codex", REWARDKIT_MODEL: "m" } });
      expect(store.getJob(job.id)?.config).toMatchObject({ verifier_env: { REWARDKIT_JUDGE: "codex", REWARDKIT_MODEL: "m" } });
      expect(VE_KEYS).toEqual(["REWARDKIT_JUDGE", "REWARDKIT_MODEL"]);
    } finally {
      await store.close();
    }
  });
});

describe("the rules commands used to copy", () => {
  it("pass@1 is the share of attempts that scored 1; none is 0", () => {
    expect(passAt1([])).toBe(0);
    expect(passAt1([{ score: 1 }, { score: 0.5 }, { score: null }, { score: 1.2 }])).toBe(0.5);
  });

  it("a pinned dataset ref is name@version; a held-out value with /. is a folder", () => {
    for (const ok of ["swe@1.0", "my-org/swe.lite_2@2026-06-01"]) expect(isPinnedDatasetRef(ok)).toBe(true);
    for (const bad of ["swe", "Swe@1", "swe@", "swe@1 0", "swe@1@2", "./x@1", "@1"]) expect(isPinnedDatasetRef(bad)).toBe(false);
    expect(namesDataset("held/out@1")).toBe(true);
    expect(namesDataset("cards/../held@1")).toBe(false);
    expect(namesDataset("cards/held")).toBe(false);
  });

  it("a trial's agent stream: <agent>.txt, then stdout.log, then the first .txt, else where <agent>.txt would be", () => {
    const agentDir = join(dir, "stream", "agent");
    expect(agentStreamFile(agentDir, "codex")).toBe(join(agentDir, "codex.txt"));
    mkdirSync(agentDir, { recursive: true });
    writeFileSync(join(agentDir, "b.txt"), "");
    writeFileSync(join(agentDir, "a.txt"), "");
    expect(agentStreamFile(agentDir, "codex")).toBe(join(agentDir, "a.txt"));
    writeFileSync(join(agentDir, "stdout.log"), "");
    expect(agentStreamFile(agentDir, "codex")).toBe(join(agentDir, "stdout.log"));
    writeFileSync(join(agentDir, "codex.txt"), "");
    expect(agentStreamFile(agentDir, "codex")).toBe(join(agentDir, "codex.txt"));
    expect(agentStreamNames("codex")).toEqual(["codex.txt", "stdout.log"]);
  });
});
