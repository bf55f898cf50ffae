/**
 * Static validation of Harbor-format task directories against platform-tasks.md and Harbor's task.toml schema.
 * Pure: reads files, never runs anything, never throws. Every problem, however odd the input, is a Finding.
 */
import { basename, join } from "node:path";
import { parse, TomlError } from "smol-toml";
import { firstLine } from "../errors.ts";
import type { Finding, TaskReport, ValidateOptions } from "./codes.ts";
import { classifyImageRef, composeServices, commandWords, effectiveEntrypoint, isKeepAlive, readDockerfile, unknownInstructions, userGroupLines, DOCKERFILE_INSTRUCTIONS, type Instruction } from "./dockerfile.ts";
import { composeBuildEscapes } from "./compose-build.ts";
import { taskTreeProblems } from "./digest.ts";
import { isDir, isFile, readText, subdirs } from "./files.ts";
import { arr, didYouMean, Findings, num, showList, showPath, showValue, str, tbl } from "./findings.ts";
import { parseSizeMb, verifierMode } from "./model.ts";
import { checkEnvTemplates, isJudgeTask } from "./rules-env.ts";
import { checkVerifierIndex } from "./rules-index.ts";
import { checkMcp, checkNetwork, verifierNetwork } from "./rules-network.ts";
import { checkSchema } from "./schema-check.ts";
import { indexTomlLines, type KeyPath } from "./toml-lines.ts";

const TASK_NAME = /^[a-zA-Z0-9][a-zA-Z0-9._-]*\/[a-zA-Z0-9][a-zA-Z0-9._-]*$/;

type Raw = Record<string, unknown>;

/** Validates one task directory. Never throws: a missing directory or garbage file is a finding too. */
export async function validateTask(dir: string, opts: ValidateOptions): Promise<TaskReport> {
  const out = new Findings(undefined);
  let name = basename(dir) || dir;
  try {
    const r = await run(dir, opts, out);
    if (r.name) name = r.name;
    return report(dir, name, r.findings.list);
  } catch (e) {
    // a rule bug must not take the whole batch down; refuse the task and say why
    out.add("invalid_value", "task.toml", `the validator failed on this task: ${firstLine(e)}`, "please report this as an evolve bug");
    return report(dir, name, out.list);
  }
}

/** Validates several task directories (a few at a time), in the order given. */
export async function validateTasks(dirs: readonly string[], opts: ValidateOptions): Promise<TaskReport[]> {
  const results: TaskReport[] = new Array(dirs.length);
  let next = 0;
  const worker = async () => {
    while (next < dirs.length) {
      const i = next++;
      results[i] = await validateTask(dirs[i], opts);
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, dirs.length) }, worker));
  return results;
}

function report(dir: string, name: string, unsorted: Finding[]): TaskReport {
  // file by file, top to bottom, the way an author fixes them
  const findings = unsorted
    .map((f, i) => ({ f, i }))
    .sort((a, b) => (a.f.file < b.f.file ? -1 : a.f.file > b.f.file ? 1 : 0) || (a.f.line ?? 0) - (b.f.line ?? 0) || a.i - b.i)
    .map((x) => x.f);
  return { dir, name, ok: !findings.some((f) => f.severity === "error"), findings };
}

