/**
 * The store never loses data silently and never crashes: damaged, cut-short, emptied or deleted data files are
 * refused before LMDB maps them (a process that maps a bad file dies on a signal no code can catch), a damaged
 * value is `store_corrupt` from every read, and full or read-only disks say so. The CLI runs in child processes
 * wherever a crash would be a signal, so the test sees it instead of dying with it: `bun main.ts`, or a CLI host
 * (tests/support/cli-host.ts) of the case's own, whose death fails the call; calls that can only meet an error (a
 * damaged record, a backup) share one host for the file.
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJob } from "../engine/job/job.ts";
import { jobConfig } from "./support/job-config.ts";
import { isDiskFull } from "../engine/errors.ts";
import { openStore, STORE_MARKER } from "../engine/store/index.ts";
import { expectCode } from "./support/expect-code.ts";
import { cliHost, type CliHost, type CliResult } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
const BUN = join(root, "node_modules/.bin/bun");
let dir: string;
let n = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "evolve-integrity-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The CLI as a child process: where a store file LMDB must not map is at stake, or the disk itself. */
function evolve(home: string, args: string[]) {
  const r = spawnSync(BUN, [join(root, "main.ts"), ...args], { encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeout: 30_000 });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

// where a bad record can only be an error, one Bun process runs the calls in-process (tests/support/cli-host.ts)
const host = cliHost();
afterAll(() => host.close());
const cli = (home: string, args: string[]) => host.run(args, { env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });

/**
 * Where a call might map a file LMDB must not map: a host that is replaced once it is gone. A call that crashed it
 * throws, failing the case that did it, and the next case gets a fresh host, so one crash fails only its own case
 * while the cases that do not crash share one start-up.
 */
let mapHost: CliHost | undefined;
afterAll(() => mapHost?.close());
function mapping(home: string, args: string[]): CliResult {
  if (!mapHost?.alive()) mapHost = cliHost();
  const h = mapHost;
  try {
    return h.run(args, { env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
  } catch (e) {
    h.close();
    throw e;
  }
}

/** A home whose store holds a few jobs of many trials, so data.mdb spans hundreds of pages. */
async function seeded(): Promise<{ home: string; jobs: string[] }> {
  const home = join(dir, `home-${++n}`);
  const store = openStore(home);
  const jobs = [1, 2, 3].map(() => createJob(store, jobConfig(40, 20)).id);
  await store.close();
  return { home, jobs };
}

const dataFile = (home: string) => join(home, "store", "data.mdb");

describe("a data file LMDB must not map", () => {
  let base: { home: string; jobs: string[] };
  beforeAll(async () => {
    base = await seeded();
  });
  const damaged = (how: (file: string, size: number) => void) => {
    const home = join(dir, `home-${++n}`);
    cpSync(base.home, home, { recursive: true });
    const file = dataFile(home);
    how(file, statSync(file).size);
    return home;
  };

  const cases: [string, (file: string, size: number) => void][] = [
    ["cut in half", (f, size) => truncateSync(f, Math.floor(size / 2))],
    ["one page short", (f, size) => truncateSync(f, size - 4096)],
    ["cut mid-page", (f, size) => truncateSync(f, size - 100)],
    ["replaced by garbage", (f, size) => {
      // the same bytes as Array.from(…) would give, without an array of numbers the size of the file
      const b = Buffer.allocUnsafe(size);
      for (let i = 0; i < size; i++) b[i] = (i * 7919 + 13) & 0xff;
      writeFileSync(f, b);
    }],
    ["with a zeroed first meta page", (f) => {
      const b = readFileSync(f);
      b.fill(0, 0, 4096);
      writeFileSync(f, b);
    }],
    ["with 200 bytes flipped inside its pages", (f, size) => {
      const b = readFileSync(f);
      let x = 2654435761;
      for (let i = 0; i < 200; i++) {
        x = (x * 1103515245 + 12345) >>> 0;
        b[8192 + Math.floor((x / 2 ** 32) * (size - 8192))] ^= 0xff;
      }
      writeFileSync(f, b);
    }],
    ["with a second meta page claiming a huge txnid", (f) => {
      const b = readFileSync(f);
      b.writeBigUInt64LE(0xffffn << 40n, 4096 + 24 + 24 + 2 * 48); // last_pg of page 1, beyond the file
      b.writeBigUInt64LE(1n << 50n, 4096 + 24 + 24 + 2 * 48 + 8); // txnid: LMDB would pick this one
      writeFileSync(f, b);
    }],
  ];
  for (const [label, how] of cases) {
    it(`is refused when ${label}: store_corrupt naming the file, exit 2, no signal, nothing written`, () => {
      const home = damaged(how);
      const before = readFileSync(dataFile(home));
      // a call that mapped the file would kill the host: that call throws, failing this case and no other
      for (const args of [["job", "list", "--json"], ["gateway", "stop"], ["store", "verify"], ["store", "backup", join(home, "b.mdb")]]) {
        const r = mapping(home, args);
        expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
        expect(r.stderr).toMatch(new RegExp(`^error\\[store_corrupt\\]: ${dataFile(home).replace(/[.]/g, "\\.")} is damaged: `));
        expect(r.stderr).toMatch(/hint: .*restore .*data\.mdb from a backup/);
      }
      expect(readFileSync(dataFile(home)).equals(before)).toBe(true);
      expect(existsSync(join(home, "b.mdb"))).toBe(false);
    });
  }

  it("a whole store still opens and lists (the checks refuse nothing good)", () => {
    const r = mapping(base.home, ["job", "list", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).map((j: { id: string }) => j.id).sort()).toEqual([...base.jobs].sort());
  });
});

describe("a home that had a store", () => {
  it("gets a marker with its first store; an emptied or deleted data.mdb is then refused, not recreated", () => {
    const home = join(dir, `home-${++n}`);
    const first = evolve(home, ["job", "list", "--json"]);
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toBe("[]");
    expect(existsSync(join(home, STORE_MARKER))).toBe(true);

    truncateSync(dataFile(home), 0);
    for (const args of [["job", "list", "--json"], ["gateway", "stop"]]) {
      const r = evolve(home, args);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^error\[store_corrupt\]: .*data\.mdb is empty, but this home held a store/);
      expect(r.stderr).toMatch(new RegExp(`remove .*${STORE_MARKER}`));
    }
    expect(statSync(dataFile(home)).size).toBe(0);

    rmSync(join(home, "store"), { recursive: true });
    const gone = evolve(home, ["gateway", "stop"]);
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(/^error\[store_corrupt\]: .*data\.mdb is missing, but this home held a store/);
    expect(existsSync(join(home, "store"))).toBe(false);

    // removing the marker is how a user starts over on purpose
    rmSync(join(home, STORE_MARKER));
    expect(evolve(home, ["job", "list", "--json"]).code).toBe(0);
  });

  it("without a marker (a home from before it) is known by its stored trials", async () => {
    const { home } = await seeded();
    rmSync(join(home, STORE_MARKER));
    mkdirSync(join(home, "trials", "01ABC"), { recursive: true });
    rmSync(dataFile(home));
    const e = await expectCode(() => openStore(home), "store_corrupt");
    expect(e.message).toMatch(/it has stored trials/);
    expect(e.hint).toMatch(/to start an empty store on purpose, move .*tasks and .*trials aside/);
    expect(existsSync(dataFile(home))).toBe(false);
  });
});

describe("damaged values", () => {
  it("are store_corrupt from every read, naming db and key, and listed by store verify", async () => {
    const home = join(dir, `home-${++n}`);
    const store = openStore(home);
    const job = createJob(store, jobConfig());
    await store.close();
    const file = dataFile(home);
    const b = readFileSync(file);
    const at = b.indexOf(Buffer.from(`"status":"RUNNING"`));
    expect(at).toBeGreaterThan(0);
    b.write("!", at + 8); // `"status"!"RUNNING"`: not JSON any more, the page itself intact
    writeFileSync(file, b);

    for (const args of [["job", "list", "--json"], ["job", "show", job.id]]) {
      const r = cli(home, args);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^error\\[store_corrupt\\]: store record jobs/"${job.id}" is corrupt`));
      expect(r.stderr).toMatch(/hint: `evolve store verify` lists every damaged record/);
    }
    const v = cli(home, ["store", "verify", "--json"]);
    expect(v.code).toBe(1);
    const report = JSON.parse(v.stdout);
    expect(report.structure).toBeNull();
    expect(report.bad).toEqual([{ db: "jobs", key: job.id, why: expect.stringMatching(/JSON/i) }]);
    expect(report.dbs.trials).toEqual({ records: 1, bad: 0 });
  });
});

describe("a status outside the vocabulary", () => {
  it("is store_corrupt naming the record and the field, from every read and from store verify", async () => {
    const home = join(dir, `home-${++n}`);
    const store = openStore(home);
    const job = createJob(store, jobConfig());
    const [trial] = store.listTrials(job.id);
    await store.close();
    const file = dataFile(home);
    const b = readFileSync(file);
    // valid JSON of the same length, a word the trial runner has no meaning for: another tool's, or an older spelling
    const at = b.indexOf(Buffer.from(`"status":"QUEUED"`));
    expect(at).toBeGreaterThan(0);
    b.write("queued", at + 10);
    writeFileSync(file, b);

    for (const args of [["trial", "show", trial.id], ["job", "show", job.id]]) {
      const r = cli(home, args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^error\\[store_corrupt\\]: store record trials/"${trial.id}" is corrupt \\(status: `));
    }
    const v = cli(home, ["store", "verify", "--json"]);
    expect(v.code).toBe(1);
    expect(JSON.parse(v.stdout).bad).toEqual([{ db: "trials", key: trial.id, why: expect.stringMatching(/^status: /) }]);
  });
});

