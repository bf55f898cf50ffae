import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // unit tests of one room live beside its code (engine/**, gateway/**); the rest, and every engine test, under tests/
    include: ["tests/**/*.test.ts", "engine/**/*.test.ts", "gateway/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default", "./tests/support/summary-reporter.ts"],
    // every file: a test that runs jobs must not leave ./jobs/ in the checkout
    setupFiles: ["./tests/support/clean-checkout.ts"],
  },
});
