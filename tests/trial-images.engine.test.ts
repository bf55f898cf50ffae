/**
 * Task images keyed by environment content on real podman: tasks whose environment/ is identical share one
 * `evolve-env:<key>` image, built once even when their trials start together; a different environment is its own
 * image; `evolve gc --images` frees the images nothing needs and keeps the ones a box uses or an unsettled trial
 * will need. Every Dockerfile here carries this run's id, so no other test's images can satisfy (or count as) ours.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importTasks, type StoredTask } from "../engine/dataset.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { LABEL_ENV_KEY, LABEL_IMAGE_HOME, type Engine } from "../engine/driver/types.ts";
import { createJob, runJob, type JobConfig } from "../engine/job/job.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import { envImageKey, envImageTag } from "../engine/trial/box.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";

const root = resolve(__dirname, "..");
const RUN = `img${process.pid}${Date.now().toString(36)}`;
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;

let scratch: string;
let home: string;
let store: Store;
let engine: Engine;
/** Every build the engine was asked for, by tag. */
const builds: string[] = [];

/** A nop-solvable task named `name` whose Dockerfile is the same for every task given the same `env`. */
function writeTask(name: string, env: string): string {
  const dir = join(scratch, "tasks", name);
  for (const d of ["environment", "tests", "solution"]) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, "task.toml"), `[task]\nname = "images/${name}"\n\n[environment]\nnetwork_mode = "no-network"\n`);
  writeFileSync(join(dir, "instruction.md"), `Task ${name}: nothing to do.\n`);
  // the RUN makes each build last a few seconds: trials that start together surely overlap it
  writeFileSync(join(dir, "environment", "Dockerfile"), `FROM debian:bookworm-slim\nRUN echo ${RUN} ${env} && sleep 3\nWORKDIR /app\n`);
  writeFileSync(join(dir, "tests", "test.sh"), "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n");
  writeFileSync(join(dir, "solution", "solve.sh"), "#!/bin/bash\ntrue\n");
  for (const f of ["tests/test.sh", "solution/solve.sh"]) chmodSync(join(dir, f), 0o755);
  return dir;
}

async function stored(name: string, env: string): Promise<StoredTask> {
  return (await importTasks(store, home, writeTask(name, env), { secrets: new Set() })).tasks[0];
}

function config(tasks: StoredTask[], attempts: number, concurrency: number, forceBuild = false): JobConfig {
  return {
    agent: { name: "nop" }, attempts, concurrency, timeout_multiplier: 1, secret_names: [], force_build: forceBuild, max_retries: 0,
    source: { kind: "path", path: scratch }, tasks: tasks.map((t) => ({ name: t.name, digest: t.digest })),
  };
}

