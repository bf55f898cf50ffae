import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DatasetInvalidError,
  deleteDataset,
  importTasks,
  listDatasets,
  parseDatasetRef,
  publishDataset,
  showDataset,
} from "./dataset.ts";
import { openStore, taskBlobDir, type Store } from "./store/index.ts";
import { taskDigest } from "./task/digest.ts";
import { expectCode } from "../tests/support/expect-code.ts";

const root = mkdtempSync(join(tmpdir(), "evolve-dataset-"));
let n = 0;
const prevHome = process.env.EVOLVE_HOME;

beforeAll(() => {
  process.env.EVOLVE_HOME = join(root, "unused-home");
});
afterAll(() => {
  if (prevHome === undefined) delete process.env.EVOLVE_HOME;
  else process.env.EVOLVE_HOME = prevHome;
  rmSync(root, { recursive: true, force: true });
});

const fresh = (what: string) => join(root, `${what}-${++n}`);

function write(dir: string, files: Record<string, string>, exec: string[] = []): void {
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), text);
    chmodSync(join(dir, p), exec.includes(p) ? 0o755 : 0o644);
  }
}

/** A tiny task the real validator accepts. */
function makeTask(dir: string, name: string, instruction = `Create /app/${name.split("/")[1]}.txt.\n`): void {
  write(
    dir,
    {
      "task.toml": `[task]\nname = "${name}"\n\n[agent]\ntimeout_sec = 600\n\n[verifier]\ntimeout_sec = 120\n`,
      "instruction.md": instruction,
      "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
      "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n",
    },
    ["tests/test.sh"],
  );
}

function makeDatasetDir(): string {
  const dir = fresh("ds");
  makeTask(join(dir, "hello"), "demo/hello");
  makeTask(join(dir, "world"), "demo/world");
  writeFileSync(join(dir, "README.md"), "not a task, ignored\n");
  return dir;
}

