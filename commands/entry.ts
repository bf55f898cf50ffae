/**
 * The whole of a CLI invocation as a function of argv, for main.ts (and tests/support/cli-host.ts, which runs many
 * invocations in one process). `--version` alone is answered before any command module loads, so it never pays
 * for LMDB, zod or the validator; everything else goes through the command tree (cli.ts).
 */

/** Runs one invocation (`argv` as process.argv: runtime, script, then the arguments); returns its exit status. */
export async function main(argv: string[], version: string): Promise<number> {
  const args = argv.slice(2);
  if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
    process.stdout.write(`evolve ${version}\n`);
    return 0;
  }
  const { run } = await import("./cli.ts");
  return run(argv, version);
}