async function tagOf(t: StoredTask): Promise<string> {
  return envImageTag(await envImageKey(t.digest, t.dir, join(t.dir, "environment")));
}

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-images-"));
  home = join(scratch, "home");
  store = openStore(home);
  if (!hasPodman) return;
  const real = await openEngine({ kind: "podman", home });
  // the real engine, with each build it is asked for counted
  const build = (opts: Parameters<Engine["build"]>[0]) => {
    builds.push(opts.tag);
    return real.build(opts);
  };
  engine = new Proxy(real, {
    get(target, prop) {
      if (prop === "build") return build;
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
});

afterAll(async () => {
  if (engine) {
    await settleRemovals();
    for (const img of await engine.listImages({ [LABEL_IMAGE_HOME]: home })) await engine.removeImage?.(img.id);
    await engine.close();
  }
  await store?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe.skipIf(!hasPodman)("task images keyed by environment (needs podman and debian:bookworm-slim)", () => {
  let a: StoredTask;
  let b: StoredTask;
  let c: StoredTask;

  it("builds one image for tasks with one environment, even when their trials start together, and one per other environment", async () => {
    a = await stored("a", "shared");
    b = await stored("b", "shared");
    c = await stored("c", "other");
    expect(a.digest).not.toBe(b.digest);
    // six trials at once: a and b (one environment) twice each, c (another) twice
    const job = createJob(store, config([a, b, c], 2, 6));
    const trials = await runJob(job.id, { store, engine, home, runTrial, secrets: {} });
    expect(trials.map((t) => `${t.status} ${t.exception?.message ?? ""}`.trim())).toEqual(Array(6).fill("SCORED"));
    expect(await tagOf(a)).toBe(await tagOf(b));
    expect(await tagOf(c)).not.toBe(await tagOf(a));
    expect(builds.sort()).toEqual([await tagOf(a), await tagOf(c)].sort());
    const images = await engine.listImages({ [LABEL_IMAGE_HOME]: home });
    expect(images.flatMap((i) => i.tags).sort()).toEqual([`localhost/${await tagOf(a)}`, `localhost/${await tagOf(c)}`].sort());
    expect(images.every((i) => i.labels[LABEL_ENV_KEY]?.startsWith("sha256:"))).toBe(true);

    // a later job finds them cached: nothing is built again
    const again = createJob(store, config([a, c], 1, 2));
    expect((await runJob(again.id, { store, engine, home, runTrial, secrets: {} })).map((t) => t.status)).toEqual(["SCORED", "SCORED"]);
    expect(builds).toHaveLength(2);

    // --force-build rebuilds the shared image once for the job, not once per trial; the next forced job again once
    for (const n of [3, 4]) {
      const forced = createJob(store, config([a, b], 1, 2, true));
      expect((await runJob(forced.id, { store, engine, home, runTrial, secrets: {} })).map((t) => t.status)).toEqual(["SCORED", "SCORED"]);
      expect(builds).toHaveLength(n);
      expect(builds.at(-1)).toBe(await tagOf(a));
    }
  });

  it("gc --images frees an image nothing needs and keeps one a box uses and one an unsettled trial needs", async () => {
    const d = await stored("d", "done");
    const done = createJob(store, config([d], 1, 1));
    expect((await runJob(done.id, { store, engine, home, runTrial, secrets: {} }))[0].status).toBe("SCORED");
    await settleRemovals();
    // a's image: a live box runs from it (not one of evolve's, so gc leaves the box alone)
    const box = await engine.create({ image: await tagOf(a), cmd: ["sleep", "300"], labels: { "dev.evolve.test": RUN }, network: "none" });
    await engine.start(box);
    // c's image: a trial that has not run yet needs it
    createJob(store, config([c], 1, 1));
    try {
      const r = spawnSync(join(root, "node_modules/.bin/bun"), [join(root, "main.ts"), "gc", "--images", "--json"], {
        encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeout: 120_000,
      });
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      const doc = JSON.parse(r.stdout);
      // (images a forced rebuild untagged, if it made new ones, go too)
      expect(doc.images.filter((i: { tags: string[] }) => i.tags.length > 0).map((i: { tags: string[] }) => i.tags[0])).toEqual([`localhost/${await tagOf(d)}`]);
      expect(doc.freed_bytes).toBeGreaterThan(0);
      const kept = Object.fromEntries(doc.kept_images.filter((k: { tags: string[] }) => k.tags.length > 0).map((k: { tags: string[]; why: string }) => [k.tags[0], k.why]));
      expect(kept).toEqual({ [`localhost/${await tagOf(a)}`]: "in_use", [`localhost/${await tagOf(c)}`]: "needed" });
      expect(await engine.imageExists(await tagOf(d))).toBe(false);
      expect(await engine.imageExists(await tagOf(a))).toBe(true);
      expect(await engine.imageExists(await tagOf(c))).toBe(true);
    } finally {
      await engine.remove(box);
    }
    // the box gone, a's image is free too; the human output says what it frees
    const human = spawnSync(join(root, "node_modules/.bin/bun"), [join(root, "main.ts"), "gc", "--images"], {
      encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeout: 120_000,
    });
    expect(human.status).toBe(0);
    expect(human.stdout).toContain(`removed image localhost/${await tagOf(a)}`);
    expect(human.stdout).toMatch(/1 image\(s\) removed, freeing \d+\.\d MB; kept 1 an unsettled trial needs and 0 a container uses/);
  });
});
