import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openStore } from "./index.ts";

const BUN = resolve("node_modules/.bin/bun");
const WRITER = resolve("tests/support/store-writer.ts");
const N = 300;

let home: string;
const prevHome = process.env.EVOLVE_HOME;
beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-store-mp-"));
  process.env.EVOLVE_HOME = home;
});
afterAll(() => {
  if (prevHome === undefined) delete process.env.EVOLVE_HOME;
  else process.env.EVOLVE_HOME = prevHome;
  rmSync(home, { recursive: true, force: true });
});

interface Child {
  ready: Promise<void>;
  done: Promise<{ tag: string; n: number; events: number }>;
}

function writer(tag: string): Child {
  const p = spawn(BUN, [WRITER, home, tag, String(N)], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  let onReady!: () => void;
  const ready = new Promise<void>((r) => (onReady = r));
  p.stdout.on("data", (d) => {
    out += d;
    if (out.includes("ready\n")) onReady();
  });
  p.stderr.on("data", (d) => (err += d));
  const done = new Promise<{ tag: string; n: number; events: number }>((res, rej) =>
    p.on("close", (code) => {
      onReady();
      if (code !== 0) rej(new Error(`writer ${tag} exited ${code}: ${err}`));
      else res(JSON.parse(out.trim().split("\n").pop()!));
    }),
  );
  return { ready, done };
}

it("two processes writing one store at once lose nothing, and trace positions stay unique and gapless", async () => {
  // Create the store first so neither child races to create the environment files.
  await openStore(home).close();
  const a = writer("a");
  const b = writer("b");
  await Promise.all([a.ready, b.ready]);
  writeFileSync(join(home, "go"), "");
  const results = await Promise.all([a.done, b.done]);
  const totalEvents = results.reduce((s, r) => s + r.events, 0);

  const store = openStore(home);
  try {
    for (const tag of ["a", "b"]) {
      const trials = store.listTrials(`job-${tag}`);
      expect(trials.length).toBe(N);
      for (let i = 0; i < N; i++) expect(store.getJob(`${tag}-${i}`)?.config).toEqual({ tag, i });
    }
    expect(store.listJobs().length).toBe(2 * N);

    const events = store.readEvents("shared-trial");
    expect(events.length).toBe(totalEvents);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: totalEvents }, (_, i) => i));
    // Each writer's events arrive whole and in its own order, whatever the interleaving.
    for (const tag of ["a", "b"]) {
      const mine = events.map((e) => e.data as { tag: string; i: number; k: number }).filter((d) => d.tag === tag);
      const expected = Array.from({ length: N }, (_, i) => Array.from({ length: (i % 3) + 1 }, (_, k) => ({ tag, i, k }))).flat();
      expect(mine).toEqual(expected);
    }
    // Batches are atomic: a batch's events sit next to each other.
    for (let s = 0; s < events.length; s++) {
      const d = events[s].data as { k: number; i: number; tag: string };
      if (d.k > 0) expect(events[s - 1].data).toEqual({ ...d, k: d.k - 1 });
    }
    expect(store.lastEventSeq("shared-trial")).toBe(totalEvents - 1);
  } finally {
    await store.close();
  }
});

it("a reader sees another process's commit after refresh(), without yielding", async () => {
  const store = openStore(home);
  try {
    expect(store.getJob("late-0")).toBeUndefined();
    writeFileSync(join(home, "go"), "");
    const r = spawnSync(BUN, [WRITER, home, "late", "1"], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    store.refresh();
    expect(store.getJob("late-0")?.config).toEqual({ tag: "late", i: 0 });
  } finally {
    await store.close();
  }
});
