/**
 * Ends a vitest run with one plain line, `tests: N passed, N failed, N skipped`, the closing line CI reads to
 * know that tests ran (vitest's own summary is decorated and not in that shape).
 */
import type { Reporter, TestModule } from "vitest/node";

export default class PlainSummary implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else skipped++;
      }
    }
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
