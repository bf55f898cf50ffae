/**
 * An installed agent CLI as a {@link Harness}: what the CliSpec declares (cli-types.ts) turned into a run in the
 * agent's box. The vendored copy is mounted read-only at AGENT_ROOT (or the image's own command runs), the
 * settings files are written from inside the box as the agent user, the CLI runs with the trial's gateway credential
 * under the variable it reads, its stdout is tailed into the trace while it runs, and at persist its home is
 * recorded (agent-home.json) and the trajectory built from the stored trace.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, realpathSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { BOX_AGENT_ROOT, BOX_EVOLVE_BINARY } from "../conductor/layout.ts";
import { withAgentInstructions } from "../conductor/instructions.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { didYouMean } from "../task/findings.ts";
import { evolveBinary } from "../runtime.ts";
import { LiveTrace } from "../trace/live.ts";
import { BOX, BOX_ROOT } from "../box/layout.ts";
import { TrialFailure } from "../outcome.ts";
import type { CliSpec, InvocationInput, McpServer } from "./cli-types.ts";
import type { WireApi } from "../providers.ts";
import type { AgentOutcome, Harness, HarnessContext, HarnessStep, HarnessTrial } from "./types.ts";
import { findVendored, needsVendoring, verifyVendoredCached, type Vendored } from "./vendor.ts";

/** Where the vendored copy is mounted in the agent's box (read-only). */
export const AGENT_ROOT = "/opt/evolve/agent";
/** The variable the gateway credential goes in when the CLI names none. */
export const DEFAULT_KEY_ENV = "EVOLVE_GATEWAY_KEY";
/** The agent's stderr, beside its stdout. */
export const STDERR_NAME = "stderr.log";
/** The task file that seeds a session (platform-tasks.md). */
export const SEED_FILE = "trajectory.json";

/** The providers did-you-mean offers for a misspelt `-m` provider: those evolve's gateway knows by name. */
const KNOWN_PROVIDERS: readonly string[] = ["anthropic", "openai", "gemini"];

/** `-m provider/model` split; undefined parts when `-m` is absent or has no provider. */
export function splitModel(model: string | undefined): { provider: string; model: string } | undefined {
  if (!model) return undefined;
  const i = model.indexOf("/");
  if (i <= 0 || i === model.length - 1) return undefined;
  return { provider: model.slice(0, i), model: model.slice(i + 1) };
}

/**
 * The model and `--ak` options a CLI is asked to run with, checked: `-m provider/model` whose provider the CLI
 * speaks (its wire API), and options it declares with allowed values. Throws a usage EvolveError with a stable code;
 * the one rule `evolve run` and the trial's prepare both apply.
 */
export function checkCliRequest(spec: CliSpec, req: { model?: string; options: Readonly<Record<string, string>> }): { provider: string; model: string; api: WireApi } {
  const m = splitModel(req.model);
  if (!m || /[\s\x00-\x1f\x7f]/.test(req.model!)) {
    throw new EvolveError(
      "agent_model_invalid",
      req.model ? `-m ${req.model}: expected provider/model` : `${spec.name} calls a model: give -m provider/model`,
      "e.g. -m anthropic/claude-sonnet-4-6 or -m openai/gpt-5",
    );
  }
  const api = spec.apiFor(m.provider);
  if (!api) {
    // a misspelt provider (`opnai`) is said as such: the providers this agent speaks, the nearest first
    const speaks = KNOWN_PROVIDERS.filter((p) => spec.apiFor(p) !== undefined);
    const near = didYouMean(m.provider, speaks);
    throw new EvolveError(
      "agent_model_unsupported",
      `${spec.name} cannot call a model of provider ${m.provider} (-m ${req.model}): it speaks none of that provider's APIs${near ? `; did you mean -m ${near}/${m.model}?` : ""}`,
      speaks.length > 0 ? `${spec.name} calls models of ${speaks.join(", ")} (see README, Agents)` : "pick a model of a provider this agent speaks (see README, Agents)",
    );
  }
  const keys = Object.keys(spec.options);
  for (const [k, v] of Object.entries(req.options)) {
    const o = spec.options[k];
    if (!o) {
      const near = didYouMean(k, keys);
      throw new EvolveError(
        "agent_option_unknown",
        `--ak ${k}: ${spec.name} has no option ${JSON.stringify(k)}${near ? `; did you mean ${near}?` : ""}`,
        keys.length > 0 ? `its options: ${keys.join(", ")}` : `${spec.name} takes no --ak options`,
      );
    }
    const ok = o.values ? o.values.includes(v) : o.pattern ? new RegExp(`^(?:${o.pattern.source})$`, o.pattern.flags).test(v) : true;
    if (!ok) {
      const near = o.values ? didYouMean(v, o.values) : undefined;
      throw new EvolveError(
        "agent_option_invalid",
        `--ak ${k}=${v}: ${o.description}${o.values ? ` (one of ${o.values.join(", ")})` : ""}${near ? `; did you mean ${k}=${near}?` : ""}`,
        `e.g. --ak ${k}=${near ?? o.values?.[0] ?? "…"}`,
      );
    }
  }
  return { ...m, api };
}