/** Every file under a folder with its bytes and mode, to prove a stored tree did not move. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(p);
      else out[p] = `${(statSync(join(dir, p)).mode & 0o777).toString(8)} ${readFileSync(join(dir, p), "utf8")}`;
    }
  };
  walk("");
  return out;
}

async function withStore<T>(home: string, fn: (s: Store) => Promise<T>): Promise<T> {
  const store = openStore(home);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

const blobs = (home: string) => (existsSync(join(home, "tasks")) ? readdirSync(join(home, "tasks")).sort() : []);

describe("taskDigest", () => {
  it("follows the documented algorithm exactly (a golden vector any implementation can check)", async () => {
    const dir = fresh("golden");
    write(dir, { "sub/b.sh": "hi", "a.txt": "hello" }, ["sub/b.sh"]);
    const expected = createHash("sha256").update("a.txt\0-\x005\0hello" + "sub/b.sh\0x\x002\0hi").digest("hex");
    expect(await taskDigest(dir)).toBe(`sha256:${expected}`);
  });

  it("depends on bytes, paths and exec bits only: not on mtimes, creation order or location", async () => {
    const a = fresh("digest");
    const b = fresh("digest");
    write(a, { "x/1.txt": "one", "x/2.txt": "two", "Z.md": "zed", "run.sh": "#!/bin/sh\n" }, ["run.sh"]);
    write(b, { "run.sh": "#!/bin/sh\n", "Z.md": "zed", "x/2.txt": "two", "x/1.txt": "one" }, ["run.sh"]);
    utimesSync(join(b, "x/1.txt"), new Date(2001, 1, 1), new Date(2001, 1, 1));
    mkdirSync(join(b, "empty-dir"));
    write(b, { ".git/HEAD": "ref: refs/heads/main\n", ".DS_Store": "junk", "x/.DS_Store": "junk" });
    const d = await taskDigest(a);
    expect(d).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await taskDigest(b)).toBe(d);

    writeFileSync(join(b, "x/2.txt"), "twO");
    expect(await taskDigest(b)).not.toBe(d);
    writeFileSync(join(b, "x/2.txt"), "two");
    expect(await taskDigest(b)).toBe(d);

    chmodSync(join(b, "Z.md"), 0o755);
    expect(await taskDigest(b)).not.toBe(d);
    chmodSync(join(b, "Z.md"), 0o644);

    write(b, { "x/3.txt": "" });
    expect(await taskDigest(b)).not.toBe(d);
    rmSync(join(b, "x/3.txt"));
    expect(await taskDigest(b)).toBe(d);
  });

  it("tells a moved file from the same bytes elsewhere", async () => {
    const a = fresh("digest");
    const b = fresh("digest");
    write(a, { "a/b": "x" });
    write(b, { "a_b": "x" });
    expect(await taskDigest(a)).not.toBe(await taskDigest(b));
  });

  it("refuses symbolic links and unreadable paths", async () => {
    const a = fresh("digest");
    write(a, { "real.txt": "x" });
    symlinkSync("real.txt", join(a, "link.txt"));
    const e = await expectCode(() => taskDigest(a), "task_symlink");
    expect(e.message).toContain("link.txt");
    await expectCode(() => taskDigest(join(a, "nope")), "task_unreadable");
  });
});

describe("a dataset entry that is a link", () => {
  it("is refused, not followed: nothing from outside is published or imported for a run", async () => {
    const home = fresh("home");
    const dir = makeDatasetDir();
    const outside = fresh("outside");
    makeTask(outside, "demo/planted");
    writeFileSync(join(outside, "planted.txt"), "a host file that must not reach the store\n");
    symlinkSync(outside, join(dir, "planted"));
    await withStore(home, async (store) => {
      const e = await expectCode(() => publishDataset(store, home, dir, { name: "demo", version: "1" }), "task_symlink");
      expect(e.message).toContain("planted");
      await expectCode(() => importTasks(store, home, dir, { secrets: new Set() }), "task_symlink");
      expect(listDatasets(store)).toEqual([]);
    });
    expect(blobs(home)).toEqual([]);
  });
});

describe("dataset names and refs", () => {
  it("parses name and name@version, refusing bad names and versions", async () => {
    expect(parseDatasetRef("my-org/swe.lite_2")).toEqual({ name: "my-org/swe.lite_2" });
    expect(parseDatasetRef("swe@1.0.0-rc1")).toEqual({ name: "swe", version: "1.0.0-rc1" });
    for (const bad of ["Swe", "-swe", "", "swe lite", "swe!", "@1"]) await expectCode(() => parseDatasetRef(bad), "dataset_name_invalid");
    for (const bad of ["swe@", "swe@1 0", "swe@1@2"]) await expectCode(() => parseDatasetRef(bad), "dataset_version_invalid");
  });

  it("publish refuses a bad name or version before touching the store", async () => {
    const home = fresh("home");
    const dir = makeDatasetDir();
    await withStore(home, async (store) => {
      await expectCode(() => publishDataset(store, home, dir, { name: "Demo", version: "1" }), "dataset_name_invalid");
      await expectCode(() => publishDataset(store, home, dir, { name: "demo", version: "" }), "dataset_version_invalid");
      await expectCode(() => publishDataset(store, home, dir, { name: "demo", version: "a b" }), "dataset_version_invalid");
      await expectCode(() => publishDataset(store, home, dir, { name: "demo", version: "1@2" }), "dataset_version_invalid");
      expect(listDatasets(store)).toEqual([]);
    });
    expect(blobs(home)).toEqual([]);
  });
});

describe("publish, list, show, delete", () => {
  const home = fresh("home");
  const dir = makeDatasetDir();
  let v1Digest = "";
  let helloBlob = "";
  let helloDigest = "";
  let helloSnapshot: Record<string, string> = {};

  it("publishes a folder of tasks, storing each task's files by digest", async () => {
    await withStore(home, async (store) => {
      const r = await publishDataset(store, home, dir, { name: "demo", version: "1" });
      expect(r.status).toBe("published");
      expect(r.dataset.tasks.map((t) => t.name)).toEqual(["demo/hello", "demo/world"]);
      expect(r.dataset.status).toBe("active");
      v1Digest = r.dataset.digest;
      const hello = r.dataset.tasks[0];
      expect(hello.digest).toBe(await taskDigest(join(dir, "hello")));
      helloDigest = hello.digest;
      helloBlob = taskBlobDir(home, hello.digest);
      helloSnapshot = snapshot(helloBlob);
      // The stored copy is the task, exec bit included.
      expect(helloSnapshot).toEqual(snapshot(join(dir, "hello")));
      expect(helloSnapshot["tests/test.sh"]).toMatch(/^755 /);
      expect(store.getTask(hello.digest)?.summary).toMatchObject({ agent_timeout_sec: 600, verifier_timeout_sec: 120, steps: 1 });
    });
    expect(blobs(home).length).toBe(2);
  });

  it("republishing the same content is a no-op", async () => {
    await withStore(home, async (store) => {
      const before = store.getDataset("demo", "1");
      const r = await publishDataset(store, home, dir, { name: "demo", version: "1" });
      expect(r.status).toBe("unchanged");
      expect(r.dataset).toEqual(before);
    });
  });

  it("refuses other content under a published version, and the stored version stays intact", async () => {
    writeFileSync(join(dir, "hello", "instruction.md"), "Create /app/hello.txt, please.\n");
    await withStore(home, async (store) => {
      const before = store.getDataset("demo", "1");
      const e = await expectCode(() => publishDataset(store, home, dir, { name: "demo", version: "1" }), "dataset_version_exists");
      expect(e.exit).toBe(1);
      expect(e.hint).toMatch(/version/);
      expect(store.getDataset("demo", "1")).toEqual(before);
      expect(showDataset(store, "demo@1").dataset.digest).toBe(v1Digest);
    });
    expect(snapshot(helloBlob)).toEqual(helloSnapshot);
    expect(blobs(home).length).toBe(2);
  });

  it("publishes the new content as a new version, storing only the task that changed", async () => {
    await withStore(home, async (store) => {
      const r = await publishDataset(store, home, dir, { name: "demo", version: "2" });
      expect(r.status).toBe("published");
      expect(r.dataset.digest).not.toBe(v1Digest);
      const other = await publishDataset(store, home, join(dir, "world"), { name: "solo", version: "1" });
      expect(other.dataset.tasks.map((t) => t.name)).toEqual(["demo/world"]);
    });
    expect(blobs(home).length).toBe(3);
  });

  it("lists every version newest first, and shows a version with its tasks' summaries", async () => {
    await withStore(home, async (store) => {
      const rows = listDatasets(store);
      expect(rows.map((r) => `${r.name}@${r.version}:${r.task_count}`)).toEqual(["solo@1:1", "demo@2:2", "demo@1:2"]);
      expect(rows[0].status).toBe("active");
      const newest = showDataset(store, "demo");
      expect(newest.dataset.version).toBe("2");
      expect(newest.tasks.map((t) => t.name)).toEqual(["demo/hello", "demo/world"]);
      expect(newest.tasks[0].summary).toMatchObject({ network_mode: "public", verifier_mode: "shared", gpus: 0, docker_image: null });
      expect(showDataset(store, "demo@1").dataset.digest).toBe(v1Digest);
      const e = await expectCode(() => showDataset(store, "demo@3"), "dataset_not_found");
      expect(e.exit).toBe(2);
      await expectCode(() => showDataset(store, "nope"), "dataset_not_found");
    });
  });

  it("deleting a version removes only the task files nothing else uses", async () => {
    await withStore(home, async (store) => {
      const v2 = store.getDataset("demo", "2")!;
      const changedHello = v2.tasks[0].digest;
      const r = deleteDataset(store, "demo@2");
      expect(r.versions).toEqual(["demo@2"]);
      // world is still in demo@1 and solo@1; the edited hello was only in demo@2.
      expect(r.tasks_removed).toEqual([changedHello]);
      expect(existsSync(taskBlobDir(home, changedHello))).toBe(false);
      expect(store.getTask(changedHello)).toBeUndefined();
      expect(showDataset(store, "demo").dataset.version).toBe("1");
      expect(snapshot(helloBlob)).toEqual(helloSnapshot);
    });
    expect(blobs(home).length).toBe(2);
  });

  it("keeps task files a trial still refers to", async () => {
    await withStore(home, async (store) => {
      const world = store.getDataset("solo", "1")!.tasks[0].digest;
      const now = new Date().toISOString();
      store.putTrial({
        id: "t1", job_id: "j1", task_digest: world, agent: "oracle", status: "SCORED",
        phase_timings: {}, created_at: now, updated_at: now,
      });
      const r = deleteDataset(store, "demo");
      expect(r.versions).toEqual(["demo@1"]);
      expect(r.tasks_removed).toEqual([helloDigest]);
      expect(existsSync(helloBlob)).toBe(false);
      const r2 = deleteDataset(store, "solo");
      expect(r2.tasks_removed).toEqual([]);
      expect(existsSync(taskBlobDir(home, world))).toBe(true);
      expect(listDatasets(store)).toEqual([]);
      await expectCode(() => deleteDataset(store, "demo"), "dataset_not_found");
    });
  });

  it("keeps a tombstone: other content under a deleted version is refused, its own content restores it and its files", async () => {
    await withStore(home, async (store) => {
      // demo@1 was deleted above and its hello blob collected; the folder now holds other content for hello
      const tomb = store.getDataset("demo", "1")!;
      expect(tomb).toMatchObject({ status: "deleted", digest: v1Digest });
      expect(tomb.deleted_at).toBeDefined();
      const e = await expectCode(() => publishDataset(store, home, dir, { name: "demo", version: "1" }), "dataset_version_deleted");
      expect(e.exit).toBe(1);
      expect(store.getDataset("demo", "1")).toEqual(tomb);
      await expectCode(() => showDataset(store, "demo@1"), "dataset_not_found");
      // deleting a deleted version again finds nothing
      await expectCode(() => deleteDataset(store, "demo@1"), "dataset_not_found");
      writeFileSync(join(dir, "hello", "instruction.md"), "Create /app/hello.txt.\n");
      const r = await publishDataset(store, home, dir, { name: "demo", version: "1" });
      expect(r.status).toBe("restored");
      expect(r.dataset).toMatchObject({ status: "active", digest: v1Digest, created_at: tomb.created_at });
      expect(r.dataset.deleted_at).toBeUndefined();
      expect(snapshot(helloBlob)).toEqual(helloSnapshot);
      expect(showDataset(store, "demo@1").tasks.map((t) => t.name)).toEqual(["demo/hello", "demo/world"]);
      expect(listDatasets(store).map((d) => `${d.name}@${d.version}`)).toEqual(["demo@1"]);
      expect(store.verify().ok).toBe(true);
    });
  });
});

describe("publish refusals", () => {
  it("refuses the whole publish when any task has an error finding, listing every task's report", async () => {
    const home = fresh("home");
    const dir = fresh("ds");
    makeTask(join(dir, "good"), "demo/good");
    makeTask(join(dir, "bad"), "demo/bad");
    rmSync(join(dir, "bad", "tests"), { recursive: true });
    await withStore(home, async (store) => {
      const err = await publishDataset(store, home, dir, { name: "demo", version: "1" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DatasetInvalidError);
      const e = err as DatasetInvalidError;
      expect(e.code).toBe("dataset_invalid");
      expect(e.exit).toBe(1);
      expect(e.message).toBe("1 of 2 tasks has errors; nothing was published");
      expect(e.reports.map((r) => [r.name, r.ok])).toEqual([["demo/bad", false], ["demo/good", true]]);
      expect(e.reports[0].findings.map((f) => f.code)).toContain("test_script_missing");
      expect(listDatasets(store)).toEqual([]);
      expect(store.listTasks()).toEqual([]);
    });
    expect(blobs(home)).toEqual([]);
  });

  it("counts a sub-folder without task.toml as a broken task rather than skipping it", async () => {
    const home = fresh("home");
    const dir = makeDatasetDir();
    mkdirSync(join(dir, "typo"));
    writeFileSync(join(dir, "typo", "task.tml"), "");
    await withStore(home, async (store) => {
      const e = (await publishDataset(store, home, dir, { name: "demo", version: "1" }).catch((x: unknown) => x)) as DatasetInvalidError;
      expect(e).toBeInstanceOf(DatasetInvalidError);
      expect(e.reports.find((r) => !r.ok)?.findings.map((f) => f.code)).toContain("task_toml_missing");
    });
  });

  it("refuses two tasks with the same name", async () => {
    const home = fresh("home");
    const dir = fresh("ds");
    makeTask(join(dir, "one"), "demo/same", "One.\n");
    makeTask(join(dir, "two"), "demo/same", "Two.\n");
    await withStore(home, async (store) => {
      const e = await expectCode(() => publishDataset(store, home, dir, { name: "demo", version: "1" }), "dataset_task_duplicate");
      expect(e.message).toContain("demo/same");
      expect(listDatasets(store)).toEqual([]);
    });
  });

  it("refuses a folder with no tasks, and a path that is not a folder", async () => {
    const home = fresh("home");
    const empty = fresh("ds");
    mkdirSync(empty);
    await withStore(home, async (store) => {
      await expectCode(() => publishDataset(store, home, empty, { name: "demo", version: "1" }), "dataset_empty");
      await expectCode(() => publishDataset(store, home, join(empty, "missing"), { name: "demo", version: "1" }), "dataset_dir_invalid");
    });
  });

  it("applies the home's configured ceilings", async () => {
    const home = fresh("home");
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, "config.toml"), "[ceilings]\ncpus = 2\n");
    const dir = fresh("ds");
    makeTask(dir, "demo/big");
    writeFileSync(join(dir, "task.toml"), readFileSync(join(dir, "task.toml"), "utf8") + "\n[environment]\ncpus = 4\n");
    await withStore(home, async (store) => {
      const e = (await publishDataset(store, home, dir, { name: "demo", version: "1" }).catch((x: unknown) => x)) as DatasetInvalidError;
      expect(e).toBeInstanceOf(DatasetInvalidError);
      expect(e.reports[0].findings.map((f) => f.code)).toContain("resources_exceed_ceiling");
    });
  });
});
