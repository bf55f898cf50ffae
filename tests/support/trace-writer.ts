/**
 * Child process for engine/trace/store.test.ts: appends `n` batches of events to a trial's trace through the store's
 * writer, a few milliseconds apart, while the test reads the trace from its own process.
 * Usage: bun tests/support/trace-writer.ts <home> <trial-id> <n>
 */
import { chunkEvent } from "../../engine/trace/events.ts";
import { openTraceWriter } from "../../engine/trace/store.ts";

const [home, trialId, count] = process.argv.slice(2);
const w = openTraceWriter(home, trialId);
for (let i = 0; i < Number(count); i++) {
  w.append(Array.from({ length: (i % 3) + 1 }, (_, k) => chunkEvent("agent_message_chunk", `batch ${i} part ${k} ${"x".repeat(i * 37)}`)));
  await new Promise((r) => setTimeout(r, 2));
}
w.close();
console.log("done");
