/**
 * The command tree. Parsing and help live here; every action lazily imports the module that does its work so
 * start-up stays cheap. Exit codes: 0 success, 1 the command ran and found problems, 2 usage or environment error.
 */
import { Command, CommanderError } from "commander";
import { exitQuietlyOnBrokenPipe } from "../engine/runtime.ts";
import { formatError, reportError } from "./output.ts";

const collect = (v: string, prev: string[]) => [...prev, v];

function examples(lines: string[]): string {
  return `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;
}

/** Builds the command tree; `setExit` receives each action's exit status. */
export function buildProgram(version: string, setExit: (code: number) => void): Command {
  const program = new Command("evolve")
    .description("Evaluate AI agents in containers and evolve the harness around them.")
    .version(`evolve ${version}`, "-V, --version", "print the version")
    .helpOption("-h, --help", "show help")
    .showSuggestionAfterError(true)
    // Program options only before the command name, so `dataset publish --version 1.0` is the dataset's version.
    .enablePositionalOptions()
    .addHelpText(
      "after",
      examples([
        "evolve task validate fixtures/tasks/valid/*",
        "evolve task init my-task --steps 2",
        "evolve dataset publish ./tasks --name demo --version 1.0",
        "evolve dataset list --json",
      ]) + "\nEnvironment:\n  EVOLVE_HOME   where evolve keeps its store (default ~/.evolve)\n  NO_COLOR      disable colour\n",
    );

  const task = program.command("task").description("validate and scaffold Harbor-format tasks");
  task
    .command("validate")
    .description("check task directories against the task format; exit 1 if any task is refused")
    .argument("<dir...>", "task directories")
    .option("--json", "print the findings as one JSON document")
    .option("--secret <name>", "a secret the job will attach (satisfies ${NAME} templates); repeatable", collect, [])
    .option("--strict", "also fail on warnings")
    .addHelpText(
      "after",
      examples([
        "evolve task validate my-task",
        "evolve task validate tasks/* --json | jq '.tasks[] | select(.ok | not) | .dir'",
        "evolve task validate my-task --secret GITHUB_TOKEN",
      ]),
    )
    .action(async (dirs: string[], opts) => setExit(await (await import("./task.ts")).validateCommand(dirs, opts)));
  task
    .command("init")
    .description("write a new task that validates")
    .argument("<dir>", "directory to create (must not exist or be empty)")
    .option("--steps <n>", "make a multi-step task with N steps", (v) => Number(v))
    .option("--name <org/name>", "the task's [task] name (default: local/<dir name>)")
    .addHelpText("after", examples(["evolve task init hello", "evolve task init migrate --steps 2 --name acme/migrate"]))
    .action(async (dir: string, opts) => setExit(await (await import("./task.ts")).initCommand(dir, opts)));

  const dataset = program.command("dataset").description("publish and browse datasets (name@version)");
  dataset
    .command("publish")
    .description("validate every task in a folder and store them as a dataset version")
    .argument("<dir>", "a folder of task directories (or one task directory)")
    .requiredOption("--name <name>", "dataset name")
    .requiredOption("--version <version>", "dataset version")
    .option("--json", "print the result as JSON")
    .addHelpText("after", examples(["evolve dataset publish ./tasks --name demo --version 1.0"]))
    .action(async (dir: string, opts) => setExit(await (await import("./dataset.ts")).publishCommand(dir, opts)));
  dataset
    .command("list")
    .description("list dataset versions")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve dataset list", "evolve dataset list --json | jq '.[].name'"]))
    .action(async (opts) => setExit(await (await import("./dataset.ts")).listCommand(opts)));
  dataset
    .command("show")
    .description("show a dataset version and its tasks")
    .argument("<ref>", "name or name@version (default: newest version)")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve dataset show demo", "evolve dataset show demo@1.0 --json"]))
    .action(async (ref: string, opts) => setExit(await (await import("./dataset.ts")).showCommand(ref, opts)));
  dataset
    .command("delete")
    .description("delete a dataset version, or every version of a name")
    .argument("<ref>", "name@version, or name for all versions")
    .option("--json", "print what was deleted as JSON")
    .addHelpText("after", examples(["evolve dataset delete demo@1.0", "evolve dataset delete demo"]))
    .action(async (ref: string, opts) => setExit(await (await import("./dataset.ts")).deleteCommand(ref, opts)));

  return program;
}

function configure(cmd: Command): void {
  cmd.exitOverride();
  cmd.configureOutput({ outputError: () => {} });
  for (const sub of cmd.commands) configure(sub);
}

/** Parses argv and runs the command; returns the process exit status. */
export async function run(argv: string[], version: string): Promise<number> {
  exitQuietlyOnBrokenPipe();
  let code = 0;
  const program = buildProgram(version, (c) => (code = c));
  configure(program);
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (["commander.helpDisplayed", "commander.version"].includes(err.code)) return 0;
      // A group (`evolve task`) run without a subcommand: commander already printed its help to stderr.
      if (err.code === "commander.help") return 2;
      const message = err.message.replace(/^error: /, "");
      process.stderr.write(formatError("usage", message, "see `evolve --help` or `evolve <command> --help`") + "\n");
      return 2;
    }
    return reportError(err);
  }
}
