#!/usr/bin/env bun
/**
 * evolve's entry point. It only wires arguments to command modules (commands/entry.ts); each command module is
 * imported when its command runs, so `evolve --version` and `--help` never load LMDB, zod or the validator.
 */
import pkg from "./package.json" with { type: "json" };
import { main } from "./commands/entry.ts";

process.exitCode = await main(process.argv, pkg.version);
