/** A job's config for tests that record jobs without running them: `tasks` fake tasks × `attempts`, oracle. */
import type { JobConfig } from "../../engine/job/job.ts";

export const jobConfig = (tasks = 1, attempts = 1): JobConfig => ({
  agent: { name: "oracle" },
  attempts,
  concurrency: 1,
  timeout_multiplier: 1,
  secret_names: [],
  force_build: false,
  max_retries: 0,
  source: { kind: "path", path: "/nowhere" },
  tasks: Array.from({ length: tasks }, (_, i) => ({ name: `t${i}`, digest: `sha256:${String(i).padStart(64, "0")}` })),
});