async function run(dir: string, opts: ValidateOptions, early: Findings): Promise<{ name?: string; findings: Findings }> {
  if (!(await isDir(dir))) {
    early.add("not_a_directory", ".", `${dir} is not a directory`, "pass the path of a task directory (the folder holding task.toml)");
    return { findings: early };
  }
  // the same rule publish and run apply (digest.ts): a link may point outside the task, a FIFO or device is no file
  const tree = await taskTreeProblems(dir);
  const addTree = (to: Findings) => {
    for (const p of tree) to.add(p.code, p.path, `${p.path} ${p.what}`, p.hint);
  };
  const tomlPath = join(dir, "task.toml");
  if (!(await isFile(tomlPath))) {
    if (!tree.some((p) => p.path === "task.toml")) {
      early.add("task_toml_missing", "task.toml", `${dir} has no task.toml`, "add a task.toml (`evolve task init <dir>` writes a task that validates) or pass the task's own folder");
    }
    addTree(early);
    return { findings: early };
  }
  const text = (await readText(tomlPath, 4 << 20)) ?? "\u0000";
  const out = new Findings(indexTomlLines(text));
  addTree(out);
  let raw: Raw = {};
  let parsed = false;
  try {
    if (text.includes("\u0000")) throw new Error("the file is binary (it contains NUL bytes)");
    raw = (tbl(parse(text)) ?? {}) as Raw;
    parsed = true;
  } catch (e) {
    const line = e instanceof TomlError ? e.line : undefined;
    const msg = firstLine(e);
    out.add("toml_parse_error", "task.toml", `task.toml is not valid TOML: ${msg}`, "fix the syntax at the given line (see toml.io)", line);
  }
  if (parsed) {
    checkSchema(raw, out);
    checkKeys(raw, opts, out);
    checkNetwork(raw, out);
    checkEnvTemplates(raw, opts, out);
  }
  const compose = await checkLayout(dir, raw, out);
  if (parsed) checkMcp(raw, compose, out);
  const taskName = str(tbl(raw.task)?.name);
  return { name: taskName, findings: out };
}

/** Key-level rules that the schema cannot express. */
function checkKeys(raw: Raw, opts: ValidateOptions, out: Findings): void {
  if (raw.version !== undefined) {
    out.toml("deprecated_key", ["version"], `\`version\` is the legacy name of \`schema_version\``, `rename it: schema_version = ${showValue(raw.version)}`);
  }
  const task = tbl(raw.task);
  const tname = str(task?.name);
  if (tname !== undefined && (!TASK_NAME.test(tname) || tname.includes(".."))) {
    out.toml("task_name_invalid", ["task", "name"], `[task] name = ${showValue(tname)} is not \`org/name\``, `use letters, digits, ".", "_", "-" as "my-org/my-task"`);
  }

  const env = tbl(raw.environment);
  const ver = tbl(raw.verifier);
  const venv = tbl(ver?.environment);
  checkEnvironmentTable(env, ["environment"], opts, out);
  checkEnvironmentTable(venv, ["verifier", "environment"], opts, out);

  if (ver?.user !== undefined && !(ver.user === "root" || ver.user === 0 || ver.user === "0")) {
    out.toml("verifier_user_not_root", ["verifier", "user"], `[verifier] user = ${showValue(ver.user)}: the verifier runs as root`, "remove [verifier] user (or set it to \"root\")");
  }
  if (venv !== undefined && ver?.environment_mode === "shared") {
    out.toml(
      "verifier_environment_with_shared",
      ["verifier", "environment"],
      `[verifier.environment] is given but environment_mode = "shared": a shared verifier runs in the agent's box`,
      `set environment_mode = "separate" (or remove it), or remove [verifier.environment]`,
    );
  }
  checkAllowedSystemChanges(ver, ["verifier"], out);
  const steps = Array.isArray(raw.steps) ? raw.steps : [];
  steps.forEach((s, i) => checkAllowedSystemChanges(tbl(tbl(s)?.verifier), ["steps", i, "verifier"], out));
  checkTrajectoryKeys(tbl(raw.agent), ["agent"], out);
  checkArtifacts(raw.artifacts, ["artifacts"], out);
  checkStepKeys(raw, out);
}

/** `[verifier] allowed_system_changes`: absolute box paths without `..`, so an entry covers exactly what it names. */
function checkAllowedSystemChanges(ver: Raw | undefined, path: KeyPath, out: Findings): void {
  const list = ver?.allowed_system_changes;
  if (!Array.isArray(list)) return;
  list.forEach((p, i) => {
    if (typeof p === "string" && p.startsWith("/") && !p.includes("\0") && !p.split("/").includes("..")) return;
    out.toml(
      "allowed_system_change_invalid",
      [...path, "allowed_system_changes", i],
      `[verifier] allowed_system_changes entry ${showValue(p)} is not an absolute box path without '..'`,
      `name the folder or file the agent may change, e.g. "/usr/local/lib/python3.11/site-packages"`,
    );
  });
}

