/**
 * Build context escape (issue 9 §2): a compose `build.context: ../../../..` or an absolute `dockerfile` must be
 * refused by `task validate` and, again, by the trial driver before anything is built, since only the driver sees
 * the resolved environment that interpolation fills in. Every build input stays inside the task.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_CEILINGS } from "../engine/config.ts";
import { buildEscape, composeBuildEscapes } from "../engine/task/compose-build.ts";
import { validateTask } from "../engine/task/validate.ts";
import { ComposeTask, parseCompose } from "../engine/trial/compose.ts";
import { resolveAgentEnv } from "../engine/trial/env.ts";
import { TrialFailure } from "../engine/outcome.ts";

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

  it("names each escaping service's build line, a repeated service key by its first writing (CRLF lines too)", () => {
    const text = "services:\r\n  a:\r\n    build: ../..\r\n  main:\r\n    build: .\r\n  b:\r\n    image: x\r\n    build: /abs\r\n  a:\r\n    build: ../../later\r\n  c: {build: ~/x}\r\n";
    expect(composeBuildEscapes(text, {}).map((e) => [e.service, e.line])).toEqual([
      ["a", 3],
      ["b", 8],
      ["c", 11],
    ]);
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
    expect(refusal(() => ComposeTask.load(join(FIXTURES, "invalid", "build_context_outside_task"), {}, {}))).toBeInstanceOf(TrialFailure);
  });

  it("still builds what stays inside", () => {
    const svcs = parseCompose("services:\n  main:\n    build: ..\n  side:\n    build:\n      context: ../tests\n      dockerfile: Dockerfile\n", {});
    expect(svcs.map((s) => [s.name, s.build])).toEqual([
      ["main", { context: "..", dockerfile: undefined }],
      ["side", { context: "../tests", dockerfile: "Dockerfile" }],
    ]);
  });
});

/**
 * issue 20 §7: `task validate --secret` passed a compose build context interpolated from a secret (it saw the
 * default), and the run with the secret's value refused it. Both now call composeBuildEscapes on the task's table as
 * written: a build input a secret can set is refused by both, whatever the job attaches.
 */
describe("a build a secret can choose", () => {
  const FROM_SECRET = ["build_context_from_secret", "build_context_from_secret--dockerfile", "build_context_from_secret--embedded"];
  const tableOf = (dir: string) => {
    const m = /\[environment\.env\]\n([A-Z_]+) = "(.*)"/.exec(readFileSync(join(dir, "task.toml"), "utf8"))!;
    return { [m[1]]: m[2] };
  };
  const secretName = (table: Record<string, string>) => /\$\{([A-Z_]+)/.exec(Object.values(table)[0])![1];

  it.each(FROM_SECRET)("%s: validate refuses it with --secret or without, and the run refuses it whatever the secret holds", async (name) => {
    const dir = join(FIXTURES, "invalid", name);
    const table = tableOf(dir);
    const secret = secretName(table);
    for (const secrets of [new Set<string>(), new Set([secret])]) {
      const r = await validateTask(dir, { ...OPTS, secrets });
      expect(r.findings.filter((f) => f.severity === "error").map((f) => f.code)).toEqual(["build_context_from_secret"]);
      expect(r.findings[0].message).toMatch(/is interpolated from [A-Z]+, which an attached secret can set; a secret never chooses what is built$/);
    }
    for (const value of [undefined, ".", "sidecar", "../../..", "/etc"]) {
      const env = resolveAgentEnv(table, value === undefined ? {} : { [secret]: value }).all;
      const e = (() => {
        try {
          ComposeTask.load(dir, env, table);
        } catch (x) {
          return x;
        }
      })();
      expect(e, String(value)).toBeInstanceOf(TrialFailure);
      expect((e as TrialFailure).type).toBe("TaskInvalidError");
      expect((e as Error).message).toMatch(/services\.side\.build: .* is interpolated from [A-Z]+, which an attached secret can set; a task builds from its own files only, never from a path a secret chooses/);
    }
  });

  it("gives the same answer in validate and in the run for every table and secret", async () => {
    const composes = ["services:\n  main:\n    build: .\n  s:\n    build: ${X}\n", "services:\n  main:\n    build: .\n  s:\n    image: a:${X}\n", "services:\n  main:\n    build:\n      context: ${X:-.}\n"];
    const tables: Record<string, string>[] = [{ X: "." }, { X: "../.." }, { X: "${S}" }, { X: "${S:-.}" }, { X: "${S:-../..}" }, {}];
    for (const compose of composes) {
      for (const table of tables) {
        const body = Object.entries(table).map(([k, v]) => `${k} = "${v}"`).join("\n");
        const dir = task(compose, body);
        const r = await validateTask(dir, { ...OPTS, secrets: new Set(["S"]) });
        const validateRefuses = r.findings.some((f) => f.code.startsWith("build_context_"));
        for (const value of [undefined, ".", "../../.."]) {
          const env = resolveAgentEnv(table, value === undefined ? {} : { S: value }).all;
          let runRefuses = false;
          try {
            ComposeTask.load(dir, env, table);
          } catch (e) {
            // the build rule's refusals only (an empty `build:` is refused as a service with nothing to run)
            runRefuses = /services\.\w+\.build: /.test((e as Error).message);
          }
          expect(runRefuses, `${compose} ${JSON.stringify(table)} S=${value}`).toBe(validateRefuses);
        }
      }
    }
  });

  it("still builds from a literal variable inside the task", () => {
    const svcs = parseCompose("services:\n  main:\n    build: .\n  s:\n    build: ${CTX}\n", { CTX: "../tests" }, { CTX: "../tests" });
    expect(svcs[1].build).toEqual({ context: "../tests" });
  });
});
