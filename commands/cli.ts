/**
 * The command tree. Parsing and help live here; every action lazily imports the module that does its work so
 * start-up stays cheap. Exit codes: 0 success, 1 the command ran and found problems, 2 usage or environment error.
 */
import { Command, CommanderError, Option } from "commander";
import { JOB_DEFAULTS } from "../engine/job/job-config.ts";
import { exitQuietlyOnBrokenPipe } from "../engine/runtime.ts";
import { COUNT, numberFlag, PORT, POSITIVE, POSITIVE_INT } from "./flags.ts";
import { formatError, reportError } from "./output.ts";
import { addTrialCommands } from "./trial-cli.ts";
import { addTraceCommands } from "./trace-cli.ts";

const collect = (v: string, prev: string[]) => [...prev, v];

function examples(lines: string[]): string {
  return `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;
}

/**
 * Builds the command tree; `setExit` receives each action's exit status. `agentNames`: every agent `-a` takes, for
 * `run`'s help; without them the help names where to find them (the list costs the harness registry, see run).
 */
export function buildProgram(version: string, setExit: (code: number) => void, agentNames?: readonly string[]): Command {
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
    .option("--steps <n>", "make a multi-step task with N steps", numberFlag("--steps", { what: "whole number from 1 to 50", integer: true, min: 1, max: 50, example: "2", code: "task_init_steps_invalid" }))
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
    .option("--org <org>", "the organization a new dataset lands in (default: `auth org use`'s, else personal); a new version stays where its dataset is")
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
    .option("-y, --yes", "delete without asking (needed when there is no terminal to ask on)")
    .option("--json", "print what was deleted as JSON")
    .addHelpText(
      "after",
      "\nA deleted version's name is kept: publishing it again with the same content restores it, other content is refused.\n" +
        examples(["evolve dataset delete demo@1.0", "evolve dataset delete demo --yes"]),
    )
    .action(async (ref: string, opts) => setExit(await (await import("./dataset.ts")).deleteCommand(ref, opts)));

  const engineOpt = () =>
    new Option("--engine <engine>", "container engine (default: $EVOLVE_ENGINE, else podman if installed, else docker)").choices([
      "podman",
      "docker",
    ]);
  const addRunOptions = (cmd: Command, json: string) =>
    cmd
      .option("-c, --config <file>", "a run config file (TOML): the flags below as keys, e.g. n-concurrent = 8; flags given here win")
      .option("-p, --path <dir>", "a task directory, or a folder of task directories")
      .option("-d, --dataset <name@version>", "a published dataset (newest version when no @version)")
      .option("-i, --task-name <glob>", "run only tasks whose name matches (* ? [abc]); repeatable", collect, [])
      .option("-x, --exclude-task-name <glob>", "leave out tasks whose name matches; repeatable", collect, [])
      .option("-l, --n-tasks <n>", "run only the first N tasks (after -i/-x)", numberFlag("-l", POSITIVE_INT))
      .option("-n, --n-concurrent <n>", `trials at once (default ${JOB_DEFAULTS.concurrency})`, numberFlag("-n", POSITIVE_INT))
      .option("--timeout-multiplier <x>", "multiply agent and verifier timeouts", numberFlag("--timeout-multiplier", POSITIVE))
      .option("--secret <name>", "attach secret NAME from this environment; repeatable", collect, [])
      .option("--force-build", "rebuild task images even when cached")
      .option("--max-retries <n>", `automatic re-runs of a trial lost to an infrastructure error (default ${JOB_DEFAULTS.max_retries})`, numberFlag("--max-retries", COUNT))
      .addOption(engineOpt())
      .option("-e, --env <env>", "Harbor's name for --engine: docker or podman (its cloud environments are refused: evolve runs locally)")
      // Harbor's -t/--task (a registry task): taken only to be refused with the flags that do it here
      .addOption(new Option("-t, --task <ref>").hideHelp())
      .option("--json", json);

  addRunOptions(
    program
      .command("run")
      .description("run a job: an agent on every task, in containers; exit 1 if any trial did not score")
      .option("-a, --agent <agent>", agentNames ? `agent: ${agentNames.join(" | ")}` : "agent: a built-in, installed or registered one (evolve agent list)", "oracle")
      .option("-m, --model <model>", "model the agent uses, as provider/model")
      .option("--ak <KEY=VALUE>", "an option of the agent (its keys: README, Agents); repeatable", collect, [])
      .option("--agent-root <dir>", "a .agent/ folder the agent runs with: mounted read-only in its box; an installed CLI gets its PLANNING.md and knowledge/*.md before the instruction")
      .option("--org <org>", "the organization the job lands in (default: `auth org use`'s, else personal); its members see it")
      .option("--job-name <name>", "a label for the job: shown in `job list`, usable in place of its id wherever a job id goes (job show|grep|retry|cancel|resume)")
      .option("-k, --n-attempts <n>", `trials per task (default ${JOB_DEFAULTS.attempts})`, numberFlag("-k", POSITIVE_INT))
      .option("--max-spend-usd <usd>", "cap each trial's agent spend at this many dollars")
      .option("--ve <KEY=VALUE>", "override the LLM judge for this job: REWARDKIT_JUDGE or REWARDKIT_MODEL; repeatable", collect, [])
      .option("--preflight-call", "before any box starts, make one tiny real call to the model through the gateway (costs money; off by default)")
      .option("-o, --jobs-dir <dir>", "write the job as a Harbor job folder under DIR/<job name>/ as its trials settle (default ./jobs; off with [jobs] folder = false)")
      .option("--otlp <file|url>", "stream each trial's OpenTelemetry trace there as it settles (as `trace export --otlp`); a failed export only warns")
      .option("--otlp-protocol <protocol>", "http/protobuf (default for a URL) | http/json (default for a file)")
      .option("--otlp-header <NAME=VALUE>", "a header sent with each --otlp request (Langfuse: Authorization=Basic …); repeatable, never printed", collect, [])
      .option("--executor <kind>", "where the trials run: local (this process, default) | slurm (sbatch --array of `evolve worker`s) | kubernetes (a batch/v1 Job of `evolve worker` pods)")
      .option("--partition <name>", "--executor slurm: the Slurm partition")
      .option("--ship <what>", "--executor slurm: images (workers pull the job's pack: tasks, images, vendored agents) | none (the nodes have them); default images with --coordinator-host, else none")
      .option("--slurm-arg <KEY=VALUE>", "--executor slurm: a sbatch option (--KEY=VALUE), e.g. time=01:00:00; repeatable", collect, [])
      .option("--namespace <ns>", "--executor kubernetes: the namespace of the workers' Job (default: the kubeconfig context's, else default)")
      .option("--k8s-image <image>", "--executor kubernetes: the worker image (evolve, podman and the agents; scripts/kubernetes/Containerfile); required")
      .option("--kubeconfig <path>", "--executor kubernetes: the kubeconfig to use (default $KUBECONFIG, else ~/.kube/config)")
      .option("--coordinator-host <host>", "--executor slurm|kubernetes: the address this process serves the workers' API on (default 127.0.0.1: one host)")
      .option("--dry-run", "--executor slurm|kubernetes: write what it would submit (batch script and sbatch line, or the Secret and Job manifests), run nothing"),
    "stream one JSON line per trial event, then the summary",
  )
    .addHelpText(
      "after",
      examples([
        "evolve run -p fixtures/tasks/valid/minimal -a oracle",
        "evolve run -d example@1.0 -a nop -n 8 -k 3",
        "evolve run -p tasks/ --secret GITHUB_TOKEN --json | jq -c 'select(.kind==\"trial_settled\")'",
        "evolve run -p tasks/ -a nop --max-spend-usd 2 --ve REWARDKIT_MODEL=anthropic/claude-sonnet-4-6",
        "evolve run -d example@1.0 -i 'hello*' -x '*-slow' --job-name smoke",
        "evolve run -c run.toml -n 2",
        "evolve run -d example@1.0 -a oracle --otlp http://localhost:6006",
      ]),
    )
    .action(async (opts, cmd: Command) => setExit(await (await import("./run.ts")).runCommand(await withRunConfig(opts, cmd))));

  addRunOptions(
    program.command("check").description("run each task's reference solution (oracle) to prove it solvable; exit 1 if any is not"),
    // check prints its per-task table as one document, not run's event stream (checkCommand)
    "print the result as one JSON document ({ok, tasks}) once every task has run",
  )
    .addHelpText("after", examples(["evolve check -p fixtures/tasks/valid/minimal", "evolve check -d example@1.0 --json"]))
    .action(async (opts, cmd: Command) => setExit(await (await import("./run.ts")).checkCommand(await withRunConfig(opts, cmd))));

  program
    .command("upload")
    .description("import a job run elsewhere (a Harbor job folder, or its .tar.gz) as a finished job: its trials, rewards, traces and files")
    .argument("<path>", "the job folder (holding config.json and result.json), or its .tar.gz")
    .option("-d, --dataset <name@version>", "link the trials to this dataset version by task name (else by content hash)")
    .option("--no-wait", "return at once with the import id (`evolve job import <id> --watch` follows it)")
    .option("--json", "print the import as JSON")
    .addHelpText("after", examples(["evolve upload ./jobs/2026-08-27__12-00-00 -d terminal-bench@2.0", "evolve upload job.tar.gz --no-wait"]))
    .action(async (path: string, opts) => setExit(await (await import("./upload.ts")).uploadCommand(path, opts)));

  program
    .command("worker")
    .description("run trials for a job's coordinator (started by `run --executor slurm`; the token comes in EVOLVE_WORKER_TOKEN)")
    .requiredOption("--coordinator <url>", "the coordinator's worker API, as `run --executor slurm` printed it")
    .option("--worker-id <id>", "this worker's name in leases and logs (default: host and pid)")
    .option("--lease-seconds <n>", "seconds a lease lasts; heartbeats go at a third of it", numberFlag("--lease-seconds", POSITIVE_INT))
    .option("--scratch <dir>", "this worker's own home for its scratch store and trial trees (default: a new temporary folder)")
    .option("--shared-home <dir>", "the coordinator's evolve home on a shared filesystem: task folders are read there instead of fetched")
    .addOption(new Option("--ship <what>", "images: pull the job's pack (tasks, images, vendored agents) from the coordinator and unpack it before the first claim; none: the node has them").choices(["images", "none"]).default("none"))
    .addOption(engineOpt())
    .action(async (opts) => setExit(await (await import("./worker.ts")).workerCommand(opts)));

  const job = program.command("job").description("list, inspect, resume, retry and cancel jobs");
  job
    .command("list")
    .description("jobs, newest first (the last 20 unless --limit)")
    .option("--scope <scope>", "my (yours) | shared (teammates') | org (everything in your organizations); default: every job in the store")
    .option("--status <status>", "RUNNING | INTERRUPTED | COMPLETED | CANCELLED; repeatable or comma-separated", collect, [])
    .option("--kind <kind>", "run | check | retry | regrade; repeatable or comma-separated", collect, [])
    .option("--agent <agent>", "only jobs of this agent")
    .option("--dataset <name[@version]>", "only jobs on this dataset (a bare name: any version)")
    .option("--name <name>", "only jobs with this --job-name")
    .option("--since <when>", "only jobs created since: an age (30m, 2h, 3d, 1w) or an ISO date/time")
    .option("--limit <n>", "at most N jobs, newest first (default 20; 0: all)")
    .option("--json", "print as JSON")
    .addHelpText(
      "after",
      examples([
        "evolve job list",
        "evolve job list --status COMPLETED --agent oracle --since 3d",
        "evolve job list --dataset example --kind run,check --limit 0",
        "evolve job list --json | jq '.[0].id'",
      ]),
    )
    .action(async (opts) => setExit(await (await import("./job.ts")).jobListCommand(opts)));
  job
    .command("show")
    .description("a job's status counts, mean reward, pass@k, exceptions and trials")
    .argument("<id>", "job id (or a unique start of it), or the job's --job-name (the newest job with it)")
    .option("--status <status>", "list only trials in this status (e.g. SCORING_ERROR); repeatable or comma-separated", collect, [])
    .option("--json", "print as JSON")
    .addHelpText(
      "after",
      examples(["evolve job show 01JB...", "evolve job show smoke --status SCORING_ERROR,INFRASTRUCTURE_ERROR", "evolve job show 01JB... --json | jq .pass_at_k"]),
    )
    .action(async (id: string, opts) => setExit(await (await import("./job.ts")).jobShowCommand(id, opts)));
  job
    .command("resume")
    .description("finish an interrupted job (Ctrl-C, SIGTERM, a killed run): unsettled and INTERRUPTED trials run again, settled ones are kept")
    .argument("<id>", "job id (or a unique start of it), or the job's --job-name (the newest job with it)")
    .addOption(engineOpt())
    .option("--preflight-call", "before any box starts, make one tiny real call to the job's model through the gateway (costs money)")
    .option("--json", "stream JSON lines")
    .addHelpText("after", examples(["evolve job resume 01JB..."]))
    .action(async (id: string, opts) => setExit(await (await import("./run.ts")).resumeCommand(id, opts)));
  job
    .command("retry")
    .description("run a job's trials that did not score again, as a new job (kind retry) linked to the old one")
    .argument("<id>", "job id (or a unique start of it), or the job's --job-name (the newest job with it)")
    .option("--status <status>", "only trials in this status (e.g. INFRASTRUCTURE_ERROR); repeatable or comma-separated", collect, [])
    .addOption(engineOpt())
    .option("--preflight-call", "before any box starts, make one tiny real call to the job's model through the gateway (costs money)")
    .option("--json", "stream JSON lines, then the new job's summary")
    .addHelpText("after", examples(["evolve job retry 01JB...", "evolve job retry 01JB... --status INFRASTRUCTURE_ERROR --status BUDGET"]))
    .action(async (id: string, opts) => setExit(await (await import("./run.ts")).jobRetryCommand(id, opts)));
  job
    .command("download")
    .description("save a job with every trial's tree (lock.json, trial.log, verifier/, steps/, the home byte for byte, artifacts/) as a Harbor job folder: one .tar.gz, or a folder under DIR")
    .argument("<id>", "job id (or a unique start of it), or the job's --job-name (the newest job with it)")
    .requiredOption("-o, --output <file.tar.gz|dir>", "a .tar.gz (or .tgz) file, else a folder the job's folder is written under")
    .option("--overwrite", "replace an existing file or job folder (refused otherwise)")
    .option("--json", "print {job_id, path}")
    .addHelpText("after", examples(["evolve job download 01JB... -o job.tar.gz", "evolve job download smoke -o downloads/"]))
    .action(async (id: string, opts) => setExit(await (await import("./results.ts")).jobDownloadCommand(id, opts)));
  job
    .command("export")
    .description("(re)build a job's Harbor job folder from the store: <jobs dir>/<job name>/ with config.json, result.json and one folder per trial")
    .argument("<id>", "job id (or a unique start of it), or the job's --job-name (the newest job with it)")
    .option("-o, --output <dir>", "the jobs dir to write under (default ./jobs)")
    .option("--overwrite", "replace a folder of that name that is not this job's (refused otherwise)")
    .option("--json", "print {job_id, path}")
    .addHelpText("after", examples(["evolve job export 01JB...", "evolve job export smoke -o /data/jobs"]))
    .action(async (id: string, opts) => setExit(await (await import("./results.ts")).jobExportCommand(id, opts)));
  job
    .command("imports")
    .description("uploads (`evolve upload`), newest first: each import's status, the job it made and its scored trials")
    .option("--status <status>", "RUNNING | COMPLETED | FAILED")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve job imports", "evolve job imports --status RUNNING --json"]))
    .action(async (opts) => setExit(await (await import("./upload.ts")).jobImportsCommand(opts)));
  job
    .command("import")
    .description("one upload's import: its status, the job it made, `scored N of M trial(s)`, what it skipped")
    .argument("<import-id>", "the id `evolve upload` printed")
    .option("--watch", "wait until the import ends, then print it")
    .option("--json", "print as JSON")
    .addOption(new Option("--run", "run the import in this process (what `upload --no-wait` starts)").hideHelp())
    .addHelpText("after", examples(["evolve job import 01JI... --watch"]))
    .action(async (id: string, opts) => setExit(await (await import("./upload.ts")).jobImportCommand(id, opts)));
  job
    .command("cancel")
    .description("cancel a job: queued trials settle CANCELLED, running ones are stopped")
    .argument("<id>", "job id (or a unique start of it), or the job's --job-name (the newest job with it)")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve job cancel 01JB..."]))
    .action(async (id: string, opts) => setExit(await (await import("./job.ts")).jobCancelCommand(id, opts)));

  const store = program.command("store").description("back up and check the store ($EVOLVE_HOME/store)");
  store
    .command("backup")
    .description("write a compacted copy of the store to a new file; safe while jobs run")
    .argument("<file>", "the backup to write (must not exist)")
    .option("--json", "print the result as JSON")
    .addHelpText("after", examples(["evolve store backup ~/evolve-$(date +%F).mdb"]))
    .action(async (file: string, opts) => setExit(await (await import("./store.ts")).storeBackupCommand(file, opts)));
  store
    .command("verify")
    .description("check the store's file and every record against its schema; exit 1 if anything is bad")
    .option("--json", "print the report as JSON")
    .addHelpText("after", examples(["evolve store verify", "evolve store verify --json | jq .bad"]))
    .action(async (opts) => setExit(await (await import("./store.ts")).storeVerifyCommand(opts)));

  const trial = program.command("trial").description("inspect, retry, regrade and stop trials; read their logs, files and processes");
  trial
    .command("show")
    .description("a trial's task, agent, status, reward, tokens, spend and exception")
    .argument("<id>", "trial id, or a unique start or end of it")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve trial show 01JB...", "evolve trial show 01JB... --json | jq .rewards"]))
    .action(async (id: string, opts) => setExit(await (await import("./job.ts")).trialShowCommand(id, opts)));
  addTrialCommands(trial, setExit, engineOpt);
  addTraceCommands(program, trial, job, setExit);

  const trajectory = program.command("trajectory").description("check ATIF trajectories (Harbor's trajectory.json)");
  trajectory
    .command("validate")
    .description("check a trajectory.json against ATIF v1.0-v1.7; exit 1 with one line per finding")
    .argument("<file>", "an ATIF trajectory (JSON)")
    .option("--json", "print {ok, findings} as JSON")
    .addHelpText("after", examples(["evolve trajectory validate agent/trajectory.json", "evolve trajectory validate t.json --json | jq '.findings[].path'"]))
    .action(async (file: string, opts) => setExit(await (await import("./trajectory.ts")).trajectoryValidateCommand(file, opts)));

  program
    .command("serve")
    .description("serve the dashboard (/) and the local API (/api/v1: the --json documents of jobs, trials, datasets) on loopback or a unix socket")
    .option("--port <port>", "port to listen on (0 = any free port; default 8765)", numberFlag("--port", PORT))
    .option("--host <host>", "address to bind (default 127.0.0.1; any other needs an API token to exist)")
    .option("--socket <path>", "also (or, without --port, only) listen on this unix socket: this user only, no token needed")
    .option("--project <dir>", "serve this evolution project's records (/api/v1/evolve/*: gene bank, rounds, screens)")
    .option("--metaharness-run <dir>", "serve this Meta-Harness run's status (/api/v1/metaharness/status)")
    .addHelpText(
      "after",
      "\nEvery TCP request carries Authorization: Bearer <token> (evolve auth token create); a browser logs in once at /login with a token. The routes are in GET /api/v1/openapi.json.\n" +
        examples(["evolve auth token create --name laptop && evolve serve", "evolve serve --port 9000", "evolve serve --socket ~/.evolve/run/serve.sock"]),
    )
    .action(async (opts) => setExit(await (await import("./serve.ts")).serveCommand(opts, version, program.commands.find((c) => c.name() === "run")!)));

  const auth = program.command("auth").description("API tokens of `evolve serve`, and teams (organizations) on this machine");
  const token = auth.command("token").description("create, list and revoke API tokens (kept hashed; shown once)");
  token
    .command("create")
    .description("make an API token and print it once")
    .addOption(new Option("--scope <scope>", "read: every GET route; run: also start jobs (POST /api/v1/jobs)").choices(["read", "run"]).default("read"))
    .option("--name <name>", "a label to tell tokens apart")
    .option("--json", "print {token, id, name, scope, created_at}")
    .addHelpText("after", examples(["evolve auth token create --name ci", "evolve auth token create --scope run --name scheduler"]))
    .action(async (opts) => setExit(await (await import("./serve.ts")).tokenCreateCommand(opts)));
  token
    .command("list")
    .description("every API token (never the token itself), revoked ones included")
    .option("--json", "print as JSON")
    .action(async (opts) => setExit(await (await import("./serve.ts")).tokenListCommand(opts)));
  token
    .command("revoke")
    .description("revoke an API token: refused from the next request on")
    .argument("<id>", "the token's id (evolve auth token list)")
    .option("--json", "print the revoked token's row as JSON")
    .action(async (id: string, opts) => setExit(await (await import("./serve.ts")).tokenRevokeCommand(id, opts)));
  const org = auth
    .command("org")
    .description("teams on this machine: create one, invite people, run under it (you are $EVOLVE_USER, else your OS user name)");
  org
    .command("create")
    .description("create an organization; you become its owner")
    .argument("<name>", "lower-case letters, digits and dashes")
    .option("--display-name <name>", "the name people read")
    .option("--json", "print {name, display_name, role, created_at}")
    .addHelpText("after", examples(['evolve auth org create acme --display-name "Acme Lab"']))
    .action(async (name: string, opts) => setExit(await (await import("./org.ts")).orgCreateCommand(name, opts)));
  org
    .command("invite")
    .description("an owner makes an invite: printed once, single use, expiring")
    .argument("[org]", "the organization")
    .option("--expires <age>", "how long it stays good: 30m, 12h, 7d, 2w (default 7d)")
    .option("--revoke <id>", "revoke an invite instead (its id: evolve auth org invites <org>)")
    .option("--json", "print {token, id, org, expires_at}; with --revoke, the invite's row")
    .addHelpText("after", examples(["evolve auth org invite acme", "evolve auth org invite acme --expires 1d", "evolve auth org invite --revoke 01KDVX3JQ9S1M2T5A8B7C6D4E0"]))
    .action(async (name: string | undefined, opts) => setExit(await (await import("./org.ts")).orgInviteCommand(name, opts)));
  org
    .command("join")
    .description("join an organization with an invite token, as a member")
    .argument("<token>", "the token `auth org invite` printed")
    .option("--json", "print {name, display_name, role}")
    .action(async (token: string, opts) => setExit(await (await import("./org.ts")).orgJoinCommand(token, opts)));
  org
    .command("use")
    .description("your default organization for run and dataset publish (personal clears it)")
    .argument("<org>", "an organization you belong to, or personal")
    .option("--json", "print {org}")
    .addHelpText("after", examples(["evolve auth org use acme", "evolve auth org use personal"]))
    .action(async (name: string, opts) => setExit(await (await import("./org.ts")).orgUseCommand(name, opts)));
  org
    .command("members")
    .description("an organization's members and their roles; without one, your organizations")
    .argument("[org]", "an organization you belong to")
    .option("--make-owner <user>", "an owner makes a member an owner")
    .option("--demote <user>", "an owner makes an owner a member (an org always keeps one owner)")
    .option("--remove <user>", "an owner removes a member")
    .option("--json", "print the rows as JSON (after a change: the members now)")
    .addHelpText("after", examples(["evolve auth org members acme", "evolve auth org members acme --make-owner bo", "evolve auth org members acme --remove bo"]))
    .action(async (name: string | undefined, opts) => setExit(await (await import("./org.ts")).orgMembersCommand(name, opts)));
  org
    .command("invites")
    .description("an owner lists an organization's invites: id, created, expires, state (never the token)")
    .argument("<org>", "the organization")
    .option("--json", "print the rows as JSON")
    .action(async (name: string, opts) => setExit(await (await import("./org.ts")).orgInvitesCommand(name, opts)));
  org
    .command("leave")
    .description("leave an organization (its last owner cannot)")
    .argument("<org>", "an organization you belong to")
    .option("--json", "print {org, user}")
    .action(async (name: string, opts) => setExit(await (await import("./org.ts")).orgLeaveCommand(name, opts)));
  org
    .command("delete")
    .description("an owner deletes an organization and its invites; refused while it holds jobs or datasets")
    .argument("<org>", "the organization")
    .option("--json", "print {deleted}")
    .action(async (name: string, opts) => setExit(await (await import("./org.ts")).orgDeleteCommand(name, opts)));

  const gateway = program.command("gateway").description("the LLM gateway between agents and their models");
  gateway
    .command("serve")
    .description("serve the gateway on loopback, with one local credential printed once")
    .option("--port <port>", "port to listen on (0 = any free port)", numberFlag("--port", PORT), 4000)
    .option("--host <host>", "address to bind (default 127.0.0.1: it spends real money)")
    .option("--config <file>", "upstreams file (default $EVOLVE_HOME/gateway.toml)")
    .addHelpText(
      "after",
      examples(["evolve gateway serve", "ANTHROPIC_API_KEY=sk-… evolve gateway serve --port 4100", "evolve gateway serve --config ./gateway.toml"]),
    )
    .action(async (opts) => setExit(await (await import("./gateway.ts")).gatewayServeCommand(opts)));
  gateway
    .command("stop")
    .description("stop all spending: every running gateway refuses new model calls (trials settle BUDGET) until resumed")
    .argument("[reason]", "why, as the refused calls and trials will say")
    .option("--json", "print the new state as JSON")
    .addHelpText("after", examples(["evolve gateway stop", "evolve gateway stop 'provider incident'"]))
    .action(async (reason: string | undefined, opts) => setExit(await (await import("./gateway.ts")).gatewayStopCommand(reason, opts)));
  gateway
    .command("resume")
    .description("lift `gateway stop`: gateways accept model calls again")
    .option("--json", "print the new state as JSON")
    .addHelpText("after", examples(["evolve gateway resume"]))
    .action(async (opts) => setExit(await (await import("./gateway.ts")).gatewayResumeCommand(opts)));
  gateway
    .command("status")
    .description("whether spending is stopped, and the user's and team's settled spend against [budget] limits")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve gateway status", "evolve gateway status --json | jq .user"]))
    .action(async (opts) => setExit(await (await import("./gateway.ts")).gatewayStatusCommand(opts)));

  program
    .command("pack")
    .description("write one file for an air-gapped machine: a dataset's tasks, every image they run (built first if missing) and vendored agents, under a manifest of sha256 digests")
    .argument("<ref>", "a dataset (name@version, or a name for its newest version) or a job (id or --job-name: its dataset and the agents it ran)")
    .requiredOption("-o, --output <file>", "the pack to write (e.g. demo.evolvepack)")
    .option("--agent <name[@version]>", "a vendored agent to carry (repeatable; a job carries the agents it ran)", (v: string, acc: string[] = []) => [...acc, v])
    .addOption(engineOpt())
    .option("--json", "print what was packed as JSON")
    .addHelpText("after", examples(["evolve pack demo@1.0 -o demo.evolvepack --agent codex", "evolve pack 01JB... -o job.evolvepack"]))
    .action(async (ref: string, opts) => setExit(await (await import("./pack.ts")).packCommand(ref, opts)));
  program
    .command("unpack")
    .description("verify a pack's every digest, then load its images, import its agents and publish its dataset")
    .argument("<file>", "a file `evolve pack` wrote")
    .addOption(engineOpt())
    .option("--json", "print what was unpacked as JSON")
    .addHelpText("after", examples(["evolve unpack demo.evolvepack && evolve run -d demo@1.0 -a codex"]))
    .action(async (file: string, opts) => setExit(await (await import("./pack.ts")).unpackCommand(file, opts)));

  const agent = program.command("agent").description("vendor agent CLIs for offline boxes (pull, export, import) and register other CLIs");
  agent
    .command("pull")
    .description("vendor an agent CLI from npm into $EVOLVE_AGENTS_DIR (default $EVOLVE_HOME/agents) with a manifest of every file")
    .argument("<harness[@version]>", "an installed or registered agent, optionally at another version")
    .option("--from <dir>", "copy an existing `npm install --global --prefix <dir>` of the same packages instead of asking npm")
    .option("--node-from <file>", "with --from: the Node binary to vendor beside a JavaScript CLI")
    .option("--json", "print what was vendored as JSON")
    .addHelpText("after", examples(["evolve agent pull claude-code", "evolve agent pull codex@0.171.0", "EVOLVE_AGENTS_DIR=/var/cache/evolve/agents evolve agent pull gemini-cli"]))
    .action(async (ref: string, opts) => setExit(await (await import("./agent.ts")).pullCommand(ref, opts)));
  agent
    .command("list")
    .description("the agents evolve knows (built-in, installed CLIs, registered) and their vendored versions")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve agent list", "evolve agent list --json | jq -r '.agents[] | select(.kind == \"cli\" and .available) | .name'"]))
    .action(async (opts) => setExit(await (await import("./agent.ts")).listCommand(opts)));
  agent
    .command("show")
    .description("an agent's packages, API per provider, --ak options, home, stdout, parser and vendored copies")
    .argument("<name>", "agent name")
    .option("--verify", "check every vendored file against its manifest (sha256); exit 1 on any difference")
    .option("--json", "print as JSON")
    .addHelpText("after", examples(["evolve agent show codex", "evolve agent show claude-code --verify"]))
    .action(async (name: string, opts) => setExit(await (await import("./agent.ts")).showCommand(name, opts)));
  agent
    .command("export")
    .description("write vendored agents (all, or the named ones) into one tar file (.tar.gz / .tgz: gzip) to carry to an offline machine")
    .argument("<file>", "the file to write")
    .argument("[names...]", "harness or harness@version (default: every vendored agent)")
    .option("--json", "print what was written as JSON")
    .addHelpText("after", examples(["evolve agent export agents.tar.gz", "evolve agent export cc.tar claude-code@2.1.197"]))
    .action(async (file: string, names: string[], opts) => setExit(await (await import("./agent.ts")).exportCommand(file, names, opts)));
  agent
    .command("import")
    .description("unpack an `agent export` file, verifying every file against its manifest before anything is used")
    .argument("<file>", "the file `agent export` wrote")
    .option("--json", "print what was imported as JSON")
    .addHelpText("after", examples(["evolve agent import agents.tar.gz"]))
    .action(async (file: string, opts) => setExit(await (await import("./agent.ts")).importCommand(file, opts)));
  agent
    .command("register")
    .description("register another agent CLI from a TOML manifest (README: Registered agents)")
    .argument("<manifest.toml>", "the manifest")
    .option("--json", "print the registration as JSON")
    .addHelpText("after", examples(["evolve agent register ./mytool.toml && evolve agent pull mytool"]))
    .action(async (file: string, opts) => setExit(await (await import("./agent.ts")).registerCommand(file, opts)));

  const conductor = program.command("conductor").description("evolve's built-in agent: runs a .agent/ policy against a model through the gateway");
  conductor
    .command("run")
    .description("run the conductor on one instruction; print its trace as JSON lines; exit 0 when it finished, 1 otherwise")
    .requiredOption("--agent-root <dir>", "the agent directory (.agent/) whose policy runs")
    .option("--prompt <text>", "the instruction")
    .option("--prompt-file <file>", "read the instruction from a file")
    .requiredOption("-m, --model <provider/model>", "the model, as provider/model")
    .addOption(new Option("--api <api>", "the wire API (default: anthropic → anthropic, openai → openai-responses, gemini → gemini, others → openai-chat)").choices(["anthropic", "openai-responses", "openai-chat", "gemini"]))
    .option("--base-url <url>", "the gateway's URL (default: $ANTHROPIC_BASE_URL, $OPENAI_BASE_URL or $GOOGLE_GEMINI_BASE_URL by API)")
    .option("--key-env <name>", "the environment variable holding the gateway key (default EVOLVE_GATEWAY_KEY, then the provider's *_API_KEY)")
    .option("--workdir <dir>", "where tools run (default: the current directory)")
    .option("--timeout-sec <n>", "wall-clock limit for the whole run, in seconds", numberFlag("--timeout-sec", POSITIVE))
    .option("--output-file <file>", "write the final answer (finish's answer) to this file")
    .option("--episode", "append the run's episode to <agent-root>/memory/episodes.jsonl")
    .addHelpText(
      "after",
      "\nstdout is the run's trace, one {type, data} update per line (the parsed-trace vocabulary); the outcome is on stderr.\n" +
        examples([
          "evolve harness init . && evolve conductor run --agent-root .agent --prompt 'list the files' -m anthropic/claude-sonnet-4-5 --base-url http://127.0.0.1:4000",
          "EVOLVE_GATEWAY_KEY=evk-… evolve conductor run --agent-root .agent --prompt-file task.md -m openai/gpt-5 --workdir /app --output-file answer.txt",
          "evolve conductor run --agent-root .agent --prompt 'hi' -m gemini/gemini-2.5-flash --timeout-sec 300 | jq -c 'select(.type==\"tool_call\")'",
        ]),
    )
    .action(async (opts) => setExit(await (await import("./conductor.ts")).conductorRunCommand(opts)));

  const harness = program.command("harness").description("the .agent/ the conductor runs and the evolver changes: init, diagnose, scaffold, screen, round, install, gene bank");
  harness
    .command("init")
    .description("write a working default .agent/ in a directory (refused when one exists and is not empty)")
    .argument("<dir>", "the directory to write .agent/ in (created if needed)")
    .option("--json", "print {agent_root, files} as JSON")
    .addHelpText("after", examples(["evolve harness init .", "evolve harness init my-agent --json"]))
    .action(async (dir: string, opts) => setExit(await (await import("./conductor.ts")).harnessInitCommand(dir, opts)));
  harness
    .command("diagnose")
    .description("failed runs (episodic memory, or a job's trials) as (skill, pathology) diagnoses with the trace events that show them (docs/pathologies.md)")
    .option("--job <id>", "diagnose this job's trials (an id, or a unique start of one) instead of the project's episodic memory")
    .option("--project <dir>", "the project folder holding .agent/ (default: the working folder)")
    .option("--json", "print the diagnoses as one JSON document")
    .addHelpText("after", examples(["evolve harness diagnose", "evolve harness diagnose --job 01JB... --json | jq '.diagnoses[] | {skill, pathology, count}'"]))
    .action(async (opts) => setExit(await (await import("./harness-diagnose.ts")).diagnoseCommand(opts)));
  // the evolver's verbs: commands/harness.ts
  const harnessCmd = () => import("./harness.ts");
  const limits = `
Honest limits:
  - Utilities are only as good as the task cards: two cards are a smoke test, not evidence.
  - Candidates run in copied overlays of .agent/; anything a task writes outside .agent/ leaks between runs.
  - The evolver proposes nothing by itself: diagnoses point at a file; a person or the host agent writes the candidate.
  - Task cards run in podman boxes (the conductor, no network but the gateway, no provider key); --on-host runs them
    on this machine as you instead (a command runner needs it).
`;
  const projectOpt = ["--project <dir>", "the project folder holding .agent/ and evolve/ (default: the working folder)"] as const;
  harness
    .command("scaffold")
    .description("make a candidate: evolve/candidates/<id>/ with descriptor.json and files/ copied from its parent to edit")
    .requiredOption("--where <where>", "what it changes: prompt | knowledge | runtime | config")
    .requiredOption("--pathology <p>", "the failure it addresses (a diagnosis's pathology)")
    .requiredOption("--hypothesis <h>", "why the change should fix it")
    .option("--marker <text>", "text that shows in a transcript when the change ran (the activation gate)")
    .option("--parent <id>", "the harness it is made from: live (default) or a candidate id")
    .option("--file <path>", ".agent/-relative file to copy for editing (repeatable; default: the where's files)", (v: string, acc: string[] = []) => [...acc, v])
    .option(...projectOpt)
    .option("--json", "print the descriptor as JSON")
    .addHelpText("after", examples(["evolve harness scaffold --where prompt --pathology premature_finish --hypothesis 'a checklist before finish' --marker 'CHECKLIST:'"]) + limits)
    .action(async (opts) => setExit(await (await harnessCmd()).scaffoldCommand(opts)));
  harness
    .command("screen")
    .description("paired screen: each candidate and its parent on the same fixed sample, gated by validity, activation and paired gain")
    .argument("[candidates...]", "candidate ids (default: every scaffolded candidate no round has screened)")
    .option("-d, --dataset <name@version>", "screen on a published dataset as real jobs (podman trials, gateway, traces) instead of evolve/evals/ cards")
    .option("-a, --agent <agent>", "with -d: the agent each trial runs (default conductor)")
    .option("-m, --model <provider/model>", "the model (over runner.json's for cards)")
    .option("--sample <n>", "tasks drawn for the sample (default: all), the same for every candidate")
    .option("--seed <seed>", "seed of the draw (default: the screen id); recorded")
    .option("--id <id>", "screen id: a screen with this id on disk is resumed")
    .option("--no-activation-gate", "do not require the candidate's marker in a transcript (reported as skipped)")
    .option("--on-host", "run task cards on this machine as you instead of in podman boxes (a command runner needs it); prints what it means")
    .option(...projectOpt)
    .option("--json", "print the screen record as JSON")
    .addHelpText(
      "after",
      examples(["evolve harness screen", "evolve harness screen c-20260102030405123-ab12 --sample 10 --seed s1", "evolve harness screen --on-host", "evolve harness screen -d acme@1.0 -m anthropic/claude-sonnet-4-5 --json | jq '.candidates[] | {candidate, passed}'"]) +
        "\nPasses when every attempt is valid, the marker shows (or there is none: unverified), and mean gain > 0 with t ≥ 1.96, n ≥ 2.\nExit 0 when a candidate passed, 1 when none did.\n" +
        limits,
    )
    .action(async (candidates: string[], opts) => setExit(await (await harnessCmd()).screenCommand(candidates, opts)));
  harness
    .command("round")
    .description("screen → survivors' utility (pass@1 over every card) → held-out check → gene bank; resumes a killed round")
    .argument("[candidates...]", "candidate ids (default: every scaffolded candidate no round has screened)")
    .option("--max-rounds <n>", "rounds at most (default 1); stops earlier on stagnation")
    .option("--holdout <dir|name@version>", "held-out cards folder or dataset the winner must also beat its parent on before it may be installed")
    .option("--dry-run", "print the rollouts the round would take, run nothing")
    .option("--no-resume", "start a new round even if the last one is unfinished")
    .option("-d, --dataset <name@version>", "screen on a published dataset as real jobs instead of cards")
    .option("-a, --agent <agent>", "with -d: the agent each trial runs (default conductor)")
    .option("-m, --model <provider/model>", "the model (over runner.json's for cards)")
    .option("--sample <n>", "tasks drawn for the screen's sample (default: all)")
    .option("--seed <seed>", "seed of the draw; recorded")
    .option("--no-activation-gate", "do not require the candidate's marker in a transcript")
    .option("--on-host", "run task cards on this machine as you instead of in podman boxes (a command runner needs it); prints what it means")
    .option(...projectOpt)
    .option("--json", "print the rounds (or the dry run's plan) as JSON")
    .addHelpText("after", examples(["evolve harness round --dry-run", "evolve harness round --holdout ./holdout-cards", "evolve harness round --max-rounds 3 --json", "evolve harness round --on-host"]) + "\nExit 0 when a candidate was confirmed (or a dry run), 1 otherwise.\n" + limits)
    .action(async (candidates: string[], opts) => setExit(await (await harnessCmd()).roundCommand(candidates, opts)));
  harness
    .command("install")
    .description("make a confirmed candidate the live .agent/ (originals backed up under evolve/backups/), or --undo the last install")
    .argument("[id]", "the candidate")
    .option("--undo", "restore the live .agent/ from the newest install's backup")
    .option("--force", "install a candidate no round confirmed")
    .option("--override-holdout", "install a winner whose held-out gain did not hold")
    .option("--require-sign-test", "refuse a candidate whose screen's exact sign test is not significant (p < 0.05; it cannot be below 6 pairs)")
    .option(...projectOpt)
    .option("--json", "print the install record as JSON")
    .addHelpText("after", examples(["evolve harness install c-20260102030405123-ab12", "evolve harness install --undo"]))
    .action(async (id: string | undefined, opts) => setExit(await (await harnessCmd()).installCommand(id, opts)));
  const genebank = harness.command("genebank").description("the gene bank: one confirmed harness per (where, pathology) cell");
  genebank
    .command("show")
    .description("print each cell's holder with its utility and lineage")
    .option(...projectOpt)
    .option("--json", "print the cells as JSON")
    .addHelpText("after", examples(["evolve harness genebank show", "evolve harness genebank show --json | jq '.cells[].lineage'"]))
    .action(async (opts) => setExit(await (await harnessCmd()).genebankShowCommand(opts)));
  harness
    .command("eval")
    .description("run the live .agent/ (a copy) on every card: the baseline's pass@1")
    .option("-m, --model <provider/model>", "the model (over runner.json's)")
    .option("--on-host", "run task cards on this machine as you instead of in podman boxes (a command runner needs it); prints what it means")
    .option(...projectOpt)
    .option("--json", "print the attempts and utility as JSON")
    .addHelpText("after", examples(["evolve harness eval", "evolve harness eval --json | jq .utility", "evolve harness eval --on-host"]) + limits)
    .action(async (opts) => setExit(await (await harnessCmd()).evalCommand(opts)));
  // the verifier of a card's box: run there by the read-only evolve binary (engine/eval/card-tasks.ts), not by users
  harness
    .command("card-check", { hidden: true })
    .description("check a conductor's output against a task card and write the reward (the verifier of a card's box)")
    .requiredOption("--card <file>", "the card (JSON)")
    .requiredOption("--output <file>", "the conductor's output")
    .requiredOption("--reward <file>", "where the reward (1 or 0) is written")
    .action(async (opts) => setExit(await (await harnessCmd()).cardCheckCommand(opts)));

  const metaharness = program.command("metaharness").description("Meta-Harness Adapter search: check a candidate adapter, read a run's candidates, pick its best");
  const mh = () => import("./metaharness.ts");
  metaharness
    .command("check-spec")
    .description("check that a folder is a complete adapter (the proposer's check_spec); exit 1 with its problems, one per line")
    .argument("<dir>", "the candidate adapter's folder")
    .option("--template <dir>", "a template folder: the candidate's .hermit/, when present, must be its .hermit/")
    .option("--json", "print {dir, ok, problems} as JSON")
    .addHelpText("after", examples(["evolve metaharness check-spec workspace/scratch/candidates/c1", "evolve metaharness check-spec c1 --template ./template --json | jq .problems"]))
    .action(async (dir: string, opts) => setExit(await (await mh()).checkSpecCommand(dir, opts)));
  metaharness
    .command("status")
    .description("a run's candidates (round, status, mean, evaluations), the queue, the one handed back and the finalized one")
    .argument("<run>", "the run folder")
    .option("--json", "print the state as JSON")
    .addHelpText("after", examples(["evolve metaharness status runs/mh1", "evolve metaharness status runs/mh1 --json | jq '.candidates[] | select(.status==\"evaluated\")'"]))
    .action(async (run: string, opts) => setExit(await (await mh()).statusCommand(run, opts)));
  metaharness
    .command("run")
    .description("search adapters: each step evaluates one candidate on the whole search set, a proposer session writes k more when none is queued; finalize picks the best mean (resumable)")
    .option("--config <file>", "run.toml (the flags below override its keys)")
    .option("-d, --dataset <name@version>", "the search set: a stored dataset")
    .option("-p, --path <dir>", "the search set: a task folder (imported as `evolve run -p` does)")
    .option("--cards <dir>", "the search set: a folder of task cards (each run by the conductor in a podman box: -a conductor)")
    .option("-a, --agent <name>", "the fixed acting agent (any harness, or conductor)")
    .option("-m, --model <provider/model>", "the acting agent's model")
    .option("--start-from <dir>", "the starting adapter (its ADAPTER.md is the agent's instructions)")
    .option("--template <dir>", "the template folder (.hermit/: manifest.json, EVOLVER.md); default: the built-in one")
    .option("-k <n>", "candidates per proposal round (default 2)")
    .option("--max-rounds <n>", "proposal rounds (absent: a round whenever nothing is queued)")
    .option("--epochs <n>", "steps (default 1 + max_rounds × k)")
    .option("--proposer <backend>", "codex (default) or claude")
    .option("--proposer-model <provider/model>", "the proposer's model")
    .option("--proposer-arg <KEY=VALUE>", "an option of the proposer CLI's agent (repeatable)", (v: string, prev: string[] = []) => [...prev, v])
    .option("--web-search", "let the proposer search the web (off by default)")
    .option("--prompt <file>", "the round prompt (PROPOSE.md; placeholders {round} {k} {state_dir} {scratch_dir} {steps_dir} {template_dir})")
    .option("--run <dir>", "the run folder; one holding a state is resumed")
    .option("--holdout <name@version>", "after finalize, evaluate the chosen and the starting adapter on this held-out dataset (holdout.json)")
    .option("--concurrency <n>", `trials at once per step (default ${JOB_DEFAULTS.concurrency})`)
    .option("--dry-run", "print the projected rollouts and proposer sessions; run nothing")
    .option("--on-host", "with --cards: run the cards on this machine as you instead of in podman boxes; prints what it means")
    .option("--json", "print the result as JSON")
    .addHelpText("after", examples(["evolve metaharness run --config run.toml --dry-run", "evolve metaharness run -d tasks@1 -a claude-code -m anthropic/claude-sonnet-4-5 --start-from seed_adapter --max-rounds 3 --proposer-model openai/gpt-5 --run runs/mh1", "evolve metaharness run --config run.toml --holdout tasks-test@1 --json | jq .holdout.stats", "evolve metaharness run --cards evolve/evals -a conductor -m anthropic/claude-sonnet-4-5 --start-from seed_adapter --max-rounds 2 --proposer-model openai/gpt-5 --run runs/mh2"]))
    .action(async (opts) => setExit(await (await mh()).runCommand(opts)));
  metaharness
    .command("finalize")
    .description("pick the intact candidate with the best mean on the search set (ties: the one evaluated first); --out copies its adapter")
    .argument("<run>", "the run folder")
    .option("--out <dir>", "copy the chosen adapter here (a new or empty folder)")
    .option("--json", "print {id, mean, evaluations, adapter, out} as JSON")
    .addHelpText("after", examples(["evolve metaharness finalize runs/mh1", "evolve metaharness finalize runs/mh1 --out ./best-adapter --json"]))
    .action(async (run: string, opts) => setExit(await (await mh()).finalizeCommand(run, opts)));

  program
    .command("doctor")
    .description("check the container engine end to end (build, run, exec, copy, network isolation) and print fixes")
    .addOption(engineOpt())
    .option("--json", "print the checks as JSON")
    .addHelpText("after", examples(["evolve doctor", "EVOLVE_ENGINE=docker evolve doctor --json"]))
    .action(async (opts) => setExit(await (await import("./system.ts")).doctorCommand(opts)));
  program
    .command("gc")
    .description("remove containers and networks of this home that no live trial owns (--images: and its task images nothing needs)")
    .addOption(engineOpt())
    .option("--images", "also remove the task images (evolve-env:…) this home built that no unsettled trial needs and no container uses")
    .option("--dry-run", "only list what would be removed")
    .option("--json", "print what was removed as JSON")
    .addHelpText("after", examples(["evolve gc --dry-run", "evolve gc", "evolve gc --images"]))
    .action(async (opts) => setExit(await (await import("./system.ts")).gcCommand(opts)));

  return program;
}

/**
 * Reads `-c FILE` into the options of `run`/`check` (commands/run-config.ts); imported only when a file is given so
 * a plain run loads no TOML parser for it.
 */
async function withRunConfig<T extends Record<string, unknown>>(opts: T, cmd: Command): Promise<T> {
  if (typeof opts.config !== "string") return opts;
  return (await import("./run-config.ts")).applyRunConfig(opts, cmd, opts.config);
}

/**
 * Commander's usage error as one line, its "(Did you mean …?)" folded in: `unknown command 'jobs'. Did you mean
 * 'job'?`. An unknown subcommand is named with its group (`job lst`) and the hint points at that group's help.
 */
export function usageMessage(program: Command, args: readonly string[], err: CommanderError): { message: string; hint: string } {
  const [first, ...more] = err.message.replace(/^error: /, "").split("\n");
  const suggestion = /\(Did you mean (.+)\?\)/.exec(more.join(" "))?.[1];
  // the commands the arguments name (`job`, `job list`): the help a hint points at
  const path: string[] = [];
  for (let cmd: Command | undefined = program, i = 0; cmd && i < args.length; i++) {
    cmd = cmd.commands.find((c) => c.name() === args[i] || c.aliases().includes(args[i]));
    if (cmd) path.push(cmd.name());
  }
  const group = program.commands.find((c) => c.name() === args[0] && c.commands.length > 0);
  let message = first;
  let hint = path.length > 0 ? `see \`evolve ${path.join(" ")} --help\`` : "see `evolve --help` or `evolve <command> --help`";
  if (err.code === "commander.unknownCommand" && group) {
    message = first.replace(/'([^']+)'/, `'${group.name()} $1'`);
    hint = `see \`evolve ${group.name()} --help\``;
  }
  if (suggestion) message += `. Did you mean '${err.code === "commander.unknownCommand" && group ? `${group.name()} ${suggestion}` : suggestion}'?`;
  return { message, hint };
}

