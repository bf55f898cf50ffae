/**
 * `evolve conductor run` (the command a trial box runs: keep its flags stable) and `evolve harness init`.
 */
import { statSync, writeFileSync } from "node:fs";
import { readRegularFile, RegularFileError } from "../engine/regular-file.ts";
import { resolve } from "node:path";
import { EvolveError } from "../engine/errors.ts";
import { API_ENV, gatewayModelName, splitModel, WIRE_APIS as APIS, wireApiOf, type WireApi } from "../engine/providers.ts";
import { out, outJson, outTraceLine } from "./output.ts";

export interface ConductorRunOpts {
  agentRoot: string;
  prompt?: string;
  promptFile?: string;
  model: string;
  api?: string;
  baseUrl?: string;
  keyEnv?: string;
  workdir?: string;
  timeoutSec?: number;
  outputFile?: string;
  episode?: boolean;
}

/** A base URL as its root: OPENAI_BASE_URL and GOOGLE_GEMINI_BASE_URL usually carry the API's version path. */
function rootUrl(url: string): string {
  return url.replace(/\/+$/, "").replace(/\/(v1|v1beta)$/, "");
}

/** Runs the conductor once; prints the trace as JSON lines. Exit 0 when it finished, 1 otherwise. */
export async function conductorRunCommand(opts: ConductorRunOpts): Promise<number> {
  if ((opts.prompt === undefined) === (opts.promptFile === undefined)) throw new EvolveError("usage", "give the instruction as exactly one of --prompt TEXT or --prompt-file FILE", "see `evolve conductor run --help`");
  const split = splitModel(opts.model);
  if (!split) throw new EvolveError("usage", `-m ${JSON.stringify(opts.model)} is not provider/model`, "e.g. -m anthropic/claude-sonnet-4-5");
  if (opts.api !== undefined && !(APIS as readonly string[]).includes(opts.api)) throw new EvolveError("usage", `--api ${opts.api} is none of ${APIS.join(", ")}`, "see `evolve conductor run --help`");
  const api = (opts.api as WireApi | undefined) ?? wireApiOf(split.provider);
  const model = gatewayModelName(split.provider, split.model);
  const env = process.env;
  const baseEnv = API_ENV[api].baseUrl;
  const base = opts.baseUrl ?? env[baseEnv];
  if (!base) throw new EvolveError("conductor_endpoint_missing", `no gateway URL: give --base-url or set ${baseEnv}`, "e.g. --base-url http://127.0.0.1:4000 (evolve gateway serve prints it)");
  const providerKey = API_ENV[api].key;
  const keyEnv = opts.keyEnv ?? "EVOLVE_GATEWAY_KEY";
  const key = env[keyEnv] || env[providerKey];
  if (!key) throw new EvolveError("conductor_endpoint_missing", `no gateway key: ${keyEnv} and ${providerKey} are both unset`, `export ${keyEnv}=<the key evolve gateway serve printed>, or pass --key-env NAME`);
  const instruction = opts.promptFile !== undefined ? readPromptFile(opts.promptFile) : opts.prompt;

  const agentRoot = resolve(opts.agentRoot);
  const workdir = resolve(opts.workdir ?? process.cwd());
  if (!isDir(workdir)) throw new EvolveError("usage", `--workdir ${workdir} does not exist or is not a folder`, "give the folder the tools should run in");
  const ctl = new AbortController();
  const stop = () => ctl.abort(new Error("signal"));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  try {
    const { runConductor } = await import("../engine/conductor/mod.ts");
    const result = await runConductor({
      agentRoot,
      instruction: instruction!,
      workdir,
      endpoint: { api, baseUrl: rootUrl(base), key, model },
      onTrace: outTraceLine,
      ...(opts.timeoutSec !== undefined ? { timeoutMs: opts.timeoutSec * 1000 } : {}),
      signal: ctl.signal,
    });
    if (opts.outputFile !== undefined) writeFileSync(opts.outputFile, result.output);
    // a run that never reached its model is not the policy's: it is kept out of episodic memory
    if (opts.episode && !result.model_unavailable) {
      const { appendEpisode, episodeOf } = await import("../engine/conductor/mod.ts");
      await appendEpisode(agentRoot, episodeOf(result, { score: null }));
    }
    process.stderr.write(`conductor: ${result.outcome} after ${result.turns} turn${result.turns === 1 ? "" : "s"}${result.error ? `: ${result.error}` : ""}\n`);
    return result.outcome === "finished" ? 0 : 1;
  } finally {
    process.off("SIGTERM", stop);
    process.off("SIGINT", stop);
  }
}

/** Writes a default `.agent/` in `dir`; prints what was written. */
export async function harnessInitCommand(dir: string, opts: { json?: boolean }): Promise<number> {
  const { initAgentDir } = await import("../engine/conductor/mod.ts");
  const r = initAgentDir(resolve(dir));
  if (opts.json) {
    outJson({ agentRoot: r.agentRoot, files: r.files });
    return 0;
  }
  out(`wrote ${r.agentRoot}:`);
  for (const f of r.files) out(`  ${f}`);
  out(`run it: evolve conductor run --agent-root ${r.agentRoot} --prompt '…' -m anthropic/<model> --base-url <gateway>`);
  return 0;
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The most of an instruction `--prompt-file` takes: far above any task's, far below what would exhaust memory. */
export const MAX_PROMPT_FILE_BYTES = 8 * 1024 * 1024;

/** `--prompt-file`: a regular file of at most {@link MAX_PROMPT_FILE_BYTES} (a FIFO or /dev/zero refused at once). */
function readPromptFile(path: string): string {
  try {
    return readRegularFile(path, MAX_PROMPT_FILE_BYTES);
  } catch (e) {
    if (!(e instanceof RegularFileError)) throw e;
    throw new EvolveError("conductor_prompt_unreadable", `--prompt-file ${path}: ${e.reason}`, "give a regular file holding the instruction, or pass it with --prompt");
  }
}
