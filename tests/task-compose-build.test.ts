/**
 * Build context escape (issue 9 §2): a compose `build.context: ../../../..` or an absolute `dockerfile` must be
 * refused by `task validate` and, again, by the trial driver before anything is built, since only the driver sees
 * the resolved environment that interpolation fills in. Every build input stays inside the task.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_CEILINGS } from "../engine/config.ts";
import { buildEscape, composeBuildEscapes } from "../engine/task/compose-build.ts";
import { validateTask } from "../engine/task/validate.ts";
import { ComposeTask, parseCompose } from "../engine/trial/compose.ts";
import { TrialFailure } from "../engine/trial/outcome.ts";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "tasks");
const OPTS = { ceilings: DEFAULT_CEILINGS, secrets: new Set<string>() };
const root = mkdtempSync(join(tmpdir(), "evolve-compose-build-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const OUTSIDE: [string, { context: string; dockerfile?: string }][] = [
  ["a context above the task", { context: "../../../.." }],
  ["a context just above the task", { context: "../.." }],
  ["an absolute context", { context: "/" }],
  ["a home-relative context", { context: "~/src" }],
  ["a remote context", { context: "https://github.com/acme/box.git" }],
  ["a git ssh context", { context: "git@github.com:acme/box.git" }],
  ["an absolute dockerfile", { context: ".", dockerfile: "/etc/hostname" }],
  ["a dockerfile above the task", { context: "..", dockerfile: "../Dockerfile" }],
  ["a context that climbs back in and out", { context: "sub/../../../x" }],
];
const INSIDE: [string, { context: string; dockerfile?: string }][] = [
  ["the environment folder", { context: "." }],
  ["the task root", { context: ".." }],
  ["a sibling folder of the task", { context: "../tests", dockerfile: "Dockerfile" }],
  ["a dockerfile elsewhere in the task", { context: ".", dockerfile: "../tests/Dockerfile" }],
  ["a sub-folder", { context: "./sidecar" }],
];

describe("the rule", () => {
  it.each(OUTSIDE)("refuses %s", (_l, b) => expect(buildEscape(b)).toMatch(/absolute|outside the task|remote URL/));
  it.each(INSIDE)("accepts %s", (_l, b) => expect(buildEscape(b)).toBeUndefined());
});

/** A copy of valid/minimal with this compose file (and optionally this [environment.env]). */
function task(compose: string, env = ""): string {
  const dir = mkdtempSync(join(root, "t-"));
  cpSync(join(FIXTURES, "valid", "minimal"), dir, { recursive: true });
  writeFileSync(join(dir, "environment", "docker-compose.yaml"), compose);
  if (env) writeFileSync(join(dir, "task.toml"), `[environment.env]\n${env}\n`);
  return dir;
}

describe("task validate", () => {
  it("refuses a sidecar building from a host folder, pointing at its build line", async () => {
    const r = await validateTask(task("services:\n  main:\n    build: .\n  helper:\n    image: a:1\n  evil:\n    build:\n      context: ../../../..\n"), OPTS);
    expect(r.ok).toBe(false);
    expect(r.findings).toEqual([
      expect.objectContaining({ code: "build_context_outside_task", file: "environment/docker-compose.yaml", line: 7, message: expect.stringContaining("service evil") }),
    ]);
  });

  it("refuses the flow-style and interpolated spellings the driver would build", async () => {
    const flow = await validateTask(task(`services: {main: {build: {context: ., dockerfile: /etc/hostname}}}\n`), OPTS);
    expect(flow.findings.map((f) => f.code)).toEqual(["build_context_outside_task"]);
    const viaEnv = await validateTask(task("services:\n  main:\n    build: .\n  s:\n    build: $CTX\n", `CTX = "/srv"`), OPTS);
    expect(viaEnv.findings.map((f) => f.code)).toEqual(["build_context_outside_task"]);
  });

  it("accepts builds that stay inside the task", async () => {
    const r = await validateTask(task("services:\n  main:\n    build:\n      context: ..\n      dockerfile: environment/Dockerfile\n  side:\n    build: ../tests\n"), OPTS);
    expect(r.findings, JSON.stringify(r.findings)).toEqual([]);
    expect(composeBuildEscapes("services: [unclosed\n", {})).toEqual([]);
  });
});

describe("the trial driver", () => {
  const refusal = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      return e;
    }
    return undefined;
  };

  it("refuses before building, as an invalid task, whatever validation saw", () => {
    for (const [, b] of OUTSIDE) {
      const yaml = `services:\n  main:\n    build:\n      context: "${b.context}"\n${b.dockerfile ? `      dockerfile: "${b.dockerfile}"\n` : ""}`;
      const e = refusal(() => parseCompose(yaml, {}));
      expect(e, b.context).toBeInstanceOf(TrialFailure);
      expect((e as TrialFailure).type).toBe("TaskInvalidError");
      expect((e as Error).message).toMatch(/^environment\/docker-compose\.yaml: services\.main\.build: /);
    }
    // a value only the run-time environment supplies (a secret, a host variable) is checked after interpolation
    const late = refusal(() => parseCompose("services:\n  main:\n    build: .\n  s:\n    build: ${CTX}\n", { CTX: "/home" }));
    expect((late as Error).message).toContain("services.s.build");
    expect(refusal(() => ComposeTask.load(join(FIXTURES, "invalid", "build_context_outside_task"), {}))).toBeInstanceOf(TrialFailure);
  });

  it("still builds what stays inside", () => {
    const svcs = parseCompose("services:\n  main:\n    build: ..\n  side:\n    build:\n      context: ../tests\n      dockerfile: Dockerfile\n", {});
    expect(svcs.map((s) => [s.name, s.build])).toEqual([
      ["main", { context: "..", dockerfile: undefined }],
      ["side", { context: "../tests", dockerfile: "Dockerfile" }],
    ]);
  });
});