/**
 * The ELF interpreter (`PT_INTERP`) a host binary asks for, or undefined for a static binary or anything that is not
 * a 64-bit little-endian ELF: a box lacking that path cannot start it (a glibc build in an Alpine box).
 */
export function elfInterpreter(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch {
    return undefined;
  }
  try {
    const head = Buffer.alloc(64);
    if (readSync(fd, head, 0, 64, 0) < 64 || head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2 || head[5] !== 1) return undefined;
    const phoff = Number(head.readBigUInt64LE(32));
    const phentsize = head.readUInt16LE(54);
    const phnum = head.readUInt16LE(56);
    const ph = Buffer.alloc(phentsize);
    for (let i = 0; i < Math.min(phnum, 64); i++) {
      if (readSync(fd, ph, 0, phentsize, phoff + i * phentsize) < phentsize) return undefined;
      if (ph.readUInt32LE(0) !== 3) continue;
      const off = Number(ph.readBigUInt64LE(8));
      const size = Math.min(Number(ph.readBigUInt64LE(32)), 4096);
      const s = Buffer.alloc(size);
      readSync(fd, s, 0, size, off);
      return s.toString("latin1").replace(/\0.*$/s, "");
    }
    return undefined;
  } finally {
    closeSync(fd);
  }
}

const shq = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** What one trial's run of the CLI settled, between its phases (the harness object serves every trial). */
interface TrialState {
  trial: HarnessTrial;
  provider: string;
  model: string;
  api: WireApi;
  vendored?: Vendored;
  /** The program argv prefix, settled in install. */
  program?: string[];
  /** Where the vendored copy is in the box, when it runs (not the image's command). */
  agentRoot?: string;
  version?: string;
  seed?: string;
  mcpServers: McpServer[];
  live?: LiveTrace;
  /** The evolve binary on the host, for a CLI that is evolve itself (`vendor.selfBinary`). */
  selfBinary?: string;
  /** The evolve binary on the host, mounted for the agent's own use (HarnessTrial.evolveTools). */
  evolveTools?: string;
  /** The trial's copy of the job's `.agent/` (host), when it has one. */
  agentPolicyRoot?: string;
  /** The CLI was started at least once: only then are there a home and a trajectory to record. */
  ran?: boolean;
}

/** The trajectory seed of a task: `trajectory.json` beside the instruction, or in the first step's folder. */
function seedFile(task: { dir: string; steps: readonly HarnessStep[] }): string | undefined {
  for (const d of [task.dir, task.steps[0]?.dir]) {
    if (d && existsSync(join(d, SEED_FILE)) && existsSync(join(d, "instruction.md"))) return join(d, SEED_FILE);
  }
  return undefined;
}

