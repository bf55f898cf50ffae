/**
 * Trial boxes run in a user namespace (config.toml `[box] userns`, engine/driver/engine.ts): box root is an
 * unprivileged host id, as the host sees it in what the box writes to its mounted folders and in /proc; the agent
 * user's chown of its log folders keeps working; compose service boxes are mapped too; `userns = false` opts out.
 * Real podman, real trials.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_USERNS, loadConfig, parseUserns } from "../engine/config.ts";
import { idClash } from "../engine/doctor.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { LABEL_TRIAL, type Engine } from "../engine/driver/types.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import type { TrialEvent } from "../engine/trial/types.ts";
import { expectCode } from "./support/expect-code.ts";

const MARKER = "2.718281";
const ROOT = DEFAULT_USERNS.hostId;

/** A task whose agent user `dev` (box uid 1000) writes to /logs/agent while a marker `sleep` runs; its verifier (box root) writes to /logs/verifier. */
function writeTask(dir: string, compose: boolean): string {
  mkdirSync(join(dir, "environment"), { recursive: true });
  mkdirSync(join(dir, "solution"));
  mkdirSync(join(dir, "tests"));
  writeFileSync(join(dir, "instruction.md"), "Fixture: write files to the log folders.\n");
  writeFileSync(
    join(dir, "task.toml"),
    `schema_version = "1.3"\n[task]\nname = "evolve-tests/userns${compose ? "-compose" : ""}"\n[agent]\nuser = "dev"\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 60\n[environment]\nnetwork_mode = "no-network"\n`,
  );
  writeFileSync(join(dir, "environment", "Dockerfile"), "FROM debian:bookworm-slim\nRUN useradd -m -u 1000 dev\nWORKDIR /app\n");
  if (compose) {
    writeFileSync(join(dir, "environment", "docker-compose.yaml"), "services:\n  main:\n    build: .\n  web:\n    image: debian:bookworm-slim\n    command: sleep infinity\n");
  }
  writeFileSync(
    join(dir, "solution", "solve.sh"),
    `#!/bin/bash\nset -euo pipefail\ntouch /logs/agent/made-by-agent /logs/artifacts/made-by-agent\ncat /proc/self/uid_map > /logs/agent/uid_map\nsleep ${MARKER}\n`,
  );
  writeFileSync(
    join(dir, "tests", "test.sh"),
    "#!/bin/bash\ntouch /logs/verifier/made-by-root\ncp /bin/sh /logs/verifier/rootsh && chmod 4755 /logs/verifier/rootsh\necho 1 > /logs/verifier/reward.txt\n",
  );
  return dir;
}