function checkTrajectoryKeys(agent: Raw | undefined, path: KeyPath, out: Findings): void {
  for (const k of ["load_trajectory", "resume_trajectory"]) {
    if (agent?.[k] !== undefined) {
      out.toml("trajectory_key_unsupported", [...path, k], `[${showPath(path)}] ${k} is not supported`, "remove it; to seed a session put trajectory.json beside instruction.md");
    }
  }
}

/** Rules for an `[environment]` or `[verifier.environment]` table. */
function checkEnvironmentTable(env: Raw | undefined, path: KeyPath, opts: ValidateOptions, out: Findings): void {
  if (!env) return;
  const where = showPath(path);
  if (env.allow_internet !== undefined) {
    const to = env.allow_internet === false ? "no-network" : "public";
    out.toml("deprecated_key", [...path, "allow_internet"], `[${where}] allow_internet is deprecated`, `replace it with network_mode = "${to}"`);
  }
  for (const [legacy, modern] of [["memory", "memory_mb"], ["storage", "storage_mb"]] as const) {
    const v = env[legacy];
    if (v === undefined) continue;
    const mb = typeof v === "string" ? parseSizeMb(v) : undefined;
    out.toml("deprecated_key", [...path, legacy], `[${where}] ${legacy} is deprecated`, mb !== undefined ? `replace it with ${modern} = ${mb}` : `replace it with ${modern} (MiB)`);
    if (typeof v === "string" && mb === undefined) {
      out.toml("invalid_value", [...path, legacy], `[${where}] ${legacy} = ${showValue(v)} is not a size like "2G" or "512M"`, `use ${modern} = <MiB>`);
    }
  }
  const os = str(env.os);
  if (os !== undefined && os.toLowerCase() !== "linux") {
    out.toml("os_unsupported", [...path, "os"], `[${where}] os = ${showValue(os)}: only linux tasks run on evolve`, "remove os (linux is the default)");
  }
  const image = str(env.docker_image);
  if (image !== undefined) {
    const verdict = classifyImageRef(image);
    const kp = [...path, "docker_image"];
    if (verdict === "untagged") out.toml("docker_image_untagged", kp, `[${where}] docker_image = ${showValue(image)} has no tag or digest`, `pin it: "${image}:<version>" or "${image}@sha256:<digest>"`);
    else if (verdict === "latest") out.toml("docker_image_latest", kp, `[${where}] docker_image = ${showValue(image)} is pinned to :latest, which moves`, "pin a specific version tag or an @sha256: digest");
    else if (verdict === "malformed") out.toml("invalid_value", kp, `[${where}] docker_image = ${showValue(image)} is not an image reference`, `write it as "registry/name:tag" or "name@sha256:<64 hex>"`);
  }
  const sizes: [string, number | undefined, number, string][] = [
    ["cpus", num(env.cpus), opts.ceilings.cpus, "cpus"],
    ["memory_mb", num(env.memory_mb) ?? (typeof env.memory === "string" ? parseSizeMb(env.memory) : undefined), opts.ceilings.memory_mb, env.memory_mb === undefined && env.memory !== undefined ? "memory" : "memory_mb"],
    ["storage_mb", num(env.storage_mb) ?? (typeof env.storage === "string" ? parseSizeMb(env.storage) : undefined), opts.ceilings.storage_mb, env.storage_mb === undefined && env.storage !== undefined ? "storage" : "storage_mb"],
    ["gpus", num(env.gpus), opts.ceilings.gpus, "gpus"],
  ];
  for (const [what, value, ceiling, key] of sizes) {
    if (value !== undefined && value > ceiling) {
      out.toml(
        "resources_exceed_ceiling",
        [...path, key],
        `[${where}] ${what} = ${value} is above the ceiling of ${ceiling}`,
        `lower ${what} to at most ${ceiling}, or raise [ceilings] ${what} in $EVOLVE_HOME/config.toml`,
      );
    }
  }
  const gpuTypes = arr(env.gpu_types);
  if (gpuTypes.length > 0 && !((num(env.gpus) ?? 0) > 0)) {
    out.toml("gpu_types_without_gpus", [...path, "gpu_types"], `[${where}] gpu_types is set but no gpus are requested`, "set gpus = <count>, or remove gpu_types");
  }
}