/** The harness of an installed CLI. */
export function cliHarness(spec: CliSpec): Harness {
  const trials = new Map<string, TrialState>();
  const keyEnv = spec.keyEnv ?? DEFAULT_KEY_ENV;
  // a registered agent installed by a script of its own vendors nothing: its invocation is the whole command line
  const vendors = needsVendoring(spec);
  if (spec.stdoutName.includes("/") || spec.stdoutName === STDERR_NAME) throw new Error(`${spec.name}: stdoutName must be a plain file name other than ${STDERR_NAME}`);
  const state = (ctx: HarnessContext): TrialState => {
    const s = ctx.trialId ? trials.get(ctx.trialId) : undefined;
    if (!s) throw new Error(`${spec.name} runs a trial it did not prepare`);
    return s;
  };

  return {
    name: spec.name,
    usesModel: true,

    checkRequest(req) {
      checkCliRequest(spec, req);
    },

    prepare(task, trial) {
      let m: ReturnType<typeof checkCliRequest>;
      try {
        m = checkCliRequest(spec, trial);
      } catch (e) {
        if (e instanceof EvolveError) throw new TrialFailure(e.code === "agent_model_unsupported" ? "AgentModelUnsupportedError" : "AgentRequestInvalidError", e.message);
        throw e;
      }
      const seedPath = seedFile(task);
      if (seedPath && !spec.seedsTrajectory) {
        throw new TrialFailure("TrajectorySeedUnsupportedError", `the task seeds a session (${relative(task.dir, seedPath)}), which ${spec.name} cannot load; only claude-code and codex can`);
      }
      // the spec's own version first (what `agent pull` fetches by default), else the newest there
      const vendored = vendors ? (findVendored(spec.name, spec.vendor.packages[0]?.version) ?? findVendored(spec.name)) : undefined;
      if (vendors && !vendored && !spec.vendor.imageCommand) {
        throw new TrialFailure("AgentNotInstalledError", `${spec.name} is not vendored on this machine: run \`evolve agent pull ${spec.name}\` (on a connected machine, then \`evolve agent export/import\`)`);
      }
      if (vendored) {
        // what the box will run is what was pulled or imported: a file changed since (on the host, by anything) is
        // never mounted. Cheap past the first trial of a process: unchanged files are re-stat'ed, not re-read
        const problems = verifyVendoredCached(vendored.dir);
        if (problems.length > 0) {
          const p = problems[0];
          throw new TrialFailure(
            "AgentTamperedError",
            `agent_tampered: the vendored ${spec.name} ${vendored.manifest.version} at ${vendored.dir} differs from its manifest: ${p.path}: ${p.problem}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ""}; remove the folder and run \`evolve agent pull ${spec.name}@${vendored.manifest.version}\` (or import it again)`,
          );
        }
      }
      const s: TrialState = { trial, ...m, vendored, mcpServers: [...(trial.mcpServers ?? [])] };
      if (seedPath) s.seed = readFileSync(seedPath, "utf8");
      const mounts = vendored ? [{ host: vendored.dir, box: AGENT_ROOT }] : [];
      if (spec.vendor.selfBinary || trial.evolveTools === true) {
        const bin = evolveBinary();
        if (!bin || !existsSync(bin)) {
          const why = spec.vendor.selfBinary ? `${spec.name} runs the evolve binary in the box` : `the job gives ${spec.name} evolve's tools in the box`;
          throw new TrialFailure("AgentNotInstalledError", `${why}, and there is none${bin ? ` at ${bin}` : ""}: run \`npm run build\` (it writes dist/evolve), or set EVOLVE_BINARY`);
        }
        if (spec.vendor.selfBinary) s.selfBinary = bin;
        else s.evolveTools = bin;
        mounts.push({ host: bin, box: BOX_EVOLVE_BINARY });
      }
      if (trial.agentRoot !== undefined) {
        s.agentPolicyRoot = trial.agentRoot;
        mounts.push({ host: trial.agentRoot, box: BOX_AGENT_ROOT });
      }
      trials.set(trial.trialId, s);
      return { scripts: [], mounts };
    },

    async install(ctx) {
      const s = state(ctx);
      const exec = (argv: string[], user = ctx.user) => ctx.engine.exec(ctx.containerId, argv, { user, env: ctx.env, timeoutMs: 30_000 });
      /** Refuses a box that lacks the ELF interpreter `interp` a host-built program asks for (glibc in a musl box). */
      const needsInterpreter = async (interp: string, what: string, instead: string) => {
        const r = await exec(["sh", "-c", `[ -e ${shq(interp)} ] || { ls /lib/ld-musl-* 2>/dev/null | head -1; exit 3; }`], "0");
        if (r.exitCode === 0) return;
        const musl = r.stdout.trim();
        throw new TrialFailure(
          "AgentRuntimeIncompatibleError",
          `${what} needs ${interp} (a glibc system) to run, and this image has none${musl ? ` (it is musl-based: ${musl}, e.g. Alpine)` : ""}; use ${instead}`,
        );
      };
      if (s.evolveTools) {
        const interp = elfInterpreter(realpathIn(s.evolveTools));
        if (interp) await needsInterpreter(interp, `the evolve binary (evolve's tools for ${spec.name})`, "a glibc image (Debian, Ubuntu)");
        // a CLI whose shell tool starts a login shell (codex's exec_command) gets the PATH /etc/profile sets, not
        // the agent's: profile.d puts evolve's folder back there
        const bin = dirname(BOX_EVOLVE_BINARY);
        const profile = await exec(["sh", "-c", `mkdir -p /etc/profile.d && printf '%s\\n' ${shq(`case ":$PATH:" in *:${bin}:*) ;; *) PATH="${bin}:$PATH"; export PATH ;; esac`)} > /etc/profile.d/evolve-tools.sh`], "0");
        if (profile.exitCode !== 0) ctx.log(`${spec.name}: evolve's tools: /etc/profile.d/evolve-tools.sh could not be written (${firstLine(profile.stderr || profile.stdout)}); a login shell will not find evolve on its PATH`);
        ctx.log(`${spec.name}: evolve's tools: the evolve binary mounted read-only at ${BOX_EVOLVE_BINARY}, its folder on the agent's PATH`);
      }
      if (spec.vendor.imageCommand) {
        const r = await exec(["sh", "-c", `command -v ${shq(spec.vendor.imageCommand)}`]);
        const path = r.stdout.trim().split("\n")[0];
        if (r.exitCode === 0 && path.startsWith("/")) {
          s.program = [path];
          if (spec.versionArgs) {
            const v = await exec([path, ...spec.versionArgs]);
            s.version = v.exitCode === 0 ? v.stdout.trim().split("\n")[0].slice(0, 200) || undefined : undefined;
          }
          ctx.log(`${spec.name}: the image has ${spec.vendor.imageCommand} (${path}${s.version ? `, ${s.version}` : ""}); it runs instead of a vendored copy`);
          return;
        }
      }
      if (s.selfBinary) {
        const interp = elfInterpreter(realpathIn(s.selfBinary));
        if (interp) await needsInterpreter(interp, `the evolve binary (${spec.name})`, "a glibc image (Debian, Ubuntu)");
        s.program = [BOX_EVOLVE_BINARY];
        const v = await exec([BOX_EVOLVE_BINARY, "--version"]);
        s.version = v.exitCode === 0 ? v.stdout.trim().replace(/^evolve\s+/, "").split("\n")[0].slice(0, 200) || undefined : undefined;
        ctx.log(`${spec.name}: the evolve binary${s.version ? ` ${s.version}` : ""} mounted read-only at ${BOX_EVOLVE_BINARY}`);
        return;
      }
      if (!vendors) {
        s.program = [];
        return;
      }
      if (!s.vendored) {
        throw new TrialFailure("AgentNotInstalledError", `${spec.name} is neither in the image nor vendored: run \`evolve agent pull ${spec.name}\``);
      }
      // the entry the tree was pulled with: a later spec may name another path for a newer layout
      const entry = s.vendored.manifest.entry || spec.vendor.entry;
      const hostProgram = join(s.vendored.dir, spec.vendor.viaNode ? "node/bin/node" : entry);
      const interp = elfInterpreter(realpathIn(hostProgram));
      if (interp) await needsInterpreter(interp, `the vendored ${spec.name}`, `a glibc image (Debian, Ubuntu) or one with ${spec.vendor.imageCommand ?? spec.name} installed`);
      s.agentRoot = AGENT_ROOT;
      s.program = spec.vendor.viaNode ? [`${AGENT_ROOT}/node/bin/node`, `${AGENT_ROOT}/${entry}`] : [`${AGENT_ROOT}/${entry}`];
      s.version = s.vendored.manifest.version;
      ctx.log(`${spec.name}: vendored ${s.version} mounted read-only at ${AGENT_ROOT}`);
    },

    async run(ctx): Promise<AgentOutcome> {
      const s = state(ctx);
      if (!s.program) throw new Error(`${spec.name} runs before its install`);
      if (!ctx.gatewayKey || !ctx.gatewayUrl) throw new TrialFailure("GatewayConfigError", `${spec.name} calls a model, and the trial has no gateway credential for it`);
      // the .agent/'s instructions reach every CLI before the task's, so its prompt event shows them; the conductor
      // reads the folder itself, and its prompt event carries the system prompt it made of them
      const given = s.agentPolicyRoot !== undefined && !spec.vendor.selfBinary ? withAgentInstructions(s.agentPolicyRoot, ctx.instruction) : ctx.instruction;
      const input: InvocationInput = {
        instruction: given,
        model: s.model,
        provider: s.provider,
        api: s.api,
        gatewayUrl: ctx.gatewayUrl,
        keyEnv,
        home: spec.home,
        workdir: ctx.workdir ?? "/",
        ...(s.agentRoot ? { agentRoot: s.agentRoot } : {}),
        program: s.program,
        options: ctx.options ?? {},
        mcpServers: s.mcpServers,
        ...(s.seed !== undefined ? { seedTrajectory: s.seed } : {}),
        ...(s.agentPolicyRoot !== undefined ? { agentPolicyRoot: BOX_AGENT_ROOT } : {}),
      };
      let inv: ReturnType<CliSpec["invocation"]>;
      try {
        inv = spec.invocation(input);
      } catch (e) {
        // what the spec refuses of the task (a trajectory.json that seeds nothing) is the task's, and costs nothing yet
        if (e instanceof EvolveError) throw new TrialFailure("TaskInvalidError", `${spec.name}: ${e.message}`);
        throw e;
      }
      // the task's env without the gateway's generic variables: the CLI gets its own (and its key) from the spec
      const base = Object.fromEntries(Object.entries(ctx.env).filter(([k]) => !(k in (ctx.gatewayEnv ?? {}))));
      const env = { ...base, ...inv.env, [keyEnv]: ctx.gatewayKey };
      const asAgent = { user: ctx.user, env, timeoutMs: 60_000 };
      // written from inside the box as the agent user: evolve never writes into a folder a live box can write
      const mk = await ctx.engine.exec(ctx.containerId, ["sh", "-c", `mkdir -p "$1" || exit 1; ${HOME_PROBE}`, "sh", spec.home], asAgent);
      if (mk.exitCode !== 0) throw new TrialFailure("AgentSetupError", `${spec.name}: cannot make its home ${spec.home}: ${firstLine(mk.stderr || mk.stdout)}`);
      await makeMissingHome(ctx, spec.name, mk.stdout);
      for (const f of inv.files) {
        const write = 'mkdir -p "$(dirname "$1")" && cat > "$1"' + (f.executable ? ' && chmod 755 "$1"' : "");
        const r = await ctx.engine.exec(ctx.containerId, ["sh", "-c", write, "sh", f.path], { ...asAgent, stdin: f.content });
        if (r.exitCode !== 0) throw new TrialFailure("AgentSetupError", `${spec.name}: cannot write ${f.path} in the box: ${firstLine(r.stderr || r.stdout)}`);
      }
      const agentDir = ctx.agentDir;
      if (agentDir && ctx.trace) {
        s.live = new LiveTrace({
          agentDir, stdoutName: spec.stdoutName, homeRel: relative(BOX.agentLogs, spec.home), parser: spec.parser,
          instruction: given, sink: ctx.trace, log: ctx.log,
        });
        s.live.start();
      }
      s.ran = true;
      const redirect = `> ${BOX.agentLogs}/${spec.stdoutName} 2> ${BOX.agentLogs}/${STDERR_NAME}${inv.stdin === undefined ? " < /dev/null" : ""}`;
      try {
        // the image's PATH is kept (only the box knows it), evolve's folder put first
        const path = s.evolveTools ? `PATH=${shq(dirname(BOX_EVOLVE_BINARY))}:"$PATH"; export PATH; ` : "";
        const r = await ctx.engine.exec(ctx.containerId, ["sh", "-c", `${path}exec "$@" ${redirect}`, "sh", ...inv.argv], {
          user: ctx.user,
          workdir: ctx.workdir,
          env,
          timeoutMs: ctx.timeoutMs,
          onTimeout: ctx.onTimeout,
          ...(inv.stdin !== undefined ? { stdin: inv.stdin } : {}),
        });
        return { exitCode: r.exitCode, timedOut: r.timedOut };
      } catch (e) {
        s.live?.stop();
        throw e;
      }
    },

    async afterAgent(ctx) {
      const s = state(ctx);
      const live = s.live;
      s.live = undefined;
      await live?.finish();
    },

    async settle(st) {
      const s = trials.get(st.trialId);
      trials.delete(st.trialId);
      if (!s) return;
      s.live?.stop();
      const info = { version: s.version, provider: s.provider };
      // a trial that ended before its agent ran has no home and no trajectory: absent, never empty
      if (!s.ran) return { info };
      const leaveOut = [spec.stdoutName, STDERR_NAME, "trajectory.json", "agent-home.json"];
      return { info, records: { home: { box: spec.home, leaveOut }, trajectory: { name: spec.name, version: s.version ?? null, model: s.model } } };
    },
  };
}