describe("not corruption", () => {
  it("an absurdly long id is a usage error, not store_corrupt", () => {
    const home = join(dir, `home-${++n}`);
    const id = "x".repeat(8000);
    for (const args of [["job", "show", id], ["trial", "show", id], ["job", "cancel", id]]) {
      const r = cli(home, args);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^error\[usage\]: a (job|trial) id of 8000 characters \("x+"…\) is longer than the store can hold/);
      expect(r.stderr.length).toBeLessThan(400);
    }
  });
});

/** Mounts a tmpfs of `size` for the test, or returns undefined where this process may not mount (not root). */
function tmpfs(size: string): string | undefined {
  const mnt = join(dir, `mnt-${++n}`);
  mkdirSync(mnt);
  return spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", mnt]).status === 0 ? mnt : undefined;
}
const umount = (mnt: string) => spawnSync("umount", ["-l", mnt]);
const canMount = process.getuid?.() === 0 && spawnSync("mount", ["--version"]).status === 0;

describe.skipIf(!canMount)("the machine refuses", () => {
  it("a full disk is disk_full naming data.mdb, and what was stored before stays readable", async () => {
    const mnt = tmpfs("1m")!;
    try {
      const store = openStore(mnt);
      const now = new Date().toISOString();
      let stored = 0;
      const e = await expectCode(() => {
        for (let i = 0; i < 500; i++, stored++) store.putJob({ id: `J${String(i).padStart(4, "0")}`, created_at: now, status: "RUNNING", config: { pad: "x".repeat(20_000) } });
      }, "disk_full");
      expect(e.message).toContain(join(mnt, "store", "data.mdb"));
      expect(stored).toBeGreaterThan(5);
      expect(store.listJobs().length).toBe(stored);
      await store.close();
      expect(evolve(mnt, ["store", "verify"]).code).toBe(0);
    } finally {
      umount(mnt);
    }
  });

  it("a read-only file system serves reads and refuses writes with store_read_only", async () => {
    const mnt = tmpfs("8m")!;
    try {
      const store = openStore(mnt);
      const job = createJob(store, jobConfig(3));
      await store.close();
      expect(spawnSync("mount", ["-o", "remount,ro", mnt]).status).toBe(0);
      const list = evolve(mnt, ["job", "list", "--json"]);
      expect(list.stderr).toBe("");
      expect(JSON.parse(list.stdout)[0]).toMatchObject({ id: job.id, n_trials: 3 });
      expect(evolve(mnt, ["store", "verify"]).code).toBe(0);
      const stop = evolve(mnt, ["gateway", "stop"]);
      expect(stop.code).toBe(2);
      expect(stop.stderr).toMatch(/^error\[store_read_only\]: the store at .* is on a read-only file system/);
    } finally {
      umount(mnt);
    }
  });
});