function configure(cmd: Command): void {
  cmd.exitOverride();
  cmd.configureOutput({ outputError: () => {} });
  for (const sub of cmd.commands) configure(sub);
}

/**
 * Whether these arguments ask for `run`'s help (`run --help`, `run -h`, `help run`), the one text that lists every
 * agent. A false yes only costs time; a false no prints the list's pointer instead of the list.
 */
export function wantsRunHelp(args: readonly string[]): boolean {
  if (args[0] === "help") return args[1] === "run";
  return args.includes("run") && (args.includes("--help") || args.includes("-h"));
}

/** Parses argv and runs the command; returns the process exit status. */
export async function run(argv: string[], version: string): Promise<number> {
  exitQuietlyOnBrokenPipe();
  let code = 0;
  // the agent list loads the harness registry (every agent's module, zod with them): only the help that shows it pays
  const agentNames = wantsRunHelp(argv.slice(2)) ? (await import("../engine/harness/mod.ts")).harnessNames() : undefined;
  const program = buildProgram(version, (c) => (code = c), agentNames);
  configure(program);
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (["commander.helpDisplayed", "commander.version"].includes(err.code)) return 0;
      // A group (`evolve task`) run without a subcommand: commander already printed its help to stderr.
      if (err.code === "commander.help") return 2;
      const { message, hint } = usageMessage(program, argv.slice(2), err);
      process.stderr.write(formatError("usage", message, hint) + "\n");
      return 2;
    }
    return reportError(err);
  }
}