/** The file behind `p` (a vendored bin/ entry is a link); the vendored tree is evolve's own, not a box's. */
function realpathIn(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * Run as the agent's user, in the CLI's own environment: says the $HOME it will see when that folder does not exist,
 * with the user's ids. An image's user made without a home (`useradd` without -m, or an ENV HOME naming a missing
 * folder) has none under Docker and podman alike: no engine makes a home.
 */
const HOME_PROBE = 'case "$HOME" in /*) [ -d "$HOME" ] || printf "evolve-home-missing\\n%s\\n%s:%s\\n" "$HOME" "$(id -u)" "$(id -g)" ;; esac';

/**
 * Makes the agent user's missing $HOME (see HOME_PROBE), owned by that user, as a login would. Some CLIs die
 * without it whatever their own config folder (qwen-code resolves $HOME at start: ENOENT, exit 1), and a CLI that
 * never met its task must not leave a 0 that reads as the agent's. Only the home itself becomes the user's; its
 * missing parents are box root's, as `useradd -m` leaves them. `probed` is HOME_PROBE's output.
 */
async function makeMissingHome(ctx: HarnessContext, agent: string, probed: string): Promise<void> {
  const m = /evolve-home-missing\n(\/[^\n]*)\n(\d+):(\d+)\n/.exec(probed);
  if (!m) return;
  const [, home, uid, gid] = m;
  const r = await ctx.engine.exec(ctx.containerId, ["sh", "-c", 'mkdir -p -- "$1" && chown "$2:$3" "$1"', "sh", home, uid, gid], { user: BOX_ROOT, timeoutMs: 60_000 });
  if (r.exitCode !== 0) throw new TrialFailure("AgentSetupError", `${agent}: the agent user's home ${home} does not exist in the image and cannot be made: ${firstLine(r.stderr || r.stdout)}`);
  ctx.log(`${agent}: the agent user's home ${home} does not exist in the image; made it for uid ${uid} (as a login would)`);
}
