/**
 * Table-driven check of the task validator against fixtures/tasks (see its README for the naming convention):
 * valid/ must pass, invalid/<code>[--variant]/ must be refused with exactly that error code, notes/<code>/ must
 * pass while reporting the code.
 */
import { readdirSync, readFileSync, existsSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { DEFAULT_CEILINGS } from "../config.ts";
import { FINDING_CODES, type Finding, type FindingCode, type TaskReport, type ValidateOptions } from "./codes.ts";
import { validateTask } from "./validate.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..", "fixtures", "tasks");
const OPTS: ValidateOptions = { ceilings: DEFAULT_CEILINGS, secrets: new Set() };

/** Error codes that deliberately have no invalid/ fixture. Keep this list short and say why. */
const UNCOVERED_ERROR_CODES: ReadonlyArray<FindingCode> = [
  // a FIFO or device node cannot be committed; engine/task/validate.test.ts makes one at run time
  "task_special_file",
];

/**
 * For a sample of fixtures: the code, and a pattern the `task.toml` line the finding points at must match.
 * This is how a user finds the offending key, so the line must be right, not merely present.
 */
const LINE_SAMPLES: Record<string, { code: FindingCode; line: RegExp }> = {
  "invalid/invalid_type": { code: "invalid_type", line: /^timeout_sec\s*=/ },
  "invalid/invalid_type--cpus-string": { code: "invalid_type", line: /^cpus\s*=/ },
  "invalid/invalid_value": { code: "invalid_value", line: /^network_mode\s*=/ },
  "invalid/invalid_value--reward-strategy": { code: "invalid_value", line: /^multi_step_reward_strategy\s*=/ },
  "invalid/task_name_invalid": { code: "task_name_invalid", line: /^name\s*=/ },
  "invalid/docker_image_latest": { code: "docker_image_latest", line: /^docker_image\s*=/ },
  "invalid/docker_image_untagged--registry-port": { code: "docker_image_untagged", line: /^docker_image\s*=/ },
  "invalid/allowed_hosts_without_allowlist": { code: "allowed_hosts_without_allowlist", line: /^allowed_hosts\s*=/ },
  "invalid/allowed_host_invalid--port": { code: "allowed_host_invalid", line: /^allowed_hosts\s*=/ },
  "invalid/verifier_network_mismatch": { code: "verifier_network_mismatch", line: /^network_mode\s*=\s*"public"/ },
  "invalid/env_template_embedded": { code: "env_template_embedded", line: /^API_URL\s*=/ },
  "invalid/env_template_embedded--verifier-env": { code: "env_template_embedded", line: /^DATABASE_URL\s*=/ },
  "invalid/secret_required": { code: "secret_required", line: /^GITHUB_TOKEN\s*=/ },
  "invalid/judge_value_not_whole": { code: "judge_value_not_whole", line: /^ANTHROPIC_API_KEY\s*=/ },
  "invalid/judge_template_unrecognized": { code: "judge_template_unrecognized", line: /^MY_KEY\s*=/ },
  "invalid/verifier_user_not_root": { code: "verifier_user_not_root", line: /^user\s*=/ },
  "invalid/allowed_system_change_invalid": { code: "allowed_system_change_invalid", line: /^allowed_system_changes\s*=/ },
  "invalid/trajectory_key_unsupported": { code: "trajectory_key_unsupported", line: /^load_trajectory\s*=/ },
  "invalid/trajectory_key_unsupported--resume": { code: "trajectory_key_unsupported", line: /^resume_trajectory\s*=/ },
  "invalid/os_unsupported": { code: "os_unsupported", line: /^os\s*=/ },
  "invalid/resources_exceed_ceiling": { code: "resources_exceed_ceiling", line: /^cpus\s*=/ },
  "invalid/resources_exceed_ceiling--gpus": { code: "resources_exceed_ceiling", line: /^gpus\s*=/ },
  "invalid/step_user_forbidden": { code: "step_user_forbidden", line: /^user\s*=/ },
  "invalid/step_network_forbidden": { code: "step_network_forbidden", line: /^network_mode\s*=/ },
  "invalid/step_verifier_environment_forbidden": { code: "step_verifier_environment_forbidden", line: /^environment_mode\s*=/ },
  "invalid/min_reward_invalid": { code: "min_reward_invalid", line: /^min_reward\s*=/ },
  "invalid/mcp_url_credential": { code: "mcp_url_credential", line: /^url\s*=/ },
  "invalid/mcp_url_invalid": { code: "mcp_url_invalid", line: /^url\s*=/ },
  "invalid/mcp_stdio_without_command": { code: "mcp_stdio_without_command", line: /^(\[\[environment\.mcp_servers\]\]|name|transport)/ },
  "invalid/artifact_invalid": { code: "artifact_invalid", line: /^artifacts\s*=/ },
  "notes/unknown_key": { code: "unknown_key", line: /^timout_sec\s*=/ },
  "notes/key_in_wrong_table": { code: "key_in_wrong_table", line: /^multi_step_reward_strategy\s*=/ },
  "notes/key_in_wrong_table--agent": { code: "key_in_wrong_table", line: /^cpus\s*=/ },
  "notes/deprecated_key": { code: "deprecated_key", line: /^allow_internet\s*=/ },
  "notes/gpu_types_without_gpus": { code: "gpu_types_without_gpus", line: /^gpu_types\s*=/ },
};

