/**
 * `evolve trial regrade`: the verifier of a settled trial runs again, as a new trial, on what the original run left.
 * No agent runs. A regrade is a plan (plan.ts) walked by the trial runner (run.ts), prepare → build → boot → verify:
 * a fresh box boots from the task image (or the separate verifier's image), gets the original's kept files back, and
 * the task's tests score it exactly as a normal verify phase would:
 *
 * - shared mode: the kept tree of changes.ts is laid back over the image (added and modified files with their mode
 *   and owner, deleted paths removed), which rebuilds the file system the original verifier saw;
 * - separate mode: the original's collected artifacts are copied into the new trial and put back at their source
 *   paths, which is all a separate verifier ever sees.
 *
 * Only those phases are this file's: the fresh attempt, the box (its networks, caps and user namespace), stops and
 * interrupts, the verdict of a failure and persist are the runner's, the same as a full trial's.
 * What cannot be regraded faithfully is refused before any job is made ({@link regradeRefusal}).
 */
import { existsSync } from "node:fs";
import { cp, readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { endBlocks, entryBlocks } from "../driver/tar.ts";
import { EvolveError } from "../errors.ts";
import { trialDir, type TrialRecord } from "../store/index.ts";
import { DEFAULT_VERIFIER_TIMEOUT_SEC, parseTaskToml, verifierMode } from "../task/model.ts";
import { isJudgeTask } from "../task/rules-env.ts";
import { awaitHealthy, ensureEnvImage, requireImage, requireRunning } from "./box.ts";
import { readKeptFile, readManifest, type KeptManifest } from "./changes.ts";
import { resolveVerifierEnv } from "./env.ts";
import { TrialFailure } from "../outcome.ts";
import { isSettledStatus, toScoring, verifiedVerdict } from "./lifecycle.ts";
import { artifactSources, BOX_ROOT, restoreArtifactCommand } from "../box/layout.ts";
import { boxPutTar } from "./inspect.ts";
import { regradeConfigFile, type TrialPlan } from "./plan.ts";
import type { TrialRoom } from "./phases/room.ts";
import { buildVerifierImage } from "./phases/verify.ts";


/**
 * Why trial `orig` cannot be regraded, as the EvolveError to throw, or undefined when it can. Checked before the
 * regrade job is made, and again by the runner (the original's files may have gone since).
 */
export async function regradeRefusal(home: string, orig: TrialRecord, taskDir: string): Promise<EvolveError | undefined> {
  const id = orig.id;
  if (!isSettledStatus(orig.status)) {
    return new EvolveError("trial_not_settled", `trial ${id} is ${orig.status}: only a settled trial can be regraded`, `wait for it, or \`evolve trial stop ${id}\` first`);
  }
  if (!orig.phase_timings.verify) {
    return new EvolveError("regrade_never_verified", `trial ${id} never reached its verifier (${orig.status}${orig.exception ? `, ${orig.exception.type}` : ""}): there is nothing to regrade`, `run it again instead: \`evolve trial retry ${id}\``);
  }
  if (orig.exception?.type === "VerifierEnvironmentChangedError") {
    // the kept tree holds the agent's changes to the verifier's programs: restoring it would run them
    return new EvolveError(
      "regrade_verifier_changed",
      `trial ${id}'s agent changed what the shared verifier runs (${orig.exception.message.split("\n")[0].slice(0, 200)}): a regrade would restore those changes and run them`,
      "run it again instead: `evolve trial retry`; or declare the paths in [verifier] allowed_system_changes if the task expects them",
    );
  }
  let text: string;
  try {
    text = await readFile(join(taskDir, "task.toml"), "utf8");
  } catch {
    return new EvolveError("task_missing", `the task of trial ${id} (${orig.task_digest}) is no longer stored`, "publish or run the task again");
  }
  const raw = parseToml(text) as Record<string, unknown>;
  if (isJudgeTask(raw)) {
    return new EvolveError("regrade_judge_task", `trial ${id}'s task grades with an LLM judge: a regrade would ask the judge again, not re-score the same run`, "judge tasks are not regradable yet: `evolve trial retry` runs the trial again");
  }
  const cfg = parseTaskToml(text);
  if (cfg.steps && cfg.steps.length > 0) {
    return new EvolveError("regrade_multi_step", `trial ${id}'s task has ${cfg.steps.length} steps: each step's verifier saw a different box, and only the last one is kept`, "run it again instead: `evolve trial retry`");
  }
  if (verifierMode(cfg.verifier) === "shared") {
    const m = await readManifest(trialDir(home, id));
    if (!m) {
      return new EvolveError("regrade_no_kept_files", `trial ${id} kept no files (its box was gone before the end of the run, or it ran before evolve kept them)`, `run it again instead: \`evolve trial retry ${id}\``);
    }
    if (m.skipped.length > 0) {
      return new EvolveError("regrade_files_incomplete", `trial ${id} could not keep ${m.skipped.length} changed path(s) (first: ${m.skipped[0].path}: ${m.skipped[0].reason}): its verifier would see a different box`, `see \`evolve trial files changes ${id}\``);
    }
  }
  return undefined;
}

/** What a regrade runs, for the command to say before it starts: the stored task's own verifier, in its mode. */
export interface RegradeVerifier {
  /** The script that scores, as the task names it. */
  script: "tests/test.sh";
  /** The stored copy of the task's tests/ the verifier runs (the task as stored under its digest, not a working copy). */
  tests_dir: string;
  /** `shared`: on the agent's image with the kept files laid back; `separate`: its own box with the collected artifacts. */
  mode: string;
}

/** The verifier a regrade of a trial of the task stored in `taskDir` runs (regradeRefusal has read that task). */
export async function regradeVerifier(taskDir: string): Promise<RegradeVerifier> {
  const cfg = parseTaskToml(await readFile(join(taskDir, "task.toml"), "utf8"));
  return { script: "tests/test.sh", tests_dir: join(taskDir, "tests"), mode: verifierMode(cfg.verifier) };
}

/**
 * The plan of a regrade re-scoring trial `origId`: no agent; prepare checks the original can still be regraded and
 * brings its artifacts over, build finds the image the original's verifier ran on, boot starts a box from it and
 * lays the original's kept files (or artifacts) back, and verify scores it. One plan per attempt: it holds the box.
 */
export function regradePlan(origId: string): TrialPlan<TrialRoom> {
  let box = "";
  const separate = (room: TrialRoom) => verifierMode(room.cfg.verifier) === "separate";
  return {
    kind: "regrade",
    record: { regrade_of: origId },
    // a regrade's record starts afresh whatever an earlier attempt of it left
    afresh: true,
    prepare: (room) => prepareRegrade(room, origId),
    phases: [
      { phase: "build", run: (room) => buildRegradeImage(room, separate(room)) },
      {
        phase: "boot",
        run: async (room) => {
          box = await bootRegradeBox(room, separate(room));
          if (separate(room)) await restoreArtifacts(room, box);
          else await restoreKept(room, box, origId);
        },
      },
    ],
    score: async (room) => {
      room.update(toScoring());
      const v = await room.phase("verify", () => verifyRegrade(room, box));
      return { verdict: "exception" in v ? verifiedVerdict(null, v.exception) : verifiedVerdict(v.rewards, null), steps: null };
    },
  };
}

/** prepare: the original is still there and regradable, config.json says what is re-scored, its artifacts come over. */
async function prepareRegrade(room: TrialRoom, origId: string): Promise<void> {
  const { req } = room;
  const orig = room.deps.store.getTrial(origId);
  if (!orig) throw new TrialFailure("RegradeSourceMissingError", `the trial to regrade, ${origId}, is not in the store`);
  const refusal = await regradeRefusal(req.home, orig, req.task.dir);
  if (refusal) throw new TrialFailure("RegradeRefusedError", `${refusal.code}: ${refusal.message}`);
  await room.readTask();
  await room.writeConfig(regradeConfigFile(req, room.cfg, origId));
  const separate = verifierMode(room.cfg.verifier) === "separate";
  const origArtifacts = join(trialDir(req.home, origId), "artifacts");
  if (separate && existsSync(origArtifacts)) await cp(origArtifacts, join(room.path, "artifacts"), { recursive: true });
  room.log(`regrade of trial ${origId}: only the verifier runs, on the original's ${separate ? "artifacts" : "kept files"}`);
}

/** build: the image the original's verifier ran on (a separate verifier's own tests/Dockerfile when the task has one). */
async function buildRegradeImage(room: TrialRoom, separate: boolean): Promise<void> {
  const { engine, req } = room;
  const env = room.cfg.environment;
  const log = (line: string) => room.buildLog(line);
  if (env.docker_image) {
    await requireImage(engine, env.docker_image);
    room.image = env.docker_image;
    return;
  }
  const verifierImage = separate ? await buildVerifierImage(engine, req, room.cfg, { force: false, log }) : undefined;
  room.image =
    verifierImage ??
    (
      await ensureEnvImage(engine, {
        taskDigest: req.task.digest, taskDir: req.task.dir, home: req.home, job: req.jobId, timeoutMs: env.build_timeout_sec * 1000, log,
        context: join(req.task.dir, "environment"), force: !!req.forceBuild,
      })
    ).tag;
}

/**
 * boot: the verifier's box, started by the runner as any box of a trial (its network policy, caps and user
 * namespace). A shared verifier's box stands in for the agent's: the runner keeps its changes at persist.
 */
async function bootRegradeBox(room: TrialRoom, separate: boolean): Promise<string> {
  const { cfg, engine } = room;
  const venv = separate ? (cfg.verifier.environment ?? cfg.environment) : cfg.environment;
  const policy = separate ? (room.policies.separateVerifier ?? room.policies.baseline) : room.policies.baseline;
  if (policy.mode === "allowlist") throw new TrialFailure("NetworkPolicyUnsupportedError", "regrading a task whose verifier uses network_mode = \"allowlist\" is not supported yet");
  const box = await room.startBox(room.image, policy, venv, "verifier");
  if (!separate) {
    room.agentBox = box;
    if (cfg.environment.healthcheck) {
      const hc = cfg.environment.healthcheck;
      await room.guard(box, () => awaitHealthy(engine, box, hc, () => !!room.deps.signal?.aborted));
      room.checkCancelled();
    }
  }
  const state = await requireRunning(engine, box, "before the verifier started");
  room.workdir = cfg.environment.workdir || state.workdir || "/";
  return box;
}

/** Lays the original's kept tree over the fresh box: files and folders with mode and owner, deletions redone. */
async function restoreKept(room: TrialRoom, box: string, origId: string): Promise<void> {
  const origPath = trialDir(room.req.home, origId);
  const m = (await readManifest(origPath)) as KeptManifest;
  const blocks: Buffer[] = [];
  const owners: string[] = [];
  const deleted: string[] = [];
  let n = 0;
  for (const e of m.files) {
    if (e.kind === "deleted") {
      deleted.push(e.path);
      continue;
    }
    if (e.kind === "modified" && e.type === "dir") continue;
    const mode = parseInt(e.mode ?? "0644", 8);
    const name = e.path.replace(/^\/+/, "");
    if (e.type === "dir") blocks.push(...entryBlocks({ name, type: "dir", mode }));
    else if (e.type === "symlink") blocks.push(...entryBlocks({ name, type: "symlink", mode: 0o777, linkname: e.target ?? "" }));
    else if (e.type === "file") blocks.push(...entryBlocks({ name, type: "file", mode, data: await keptBytes(origPath, e.path) }));
    else continue;
    n++;
    if ((e.uid ?? 0) !== 0 || (e.gid ?? 0) !== 0) owners.push(`${e.uid ?? 0}:${e.gid ?? 0}`, e.path);
  }
  if (deleted.length) await asRoot(room, box, ["sh", "-c", 'rm -rf -- "$@"', "sh", ...deleted], "removing paths the run deleted");
  if (blocks.length) await room.guard(box, () => boxPutTar(room.engine, box, "/", Buffer.concat([...blocks, endBlocks()])));
  if (owners.length) await asRoot(room, box, ["sh", "-c", 'while [ $# -gt 1 ]; do chown -h "$1" "$2" || exit 1; shift 2; done', "sh", ...owners], "restoring owners");
  room.log(`restored ${n} kept path(s) and ${deleted.length} deletion(s) from trial ${origId}`);
}

/** A kept file of the original, read the one way kept files are (no link followed, bounded); a tampered one refuses the regrade. */
async function keptBytes(origPath: string, path: string): Promise<Buffer> {
  try {
    return await readKeptFile(origPath, path);
  } catch (e) {
    throw new TrialFailure("RegradeRestoreError", (e as Error).message);
  }
}

/** Puts each listed artifact back at its source path, as the original's separate verifier box had it. */
async function restoreArtifacts(room: TrialRoom, box: string): Promise<void> {
  for (const s of artifactSources(room.cfg.artifacts)) await asRoot(room, box, ["sh", "-c", restoreArtifactCommand(s)], `restoring artifact ${s}`);
}

/** verify: the stored task's tests score the box through the one verifier path every run shares (recorder.ts). */
async function verifyRegrade(room: TrialRoom, box: string) {
  const { cfg, req } = room;
  // judge tasks are refused before a regrade starts (regradeRefusal), so no judge credential is ever asked for here
  const { env } = resolveVerifierEnv(cfg.verifier.env);
  return room.runVerifier(box, {
    guard: (fn) => room.guard(box, fn),
    testsDirs: [join(req.task.dir, "tests")],
    workdir: room.workdir,
    env: { ...room.literals, ...env },
    timeoutSec: (cfg.verifier.timeout_sec ?? DEFAULT_VERIFIER_TIMEOUT_SEC) * (req.timeoutMultiplier || 1),
  });
}

/** Runs `cmd` as the box's root for a restore step; a failure is the regrade's RegradeRestoreError, naming `what`. */
async function asRoot(room: TrialRoom, box: string, cmd: string[], what: string) {
  const r = await room.exec(box, cmd, { user: BOX_ROOT, timeoutMs: 120_000 });
  room.checkCancelled();
  if (r.exitCode !== 0) throw new TrialFailure("RegradeRestoreError", `${what} failed (exit ${r.exitCode}): ${(r.stderr || r.stdout).trim().slice(-500)}`);
  return r;
}
