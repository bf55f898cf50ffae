/**
 * The task validator on the hostile shapes of scripts/bench/validate.ts (1 MB of nesting, dotted keys, headers,
 * continuations, blanks; FIFOs, /dev/zero, sparse files), each on a fixture the seed picks, within a time budget
 * (tests/support/task-fuzz.ts).
 */
import { describeShapes } from "../../tests/support/task-fuzz.ts";

describeShapes();