function entries(group: string): string[] {
  const d = join(ROOT, group);
  return existsSync(d) ? readdirSync(d).filter((n) => !n.startsWith(".")).sort() : [];
}

/** The code a fixture's name promises: the part before `--`. */
function codeOf(name: string): string {
  return name.split("--")[0];
}

function errorCodes(r: TaskReport): string[] {
  return [...new Set(r.findings.filter((f) => f.severity === "error").map((f) => f.code))].sort();
}

function show(r: TaskReport): string {
  return JSON.stringify(r.findings.map((f) => `${f.severity} ${f.code} ${f.file}:${f.line ?? "-"} ${f.message}`), null, 1);
}

/** Checks every finding is well-formed and, for task.toml, points at a line that exists. */
function expectWellFormed(dir: string, r: TaskReport, deferred = false): void {
  const tomlPath = join(dir, "task.toml");
  const tomlLines = existsSync(tomlPath) && statSync(tomlPath).isFile() ? readFileSync(tomlPath, "utf8").split("\n").length : 0;
  for (const f of r.findings) {
    const ctx = `${basename(dir)}: ${f.code}`;
    expect(Object.keys(FINDING_CODES), ctx).toContain(f.code);
    const want = FINDING_CODES[f.code as FindingCode].severity;
    if (deferred && f.code === "secret_required") expect(f.severity, ctx).toBe("note");
    else expect(f.severity, ctx).toBe(want);
    expect(typeof f.message === "string" && f.message.trim().length > 0, `${ctx} has a message`).toBe(true);
    expect(typeof f.hint === "string" && f.hint.trim().length > 0, `${ctx} has a hint`).toBe(true);
    expect(typeof f.file === "string" && f.file.length > 0, `${ctx} names a file`).toBe(true);
    expect(f.file.startsWith("/"), `${ctx} file is relative to the task (${f.file})`).toBe(false);
    if (f.line !== undefined) {
      expect(Number.isInteger(f.line) && f.line >= 1, `${ctx} line ${f.line} is a positive integer`).toBe(true);
      if (f.file === "task.toml" && tomlLines > 0) expect(f.line, `${ctx} line within task.toml`).toBeLessThanOrEqual(tomlLines);
    }
  }
  expect(r.ok, `ok agrees with the findings: ${show(r)}`).toBe(!r.findings.some((f) => f.severity === "error"));
}

/** The text of the task.toml line a finding points at, trimmed. */
function lineText(dir: string, f: Finding): string {
  const lines = readFileSync(join(dir, "task.toml"), "utf8").split("\n");
  return (lines[(f.line ?? 0) - 1] ?? "").trim();
}

describe("valid/ tasks pass", () => {
  it.each(entries("valid"))("%s", async (name) => {
    const dir = join(ROOT, "valid", name);
    const r = await validateTask(dir, OPTS);
    expectWellFormed(dir, r);
    expect(errorCodes(r), show(r)).toEqual([]);
    expect(r.ok).toBe(true);
  });
});

describe("invalid/<code> tasks are refused with exactly that code", () => {
  it.each(entries("invalid"))("%s", async (name) => {
    const dir = join(ROOT, "invalid", name);
    const code = codeOf(name);
    expect(Object.keys(FINDING_CODES), `fixture name ${name} is a finding code`).toContain(code);
    expect(FINDING_CODES[code as FindingCode].severity).toBe("error");
    const r = await validateTask(dir, OPTS);
    expectWellFormed(dir, r);
    expect(r.ok, show(r)).toBe(false);
    expect(errorCodes(r), show(r)).toEqual([code]);
  });
});

describe("notes/<code> tasks pass and report the code", () => {
  it.each(entries("notes"))("%s", async (name) => {
    const dir = join(ROOT, "notes", name);
    const code = codeOf(name) as FindingCode;
    expect(Object.keys(FINDING_CODES), `fixture name ${name} is a finding code`).toContain(code);
    expect(FINDING_CODES[code].severity).not.toBe("error");
    const r = await validateTask(dir, OPTS);
    expectWellFormed(dir, r);
    expect(errorCodes(r), show(r)).toEqual([]);
    expect(r.ok).toBe(true);
    const f = r.findings.find((x) => x.code === code);
    expect(f, `${code} reported: ${show(r)}`).toBeDefined();
    expect(f!.severity).toBe(FINDING_CODES[code].severity);
  });
});

