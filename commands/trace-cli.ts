/**
 * The parsed trace's commands (`trial trace`, `trial download --stream`, `job grep`, `trace convert|export`), added to the
 * tree cli.ts builds. Parsing and help only; each action lazily imports commands/trace.ts (`trace export`: commands/otel.ts).
 */
import { Option, type Command } from "commander";
import { ARTIFACT_STREAMS } from "../engine/trace/artifact-streams.ts";
import { COUNT, POSITIVE, numberFlag } from "./flags.ts";

function examples(lines: string[]): string {
  return `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;
}

const impl = () => import("./trace.ts");
const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Adds `trial trace`, `trial download`, `job grep` and the `trace` group. */
export function addTraceCommands(program: Command, trial: Command, job: Command, setExit: (code: number) => void): void {
  trial
    .command("trace")
    .description("print a trial's parsed trace: one line per event (position, type, data cut to 140 characters); exit 1 if it stored none")
    .argument("<id>", "trial id, or a unique start or end of it")
    .option("--type <kinds>", "only these event kinds (repeatable, or a comma list): prompt, agent_message_chunk, tool_call, usage, …", collect)
    .option("--grep <regex>", "only events whose type or data matches (case-insensitive)")
    .option("--tail <n>", "only the last n of the events kept", numberFlag("--tail", COUNT))
    .option("--cursor <seq>", "only events after this position (the last seq you saw)", numberFlag("--cursor", COUNT))
    .option("-f, --follow", "keep printing as events arrive until the trial settles")
    .option("--json", "print each event whole, one JSON line per event")
    .addHelpText(
      "after",
      examples([
        "evolve trial trace 01JB...",
        "evolve trial trace 01JB... --grep 'permission denied' --tail 50",
        "evolve trial trace 01JB... --cursor 140 --follow",
        "evolve trial trace 01JB... --type tool_call,tool_call_update --json | jq .data.update.title",
      ]),
    )
    .action(async (id: string, opts) => setExit(await (await impl()).traceCommand(id, opts)));
  trial
    .command("download")
    .description("save a trial's outputs under DIR/<trial id>/ (-o), or print one of its artifacts to stdout (--stream; exit 1 if the trial did not store it)")
    .argument("<id>", "trial id, or a unique start or end of it")
    .addOption(
      new Option("--stream <name>", "trace-parsed (JSON lines) | trace-atif (ATIF-v1.7) | trace-stdout | trace-stderr (the harness's streams) | verifier (test-stdout.txt) | agent-home (the home's text view: box path → text)").choices([
        ...ARTIFACT_STREAMS,
      ]),
    )
    .option("-o, --output <dir>", "save the trial tree (config.json, result.json, evolve.json, agent/, verifier/, …) under DIR/<trial id>/")
    .option("--overwrite", "with -o: replace an existing DIR/<trial id>/ (refused otherwise)")
    .option("--json", "with -o: print {trial_id, path}")
    .addHelpText("after", examples(["evolve trial download 01JB... -o trials/", "evolve trial download 01JB... --stream trace-atif > trajectory.json", "evolve trial download 01JB... --stream verifier"]))
    .action(async (id: string, opts) => setExit(await (await impl()).downloadCommand(id, opts)));
  job
    .command("grep")
    .description("search the parsed traces of every trial of a job (case-insensitive regex over type and data); exit 1 if nothing matched")
    .argument("<job>", "job id (or a unique start of it), or the job's --job-name (the newest job with it)")
    .argument("<regex>", "the pattern")
    .option("--type <kinds>", "only these event kinds (repeatable, or a comma list)", collect)
    .option("--json", "print each match as its event with trial_id, one JSON line per match")
    .addHelpText("after", examples(["evolve job grep 01JB... 'permission denied'", "evolve job grep 01JB... 'rate.?limit' --json | jq -r .trial_id | sort -u"]))
    .action(async (id: string, pattern: string, opts) => setExit(await (await impl()).jobGrepCommand(id, pattern, opts)));
  const trace = program.command("trace").description("parsed traces of runs made elsewhere");
  trace
    .command("convert")
    .description("parse a harness's stdout (and its session files) from a run made elsewhere into the parsed trace or ATIF")
    .argument("<stdout-file>", "the harness's stdout, as it printed it")
    .requiredOption("--harness <name>", "the harness that printed it (claude-code, codex, …)")
    .option("--session <file>", "a session file the harness wrote (repeatable); the instruction is read from it (codex, claude-code)", collect)
    .option("--instruction <file>", "a file holding the instruction the agent was given (the trace's first event), when no session file holds it")
    .addOption(new Option("--format <format>", "parsed (JSON lines, one event each) | atif (one ATIF-v1.7 document)").choices(["parsed", "atif"]).default("parsed"))
    .addHelpText(
      "after",
      examples([
        "evolve trace convert --harness claude-code run.jsonl --session ~/.claude/projects/-work/<session>.jsonl",
        "evolve trace convert --harness codex out.jsonl --session rollout.jsonl --format atif > trajectory.json",
        "evolve trace convert --harness codex out.jsonl --instruction instruction.md",
      ]),
    )
    .action(async (file: string, opts) => setExit(await (await impl()).traceConvertCommand(file, opts)));
  trace
    .command("export")
    .description("send settled trials as OpenTelemetry traces (GenAI and OpenInference attributes) to an OTLP/HTTP endpoint or a file")
    .argument("<trial|job>", "a trial id (or a unique start or end of it), or a job id or --job-name: its settled trials")
    .requiredOption("--otlp <file|url>", "an http(s) endpoint (/v1/traces is appended unless the path ends with it) or a file")
    .addOption(new Option("--protocol <protocol>", "http/protobuf (default for a URL; Phoenix takes only this) | http/json (default for a file: JSON lines)").choices(["http/protobuf", "http/json"]))
    .option("--header <NAME=VALUE>", "a header sent with each request (Langfuse: Authorization=Basic base64(pk:sk)); repeatable, never printed", collect)
    .option("--timeout <sec>", "how long one request may take before the endpoint counts as unreachable (default 30)", numberFlag("--timeout", POSITIVE))
    .option("--json", "print what was sent as JSON")
    .addHelpText(
      "after",
      examples([
        "evolve trace export 01JB... --otlp http://localhost:6006",
        "evolve trace export smoke --otlp https://cloud.langfuse.com/api/public/otel --header \"Authorization=Basic $(printf %s \"$LANGFUSE_PUBLIC_KEY:$LANGFUSE_SECRET_KEY\" | base64 -w0)\"",
        "evolve trace export 01JB... --otlp spans.jsonl",
      ]),
    )
    .action(async (ref: string, opts) => setExit(await (await import("./otel.ts")).traceExportCommand(ref, opts)));
}
