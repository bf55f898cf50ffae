/**
 * Child process for engine/store/multiprocess.test.ts: writes `n` jobs, trials and trace-event batches into the
 * store of `<home>`, tagged with `<tag>`, while another copy of itself does the same. It prints "ready" and waits
 * for `<home>/go` so both writers really overlap, then prints one JSON line with what it wrote.
 * Usage: bun tests/support/store-writer.ts <home> <tag> <n>
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { openStore } from "../../engine/store/index.ts";

const [home, tag, count] = process.argv.slice(2);
const n = Number(count);
const store = openStore(home);
console.log("ready");
const deadline = Date.now() + 30_000;
while (!existsSync(join(home, "go"))) {
  if (Date.now() > deadline) throw new Error("never told to go");
  await new Promise((r) => setTimeout(r, 5));
}

let events = 0;
const now = () => new Date().toISOString();
for (let i = 0; i < n; i++) {
  const id = `${tag}-${i}`;
  store.putJob({ id, created_at: now(), status: "RUNNING", config: { tag, i } });
  store.putTrial({
    id,
    job_id: `job-${tag}`,
    task_digest: `sha256:${"0".repeat(64)}`,
    agent: "nop",
    status: "RUNNING",
    phase_timings: {},
    created_at: now(),
    updated_at: now(),
  });
  // Batches of 1–3 events into the one trial both writers share.
  const batch = Array.from({ length: (i % 3) + 1 }, (_, k) => ({ type: "mark", data: { tag, i, k } }));
  store.appendEvents("shared-trial", batch);
  events += batch.length;
  if (i % 50 === 0) await new Promise((r) => setTimeout(r, 0));
}
await store.close();
console.log(JSON.stringify({ tag, n, events }));
