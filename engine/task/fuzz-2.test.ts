/**
 * Seeded fuzzing of the task validator, shard 2 of 2 (the machinery and what each case checks:
 * tests/support/task-fuzz.ts). Reproduce a failure with EVOLVE_FUZZ_SEED=<seed> (and EVOLVE_FUZZ_CASES=<n>).
 */
import { describeFuzzShard } from "../../tests/support/task-fuzz.ts";

describeFuzzShard(1, 2);
