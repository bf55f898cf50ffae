/**
 * `run --executor slurm --ship images|none` (issue 24 §1): kept in the job's config so `job resume` ships the same
 * way; any other value, or --ship without --executor slurm, is refused before anything runs.
 */
import { describe, expect, it } from "vitest";
import { executorConfig } from "../commands/executor.ts";
import { expectCode } from "./support/expect-code.ts";

describe("--ship", () => {
  it("is recorded for a Slurm job and refused elsewhere or with another value", () => {
    expect(executorConfig({ executor: "slurm", ship: "images" })).toEqual({ kind: "slurm", ship: "images" });
    expect(executorConfig({ executor: "slurm" })).toEqual({ kind: "slurm" });
    expectCode(() => executorConfig({ executor: "slurm", ship: "all" }), "executor_invalid");
    expectCode(() => executorConfig({ ship: "images" }), "executor_invalid");
  });
});