const ARTIFACT_KEYS = ["source", "destination", "exclude", "service"];

/** Root and step `artifacts`: strings or {source, destination, exclude, service}. */
function checkArtifacts(v: unknown, path: KeyPath, out: Findings): void {
  if (!Array.isArray(v)) return; // the schema reports a non-array
  v.forEach((entry, i) => {
    const kp = [...path, i];
    const where = showPath(kp);
    let source: unknown;
    let dest: unknown;
    if (typeof entry === "string") source = entry;
    else if (tbl(entry)) {
      const t = tbl(entry)!;
      for (const k of Object.keys(t)) {
        if (!ARTIFACT_KEYS.includes(k)) {
          const guess = didYouMean(k, ARTIFACT_KEYS);
          out.toml("unknown_key", [...kp, k], `unknown key \`${k}\` in ${where}`, guess ? `did you mean \`${guess}\`?` : `known keys: ${ARTIFACT_KEYS.join(", ")}`);
        }
      }
      if (t.source === undefined) {
        out.toml("missing_required_key", kp, `${where}.source is required but missing`, `add source = "/absolute/path"`);
        return;
      }
      for (const k of ["source", "destination", "service"]) {
        if (t[k] !== undefined && typeof t[k] !== "string") out.toml("invalid_type", [...kp, k], `${where}.${k} must be a string, got ${showValue(t[k])}`, `set ${k} to a string`);
      }
      if (t.exclude !== undefined && !(Array.isArray(t.exclude) && t.exclude.every((x) => typeof x === "string"))) {
        out.toml("invalid_type", [...kp, "exclude"], `${where}.exclude must be an array of strings`, `exclude = ["*.log"]`);
      }
      source = t.source;
      dest = t.destination;
    } else {
      out.toml("invalid_type", kp, `${where} must be a path string or a table {source, destination}, got ${showValue(entry)}`, `write "/app/out.json" or { source = "/app/out", destination = "out" }`);
      return;
    }
    if (typeof source === "string") {
      if (hasDotDot(source)) out.toml("artifact_invalid", kp, `${where} source ${showValue(source)} contains \`..\``, "use an absolute path inside the container");
      else if (!source.startsWith("/")) out.toml("artifact_invalid", kp, `${where} source ${showValue(source)} is relative`, `use an absolute container path, e.g. "/app/${source}"`);
    }
    if (typeof dest === "string") {
      const d = dest.replace(/^\.\//, "").replace(/\/+$/, "");
      if (hasDotDot(dest) || dest.startsWith("/")) out.toml("artifact_invalid", kp, `${where} destination ${showValue(dest)} must be a relative path without \`..\``, "name a path under the trial's artifacts folder, e.g. \"out/result.json\"");
      else if (d === "manifest.json") out.toml("artifact_invalid", kp, `${where} destination "manifest.json" is reserved`, "choose another destination name");
    }
  });
}

function hasDotDot(p: string): boolean {
  return p.split(/[/\\]/).includes("..");
}

/** Per-step keys that platform-tasks.md forbids, min_reward, duplicates and step artifacts. */
function checkStepKeys(raw: Raw, out: Findings): void {
  if (!Array.isArray(raw.steps)) return;
  const seen = new Set<string>();
  raw.steps.forEach((s, i) => {
    const step = tbl(s);
    if (!step) return;
    const sp: KeyPath = ["steps", i];
    const name = str(step.name);
    const label = name !== undefined ? `step "${name}"` : `step #${i + 1}`;
    if (name !== undefined) {
      if (seen.has(name)) out.toml("step_name_duplicate", [...sp, "name"], `two [[steps]] are named "${name}"`, "give each step a unique name matching its steps/<name>/ folder");
      seen.add(name);
      if (name === "" || name === "." || name === ".." || /[/\\]/.test(name)) {
        out.toml("invalid_value", [...sp, "name"], `[[steps]] name ${showValue(name)} is not a folder name`, "use a plain folder name such as \"01-setup\"");
      }
    }
    const agent = tbl(step.agent);
    const ver = tbl(step.verifier);
    for (const [t, phase] of [[agent, "agent"], [ver, "verifier"]] as const) {
      if (!t) continue;
      if (t.user !== undefined) {
        out.toml("step_user_forbidden", [...sp, phase, "user"], `${label} sets [steps.${phase}] user = ${showValue(t.user)}`, `remove it; set the user once in [${phase}]${phase === "verifier" ? " (root only)" : ""}`);
      }
      for (const k of ["network_mode", "allowed_hosts"]) {
        if (t[k] !== undefined) {
          out.toml("step_network_forbidden", [...sp, phase, k], `${label} declares [steps.${phase}] ${k}: steps share the task's network`, "remove it; declare the network once in [environment]");
        }
      }
    }
    if (ver) {
      for (const k of ["environment", "environment_mode"]) {
        if (ver[k] !== undefined) {
          out.toml("step_verifier_environment_forbidden", [...sp, "verifier", k], `${label} declares [steps.verifier] ${k}`, "remove it; the verifier mode is set once in [verifier]");
        }
      }
    }
    checkTrajectoryKeys(agent, [...sp, "agent"], out);
    if (step.min_reward !== undefined && !validMinReward(step.min_reward)) {
      out.toml("min_reward_invalid", [...sp, "min_reward"], `${label} min_reward = ${showValue(step.min_reward)} is neither a number nor a table of numbers`, "write min_reward = 0.5 or min_reward = { reward = 0.5 }");
    }
    checkArtifacts(step.artifacts, [...sp, "artifacts"], out);
  });
}

function validMinReward(v: unknown): boolean {
  if (typeof v === "number") return Number.isFinite(v);
  const t = tbl(v);
  return t !== undefined && Object.values(t).every((x) => typeof x === "number" && Number.isFinite(x));
}

/** Files and folders: instruction, tests, environment, steps; Dockerfile rules. Returns compose service names. */
async function checkLayout(dir: string, raw: Raw, out: Findings): Promise<string[]> {
  const env = tbl(raw.environment);
  const ver = tbl(raw.verifier) ?? {};
  const dockerImage = str(env?.docker_image);
  const declared = (Array.isArray(raw.steps) ? raw.steps : []).map((s) => str(tbl(s)?.name));
  const stepDirs = await subdirs(join(dir, "steps"));
  const multi = declared.length > 0 || stepDirs.length > 0;

  if (!multi) {
    const instr = await readText(join(dir, "instruction.md"));
    if (!(await isFile(join(dir, "instruction.md")))) out.add("instruction_missing", "instruction.md", "the task has no instruction.md", "add instruction.md: what the agent is asked to do");
    else if (instr !== undefined && instr.trim() === "") out.add("instruction_empty", "instruction.md", "instruction.md is empty", "say what done looks like, with absolute paths");
    if (!(await isFile(join(dir, "tests", "test.sh")))) out.add("test_script_missing", "tests/test.sh", "the task has no tests/test.sh", "add tests/test.sh that writes /logs/verifier/reward.txt");
    await checkSolution(dir, "solution/solve.sh", "the task", out);
  } else {
    await checkStepDirs(dir, declared, stepDirs, out);
  }

  // environment
  const envDir = join(dir, "environment");
  const hasDockerfile = await isFile(join(envDir, "Dockerfile"));
  const hasCompose = await isFile(join(envDir, "docker-compose.yaml"));
  if (!hasDockerfile && !hasCompose && dockerImage === undefined) {
    const yml = await isFile(join(envDir, "docker-compose.yml"));
    out.add(
      "environment_missing",
      "environment/",
      "no environment/Dockerfile, no environment/docker-compose.yaml and no [environment] docker_image",
      yml ? "rename environment/docker-compose.yml to docker-compose.yaml" : "add environment/Dockerfile, or set [environment] docker_image to a pinned image",
    );
  }
  let services: string[] = [];
  if (hasCompose) {
    const text = (await readText(join(envDir, "docker-compose.yaml"))) ?? "";
    services = composeServices(text);
    if (!services.includes("main")) {
      out.add("compose_main_missing", "environment/docker-compose.yaml", `docker-compose.yaml has no \`main\` service (services: ${showList(services, "none")})`, "name the agent's service `main`");
    }
    // the trial driver calls the same function on the same table: what passes here is what the run builds
    for (const e of composeBuildEscapes(text, tbl(env?.env) ?? {})) {
      if (e.fromSecret !== undefined) {
        out.add(
          "build_context_from_secret",
          "environment/docker-compose.yaml",
          `service ${e.service}: ${e.reason}; a secret never chooses what is built`,
          `write the path in docker-compose.yaml, or make ${e.fromSecret} a literal in [environment.env]`,
          e.line,
        );
        continue;
      }
      out.add(
        "build_context_outside_task",
        "environment/docker-compose.yaml",
        `service ${e.service}: ${e.reason}; a build may read only the task's own files`,
        "keep build.context and build.dockerfile relative paths inside the task (e.g. context: . or ../tests)",
        e.line,
      );
    }
  }
  const separate = verifierMode(ver) === "separate";
  const venv = tbl(ver.environment);
  const verifierImage = venv !== undefined ? str(venv.docker_image) : dockerImage;
  const hasTestsDockerfile = await isFile(join(dir, "tests", "Dockerfile"));
  if (hasDockerfile) {
    const text = await readText(join(envDir, "Dockerfile"));
    const parsed = text !== undefined ? readDockerfile(text) : { instructions: [], syntax: undefined };
    const ins = parsed.instructions;
    for (const u of unknownInstructions(parsed)) unknownInstruction(out, "environment/Dockerfile", u);
    for (const u of userGroupLines(ins)) {
      out.add("dockerfile_user_group", "environment/Dockerfile", `\`USER ${u.args}\` sets a group`, `use \`USER ${u.args.split(":")[0]}\`; set the group with usermod/chown instead`, u.line);
    }
    const ep = effectiveEntrypoint(ins);
    if (ep && dockerImage === undefined && separate && !hasTestsDockerfile && verifierImage === undefined && !isKeepAlive(commandWords(ep.args))) {
      out.add(
        "entrypoint_service_separate_verifier",
        "environment/Dockerfile",
        `ENTRYPOINT ${ep.args} starts a service, and the separate verifier boots a copy of this image with no tests/Dockerfile`,
        `verify in shared mode (environment_mode = "shared"), or give the verifier its own tests/Dockerfile`,
        ep.line,
      );
    }
  }
  if (hasTestsDockerfile && !(separate && verifierImage === undefined)) {
    out.add(
      "tests_dockerfile_not_built",
      "tests/Dockerfile",
      `tests/Dockerfile is never built: ${separate ? "the separate verifier pins a docker_image" : "the verifier is shared"}`,
      "bake anything it installs into the image instead, or remove it",
    );
  }
  if (verifierNetwork(raw) === "no-network") {
    const onDisk = new Set(stepDirs); // a lookup per declared step: a list's includes was quadratic
    const names = declared.filter((n): n is string => n !== undefined && onDisk.has(n));
    await checkVerifierIndex(dir, names, isJudgeTask(raw), out);
  }
  return services;
}

/**
 * The reference solution is optional (platform-tasks.md), but without it the oracle fails the trial as
 * SolutionNotFoundError and `evolve check` cannot prove the task solvable: said as a note, never a refusal.
 */
/**
 * One Dockerfile line whose first word is no instruction: an error, since `docker build` fails on it (and a task
 * that cannot build would settle every trial INFRASTRUCTURE_ERROR). A near keyword is offered (`FROMM` → FROM); a
 * lower-case word that is no keyword is most likely a command whose `\` continuation was forgotten.
 */
function unknownInstruction(out: Findings, file: string, ins: Instruction): void {
  const word = ins.keyword.length > 40 ? `${ins.keyword.slice(0, 40)}…` : ins.keyword;
  const near = didYouMean(ins.keyword, DOCKERFILE_INSTRUCTIONS);
  const hint = near
    ? `did you mean ${near}?`
    : `a Dockerfile line starts with an instruction (${DOCKERFILE_INSTRUCTIONS.join(", ")}); if the line above continues onto this one, end it with \\`;
  out.add("dockerfile_instruction_unknown", file, `unknown instruction ${word}`, hint, ins.line);
}

async function checkSolution(dir: string, rel: string, who: string, out: Findings): Promise<void> {
  if (await isFile(join(dir, rel))) return;
  out.add("solution_missing", rel, `${who} has no reference solution (${rel}): \`evolve check\` and the oracle agent cannot run it`, `add ${rel} that solves it (the agent never sees it), to prove the task solvable`);
}

async function checkStepDirs(dir: string, declared: (string | undefined)[], stepDirs: string[], out: Findings): Promise<void> {
  if (await isFile(join(dir, "instruction.md"))) {
    out.add("steps_root_files_ignored", "instruction.md", "this multi-step task also has a root instruction.md, which is never shown", "move it into steps/<name>/instruction.md or delete it");
  }
  if (declared.length === 0) {
    out.toml("step_undeclared", ["steps"], `steps/ holds ${showList(stepDirs.map((d) => `${d}/`), "")} but task.toml has no [[steps]]`, `declare each step in order: [[steps]]\\nname = "${stepDirs[0]}"`);
  }
  const sharedTest = await isFile(join(dir, "tests", "test.sh"));
  const declaredNames = new Set(declared.filter((n): n is string => n !== undefined));
  for (const d of stepDirs) {
    if (declared.length > 0 && !declaredNames.has(d)) {
      out.add("step_undeclared", `steps/${d}/`, `steps/${d}/ has no [[steps]] entry in task.toml`, `add [[steps]] name = "${d}", or remove the folder`);
    }
  }
  const checked = new Set<string>();
  const onDisk = new Set(stepDirs); // a lookup per declared step: a list's includes was quadratic
  for (let i = 0; i < declared.length; i++) {
    const name = declared[i];
    if (name === undefined || checked.has(name) || name === "" || /[/\\]|^\.\.?$/.test(name)) continue;
    checked.add(name);
    if (!onDisk.has(name)) {
      out.toml("step_dir_missing", ["steps", i, "name"], `[[steps]] "${name}" has no steps/${name}/ folder`, `create steps/${name}/ with instruction.md and tests/test.sh`);
      continue;
    }
    const sd = join(dir, "steps", name);
    if (!(await isFile(join(sd, "instruction.md")))) {
      out.add("step_instruction_missing", `steps/${name}/instruction.md`, `step "${name}" has no instruction.md`, `add steps/${name}/instruction.md`);
    }
    if (!sharedTest && !(await isFile(join(sd, "tests", "test.sh")))) {
      out.add("test_script_missing", `steps/${name}/tests/test.sh`, `step "${name}" has no tests/test.sh (and there is no shared tests/test.sh)`, `add steps/${name}/tests/test.sh`);
    }
    await checkSolution(dir, `steps/${name}/solution/solve.sh`, `step "${name}"`, out);
  }
}