describe.skipIf(!canMount || spawnSync("setpriv", ["--version"]).status !== 0)("a home another user owns", () => {
  it("is refused even for reads, saying why (LMDB must record its readers in lock.mdb)", async () => {
    const { home } = await seeded();
    chmodSync(dir, 0o755);
    spawnSync("chmod", ["-R", "a+rX,a-w", home]);
    try {
      const r = spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", BUN, join(root, "main.ts"), "job", "list"], {
        encoding: "utf8",
        cwd: tmpdir(),
        env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", HOME: tmpdir() },
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(/^error\[store_read_only\]: cannot read the store at .* without write access to it: LMDB records every reader in lock\.mdb/);
    } finally {
      spawnSync("chmod", ["-R", "u+w", home]);
    }
  });
});

describe("store backup and verify", () => {
  it("backs up while another process writes; the copy verifies and restores the same records", async () => {
    const { home, jobs } = await seeded();
    // a writer appending trace events the whole time the backup runs: from before it starts until after it ends
    const stop = join(dir, `stop-${++n}`);
    const writer = spawn(BUN, ["-e", `
      const { existsSync } = await import("node:fs");
      const { openStore } = await import(${JSON.stringify(join(root, "engine/store/index.ts"))});
      const s = openStore(${JSON.stringify(home)});
      let i = 0;
      for (; !existsSync(${JSON.stringify(stop)}); i++) {
        s.appendEvents("T", [{ type: "x", data: { i } }]);
        if (i === 50) console.log("writing");
        if (i % 100 === 0) await new Promise((r) => setTimeout(r, 1));
      }
      await s.close();
      console.log("wrote " + i);
    `], { stdio: ["ignore", "pipe", "inherit"] });
    let said = "";
    writer.stdout!.on("data", (b) => (said += b));
    const exited = new Promise((ok) => writer.once("exit", ok));
    while (!said.includes("writing")) {
      expect(writer.exitCode, "the writer ended before writing").toBeNull();
      await new Promise((r) => setTimeout(r, 20));
    }
    const file = join(dir, `backup-${++n}.mdb`);
    const r = cli(home, ["store", "backup", file, "--json"]);
    writeFileSync(stop, "");
    await exited;
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ file, bytes: statSync(file).size });
    expect(Number(said.match(/wrote (\d+)/)?.[1])).toBeGreaterThan(50);

    const again = cli(home, ["store", "backup", file]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/^error\[usage\]: .* already exists/);

    // the restore steps of docs/store.md: the copy becomes data.mdb of a home, lock.mdb is not carried over
    const restored = join(dir, `home-${++n}`);
    mkdirSync(join(restored, "store"), { recursive: true });
    copyFileSync(file, dataFile(restored));
    const v = cli(restored, ["store", "verify", "--json"]);
    expect(v.code).toBe(0);
    const report = JSON.parse(v.stdout);
    expect(report.ok).toBe(true);
    expect(report.dbs.jobs).toEqual({ records: 3, bad: 0 });
    expect(report.dbs.trials.records).toBe(3 * 800);
    const list = cli(restored, ["job", "list", "--json"]);
    expect(JSON.parse(list.stdout).map((j: { id: string }) => j.id).sort()).toEqual([...jobs].sort());
  });

  it("classifies ENOSPC, EDQUOT and LMDB's short writes on a full disk", () => {
    expect(isDiskFull(Object.assign(new Error("x"), { code: "ENOSPC" }))).toBe(true);
    expect(isDiskFull(new Error("MDB_SOMETHING: No space left on device"))).toBe(true);
    expect(isDiskFull(new Error("ENOENT: no such file"))).toBe(false);
  });
});