/** The real and effective uid of a host process, from its /proc status. */
function hostUid(pid: number): number | undefined {
  try {
    const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Host pids whose command line is `sleep MARKER`. */
function markerPids(): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8") === `sleep\0${MARKER}\0`) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

interface Seen {
  rec: TrialRecord;
  path: string;
  /** Host uid of each of the trial's boxes' main processes during the agent phase, by role. */
  boxUids: Record<string, number[]>;
  /** Host uid of the agent's marker process. */
  agentUid?: number;
  log: string;
}

let engine: Engine;
const homes: string[] = [];
const stores: Store[] = [];
let taskDir: string;
let composeDir: string;

/** Runs the task in a fresh home with `config` as its config.toml and watches the boxes from the host while the agent runs. */
async function trialIn(config: string, dir = taskDir): Promise<Seen> {
  const home = mkdtempSync(join(tmpdir(), "evolve-userns-"));
  homes.push(home);
  if (config) writeFileSync(join(home, "config.toml"), config);
  const store = openStore(home);
  stores.push(store);
  const id = newId();
  const boxUids: Record<string, number[]> = {};
  let agentUid: number | undefined;
  let watching: Promise<void> | undefined;
  const watch = async () => {
    for (const c of await engine.list({ [LABEL_TRIAL]: id })) {
      const pid = (await engine.inspect(c.id))?.pid;
      const uid = pid ? hostUid(pid) : undefined;
      if (uid !== undefined) (boxUids[c.labels["dev.evolve.role"]] ??= []).push(uid);
    }
    for (let i = 0; i < 60 && agentUid === undefined; i++) {
      agentUid = markerPids().map(hostUid).find((u) => u !== undefined);
      if (agentUid === undefined) await new Promise((r) => setTimeout(r, 100));
    }
  };
  const onEvent = (e: TrialEvent) => {
    if (e.kind === "phase" && e.phase === "agent") watching = watch();
  };
  const rec = await runTrial(
    { trialId: id, jobId: "JOB-USERNS-TEST", home, task: { dir, digest: await taskDigest(dir), name: "userns" }, agent: { name: "oracle" }, timeoutMultiplier: 1, secrets: {} },
    { engine, store, onEvent },
  );
  await watching;
  await settleRemovals();
  const path = join(home, "trials", id);
  return { rec, path, boxUids, agentUid, log: readFileSync(join(path, "trial.log"), "utf8") };
}

beforeAll(async () => {
  const scratch = mkdtempSync(join(tmpdir(), "evolve-userns-task-"));
  homes.push(scratch);
  taskDir = writeTask(join(scratch, "userns"), false);
  composeDir = writeTask(join(scratch, "userns-compose"), true);
  engine = await openEngine({ home: scratch });
});

afterAll(async () => {
  await settleRemovals();
  for (const s of stores) await s.close();
  await engine?.close();
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

describe("[box] userns in config.toml", () => {
  it("defaults to box root = host id 2000000000, takes 0:<host id>:<size> and false, refuses the rest", () => {
    expect(parseUserns(undefined)).toEqual({ hostId: 2_000_000_000, size: 65536 });
    expect(parseUserns(true)).toEqual(DEFAULT_USERNS);
    expect(parseUserns(false)).toBe(false);
    expect(parseUserns("0:300000:65536")).toEqual({ hostId: 300000, size: 65536 });
    expect(parseUserns("0:0:65536")).toMatch(/host root/);
    expect(parseUserns("1:300000:65536")).toMatch(/box root first/);
    expect(parseUserns("0:4294967000:65536")).toMatch(/largest id/);
    expect(parseUserns("0:300000:0")).toMatch(/size/);
  });

  it("a bad value is config_invalid naming box.userns", async () => {
    const home = mkdtempSync(join(tmpdir(), "evolve-userns-cfg-"));
    homes.push(home);
    writeFileSync(join(home, "config.toml"), '[box]\nuserns = "root"\n');
    const e = await expectCode(() => loadConfig(home), "config_invalid");
    expect(e.message).toMatch(/box\.userns: "root" is not "0:<host id>:<size>"/);
  });
});

describe("evolve doctor's range check", () => {
  const map = { hostId: 100000, size: 65536 };
  it("names a subordinate range or an account that shares the box's host ids", () => {
    expect(idClash(map, { "/etc/subuid": "alice:100000:65536\n" }, {})).toBe("/etc/subuid entry alice (100000…165535)");
    expect(idClash(map, { "/etc/subgid": "bob:165535:10\n" }, {})).toMatch(/bob/);
    expect(idClash(map, {}, { "/etc/passwd": "root:x:0:0::/root:/bin/sh\nsvc:x:120000:120000::/:/bin/false\n" })).toBe("/etc/passwd entry svc (120000)");
  });
  it("passes ranges and accounts beside it", () => {
    expect(idClash(map, { "/etc/subuid": "alice:165536:65536\ncarol:34464:65536\n" }, { "/etc/passwd": "nobody:x:65534:65534::/:/bin/false\n" })).toBeUndefined();
  });
});

describe.runIf(process.getuid?.() === 0)("trial boxes in a user namespace (rootful podman)", () => {
  it("box root is not host root: its files and processes are the mapped ids on the host", async () => {
    const s = await trialIn("");
    expect(s.rec.status, s.log).toBe("SCORED");
    expect(s.log).toContain(`box root is host uid ${ROOT}`);
    // a mapped box goes as fast and as surely as any other: removed before the trial folder is settled
    expect(s.log).not.toMatch(/could not remove/);
    expect(await engine.list({ [LABEL_TRIAL]: s.rec.id })).toEqual([]);
    // the verifier ran as box root; the agent as dev (box uid 1000), after the box's root chowned /logs/agent to it
    expect(statSync(join(s.path, "verifier", "made-by-root")).uid).toBe(ROOT);
    // a "setuid-root" shell box root leaves behind is the mapped id's, whatever its bits were
    expect(statSync(join(s.path, "verifier", "rootsh")).uid).toBe(ROOT);
    expect(statSync(join(s.path, "agent", "made-by-agent")).uid).toBe(ROOT + 1000);
    expect(readFileSync(join(s.path, "agent", "uid_map"), "utf8").trim().split(/\s+/)).toEqual(["0", String(ROOT), "65536"]);
    expect(s.boxUids.agent).toEqual([ROOT]);
    expect(s.agentUid).toBe(ROOT + 1000);
    // the mounted folders are box root's (the agent's two, the agent user's), never world-writable
    for (const [d, uid] of [["agent", ROOT + 1000], ["artifacts", ROOT + 1000], ["verifier", ROOT]] as const) {
      const st = statSync(join(s.path, d));
      expect([d, st.uid, st.mode & 0o002]).toEqual([d, uid, 0]);
    }
  });

  it("a compose service's box is mapped like the agent's", async () => {
    const s = await trialIn("", composeDir);
    expect(s.rec.status, s.log).toBe("SCORED");
    expect(s.boxUids.service).toEqual([ROOT]);
    expect(s.boxUids.agent).toEqual([ROOT]);
  });

  it("a configured mapping is the one used", async () => {
    const s = await trialIn('[box]\nuserns = "0:1500000000:65536"\n');
    expect(s.rec.status, s.log).toBe("SCORED");
    expect(statSync(join(s.path, "verifier", "made-by-root")).uid).toBe(1_500_000_000);
    expect(s.boxUids.agent).toEqual([1_500_000_000]);
  });

  it("userns = false opts out: box root is host root again", async () => {
    const s = await trialIn("[box]\nuserns = false\n");
    expect(s.rec.status, s.log).toBe("SCORED");
    expect(statSync(join(s.path, "verifier", "made-by-root")).uid).toBe(0);
    expect(s.boxUids.agent).toEqual([0]);
    expect(s.log).not.toContain("user namespace");
  });
});

describe.runIf(process.getuid?.() === 0)("a mapped box keeps the spec's meaning (podman's own create)", () => {
  it("gets its pids, memory and CPU caps and a missing image is image_missing", async () => {
    const labels = { "dev.evolve.test": "userns-caps" };
    const id = await engine.create({ image: "debian:bookworm-slim", cmd: ["sleep", "infinity"], labels, network: "none", pidsLimit: 123, memoryMb: 256, cpus: 1.5, userns: DEFAULT_USERNS });
    try {
      await engine.start(id);
      const v1 = "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us";
      const v2 = "cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max";
      const r = await engine.exec(id, ["sh", "-c", `${v1} 2>/dev/null || ${v2}`]);
      expect(r.stdout.trim().split(/\s+/).slice(0, 3)).toEqual(["123", String(256 * 1024 * 1024), "150000"]);
    } finally {
      await engine.remove(id);
    }
    await expectCode(() => engine.create({ image: "localhost/evolve-no-such-image:1", cmd: [], labels, network: "none", userns: DEFAULT_USERNS }), "image_missing");
  });

  it("is removed every time right after its last exec (podman 4.3's EBUSY race is outwaited)", async () => {
    // without the retry in remove(), about one in ten of these removals failed on this host
    const labels = { "dev.evolve.test": "userns-rm" };
    for (let i = 0; i < 30; i++) {
      const id = await engine.create({ image: "debian:bookworm-slim", cmd: ["sleep", "infinity"], labels, network: "none", userns: DEFAULT_USERNS });
      await engine.start(id);
      await engine.exec(id, ["true"]);
      await engine.remove(id);
    }
    expect(await engine.list(labels)).toEqual([]);
  }, 120_000);
});
