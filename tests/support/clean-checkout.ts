/**
 * Per-file setup of both tiers (vitest.config.ts): fails the file after which a `jobs/` folder (the Harbor job
 * folders `evolve run` writes beside where it runs) appeared at the repository root, or grew. A test that runs jobs
 * runs them in a temp dir (or with `-o` there), so a test run leaves the checkout as it found it. What appeared is
 * removed, so one leak fails one file rather than every file after it (a file running beside it in another worker
 * may be the one that wrote it: the message says so).
 */
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll } from "vitest";

const jobs = join(resolve(__dirname, "..", ".."), "jobs");
const entries = () => (existsSync(jobs) ? readdirSync(jobs) : []);
const existed = existsSync(jobs);
const before = new Set(entries());

// registered before the file's own hooks, so it runs after all of them (after-hooks run in reverse order)
afterAll(() => {
  const now = existsSync(jobs);
  const added = entries().filter((e) => !before.has(e));
  if ((!now || existed) && added.length === 0) return;
  if (!existed) rmSync(jobs, { recursive: true, force: true });
  else for (const e of added) rmSync(join(jobs, e), { recursive: true, force: true });
  throw new Error(
    `${jobs} ${existed ? `gained ${added.join(", ")}` : "appeared"} during this file (or one running beside it): run evolve in a temp dir ` +
      "(cwd) or give it -o <temp dir>, so tests leave the checkout clean",
  );
});