describe("findings point at the offending task.toml line", () => {
  it.each(Object.entries(LINE_SAMPLES))("%s", async (rel, { code, line }) => {
    const dir = join(ROOT, rel);
    const r = await validateTask(dir, OPTS);
    const f = r.findings.find((x) => x.code === code);
    expect(f, `${code} reported: ${show(r)}`).toBeDefined();
    expect(f!.file).toBe("task.toml");
    expect(f!.line, `${code} has a line`).toBeTypeOf("number");
    expect(lineText(dir, f!), `line ${f!.line} of ${rel}/task.toml`).toMatch(line);
  });
});

describe("the fixture set", () => {
  it("has an invalid/ fixture for every error code", () => {
    const covered = new Set(entries("invalid").map(codeOf));
    const errorCodesInCatalogue = (Object.keys(FINDING_CODES) as FindingCode[]).filter((c) => FINDING_CODES[c].severity === "error");
    const missing = errorCodesInCatalogue.filter((c) => !covered.has(c) && !UNCOVERED_ERROR_CODES.includes(c));
    expect(missing).toEqual([]);
  });

  it("has a notes/ fixture for every non-error code", () => {
    const covered = new Set(entries("notes").map(codeOf));
    const soft = (Object.keys(FINDING_CODES) as FindingCode[]).filter((c) => FINDING_CODES[c].severity !== "error");
    expect(soft.filter((c) => !covered.has(c))).toEqual([]);
  });

  it("has at least 12 valid and 35 invalid tasks", () => {
    expect(entries("valid").length).toBeGreaterThanOrEqual(12);
    expect(entries("invalid").length).toBeGreaterThanOrEqual(35);
  });
});

describe("options change the verdict the way a user expects", () => {
  it("secret_required is a note when secrets are deferred (dataset publish)", async () => {
    const dir = join(ROOT, "invalid", "secret_required");
    const r = await validateTask(dir, { ceilings: DEFAULT_CEILINGS, secrets: "deferred" });
    expectWellFormed(dir, r, true);
    expect(r.ok, show(r)).toBe(true);
    expect(r.findings.find((f) => f.code === "secret_required")?.severity).toBe("note");
  });

  it("an attached --secret satisfies the template", async () => {
    const r = await validateTask(join(ROOT, "invalid", "secret_required"), { ceilings: DEFAULT_CEILINGS, secrets: new Set(["GITHUB_TOKEN"]) });
    expect(r.ok, show(r)).toBe(true);
    expect(r.findings.map((f) => f.code)).not.toContain("secret_required");
  });

  it("an unrelated --secret does not satisfy it", async () => {
    const r = await validateTask(join(ROOT, "invalid", "secret_required"), { ceilings: DEFAULT_CEILINGS, secrets: new Set(["OTHER"]) });
    expect(errorCodes(r)).toEqual(["secret_required"]);
  });

  it("raised ceilings accept a bigger task; lowered ones refuse a smaller one", async () => {
    const big = await validateTask(join(ROOT, "invalid", "resources_exceed_ceiling"), {
      ceilings: { ...DEFAULT_CEILINGS, cpus: 128 },
      secrets: new Set(),
    });
    expect(big.ok, show(big)).toBe(true);
    const small = await validateTask(join(ROOT, "valid", "gpu"), { ceilings: { ...DEFAULT_CEILINGS, gpus: 1 }, secrets: new Set() });
    expect(errorCodes(small), show(small)).toEqual(["resources_exceed_ceiling"]);
  });

  it("a did-you-mean names the key the author meant", async () => {
    const r = await validateTask(join(ROOT, "notes", "unknown_key"), OPTS);
    const f = r.findings.find((x) => x.code === "unknown_key");
    expect(f, show(r)).toBeDefined();
    expect(`${f!.message} ${f!.hint}`).toContain("timeout_sec");
  });

  it("a key in the wrong table names the key, the table it is in and the one it belongs in", async () => {
    const meta = await validateTask(join(ROOT, "notes", "key_in_wrong_table"), OPTS);
    const m = meta.findings.find((x) => x.code === "key_in_wrong_table");
    expect(m, show(meta)).toMatchObject({ severity: "warning" });
    expect(m!.message).toBe("`multi_step_reward_strategy` is in [metadata], where it does nothing: it belongs at the top level");
    const agent = await validateTask(join(ROOT, "notes", "key_in_wrong_table--agent"), OPTS);
    const a = agent.findings.find((x) => x.code === "key_in_wrong_table");
    expect(a!.message).toMatch(/^`cpus` is in \[agent\], where it does nothing: it belongs in \[environment\]/);
    // said once, as the misplaced key, not also as an unknown one
    expect(agent.findings.map((f) => f.code)).not.toContain("unknown_key");
  });

  it("the report names the task from [task] name, else the directory", async () => {
    const full = join(ROOT, "valid", "harbor-full");
    const a = await validateTask(full, OPTS);
    expect(a.name).toBe("evolve-fixtures/harbor-full");
    expect(a.dir).toBe(full);
    const b = await validateTask(join(ROOT, "valid", "minimal"), OPTS);
    expect(b.name).toBe("minimal");
  });

});
