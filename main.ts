#!/usr/bin/env bun
/**
 * evolve's entry point. It only wires arguments to command modules; each command module is imported when its
 * command runs, so `evolve --version` and `--help` never load LMDB, zod or the validator.
 */
import pkg from "./package.json" with { type: "json" };

const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  process.stdout.write(`evolve ${pkg.version}\n`);
} else {
  const { run } = await import("./commands/cli.ts");
  process.exitCode = await run(process.argv, pkg.version);
}
