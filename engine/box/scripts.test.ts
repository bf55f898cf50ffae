/**
 * How a task's scripts are run in a box that may be minimal (engine/box/scripts.ts): the `#!` line read host-side
 * and bounded, the one probe (run here by this host's own sh, so the probe script itself is tested), and the choice
 * bash → the script's `#!` interpreter → sh, or ScriptInterpreterNotFoundError naming the script and the program.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { TrialFailure } from "../outcome.ts";
import {
  BoxScripts, DEFAULT_BOX_PATH, parseProbe, parseShebang, planScript, preArtifactsScript, probeBox, probeCommand, programsToProbe, readShebang, statProbe, setupScript,
  shebangProgram, shellQuote, SHEBANG_MAX_BYTES, testScript, type BoxPrograms,
} from "./scripts.ts";

const dir = mkdtempSync(join(tmpdir(), "evolve-scripts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A script file in the scratch folder. */
function script(name: string, text: string, mode = 0o755): { name: string; host: string } {
  const host = join(dir, name);
  writeFileSync(host, text);
  chmodSync(host, mode);
  return { name: `tests/${name}`, host };
}

/** Runs argv on this host, the way a box's exec would. */
function hostExec(argv: string[]): Promise<{ exitCode: number; stdout: string }> {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: "utf8" });
  return Promise.resolve({ exitCode: r.status ?? 127, stdout: r.stdout ?? "" });
}

const box = (present: string[], noShell = false): BoxPrograms => ({ present: new Set(present), noShell });

function failure(fn: () => unknown): TrialFailure {
  try {
    fn();
  } catch (e) {
    if (e instanceof TrialFailure) return e;
    throw e;
  }
  throw new Error("did not throw");
}

describe("the #! line", () => {
  it("is the interpreter and one argument, as the kernel reads it", () => {
    expect(parseShebang("#!/bin/bash\nset -e\n")).toEqual({ interpreter: "/bin/bash" });
    expect(parseShebang("#! /usr/bin/env python3 -u\r\nprint(1)\n")).toEqual({ interpreter: "/usr/bin/env", arg: "python3 -u" });
    expect(parseShebang("echo no shebang\n")).toBeUndefined();
    expect(parseShebang("#!\n")).toBeUndefined();
    expect(parseShebang("")).toBeUndefined();
  });

  it("is read from the host file, no more than the kernel's 256 bytes of it", async () => {
    expect(await readShebang(script("py.sh", "#!/usr/bin/python3\nimport sys\n").host)).toEqual({ interpreter: "/usr/bin/python3" });
    const long = script("long.sh", `#!/bin/${"x".repeat(4 << 20)}\n`);
    const sb = await readShebang(long.host);
    expect(sb!.interpreter.length).toBeLessThanOrEqual(SHEBANG_MAX_BYTES);
    expect(await readShebang(join(dir, "absent.sh"))).toBeUndefined();
  });

  it("names the program the box must have; env is skipped, its -S split", () => {
    expect(shebangProgram({ interpreter: "/usr/bin/env", arg: "python3" })).toEqual({ program: "python3", argv: ["python3"], shell: false });
    expect(shebangProgram({ interpreter: "/usr/bin/env", arg: "-S uv run --script" })).toEqual({ program: "uv", argv: ["uv", "run", "--script"], shell: false });
    expect(shebangProgram({ interpreter: "/usr/bin/env", arg: "bash" }).shell).toBe(true);
    expect(shebangProgram({ interpreter: "/bin/dash" })).toEqual({ program: "/bin/dash", argv: ["/bin/dash"], shell: true });
    // the kernel passes the rest of the line as one argument
    expect(shebangProgram({ interpreter: "/usr/bin/perl", arg: "-w -T" }).argv).toEqual(["/usr/bin/perl", "-w -T"]);
    expect(programsToProbe([{ interpreter: "/usr/bin/python3" }, undefined, { interpreter: "/bin/bash" }])).toEqual(["bash", "sh", "/usr/bin/python3", "/bin/bash"]);
  });
});

describe("the interpreter chosen", () => {
  const bashLine = { interpreter: "/bin/bash" };
  const py = { interpreter: "/usr/bin/python3" };

  it("is bash for a shell script when the box has bash, whatever shell its #! names", () => {
    expect(planScript("tests/test.sh", { interpreter: "/bin/sh" }, box(["bash", "sh"]))).toEqual({ argv: ["bash"] });
    expect(planScript("tests/test.sh", undefined, box(["bash", "sh"]))).toEqual({ argv: ["bash"] });
  });

  it("is the #! shell when the box has no bash, else sh", () => {
    expect(planScript("tests/test.sh", { interpreter: "/bin/dash" }, box(["sh", "/bin/dash"]))).toEqual({ argv: ["/bin/dash"] });
    expect(planScript("tests/test.sh", bashLine, box(["sh"]))).toEqual({ argv: ["sh"] });
    expect(planScript("tests/test.sh", undefined, box(["sh"]))).toEqual({ argv: ["sh"] });
  });

  it("is a non-shell #! interpreter itself, never bash", () => {
    expect(planScript("tests/test.sh", py, box(["bash", "sh", "/usr/bin/python3"]))).toEqual({ argv: ["/usr/bin/python3"] });
  });

  it("is missing, with the script and the program named, when the box has none of them", () => {
    expect(planScript("tests/test.sh", py, box(["bash", "sh"]))).toMatchObject({
      missing: "/usr/bin/python3",
      message: expect.stringMatching(/^tests\/test\.sh starts with #!\/usr\/bin\/python3, and the box has no \/usr\/bin\/python3 to run it/),
    });
    expect(planScript("solution/solve.sh", { interpreter: "/bin/zsh" }, box([]))).toMatchObject({ missing: "bash", message: expect.stringMatching(/solution\/solve\.sh .*neither bash nor sh nor \/bin\/zsh/) });
    expect(planScript("tests/test.sh", bashLine, box([], true))).toMatchObject({ missing: "sh", message: expect.stringMatching(/^tests\/test\.sh cannot run: the box has no sh/) });
  });
});

describe("one probe per box", () => {
  it("asks the box once (this host's sh runs the probe) and gives each script its command line", async () => {
    const calls: string[][] = [];
    const shell = script("shell.sh", "#!/bin/bash\necho hi\n");
    const env = script("env.sh", "#!/usr/bin/env evolve-no-such-program\n");
    const path = script("path.sh", `#!${join(dir, "interp")}\n`);
    const notExec = script("interp", "#!/bin/sh\n", 0o644);
    const scripts = await probeBox([shell, env, path], (argv) => {
      calls.push(argv);
      return hostExec(argv);
    });
    expect(calls).toHaveLength(1);
    expect(calls[0].slice(0, 2)).toEqual(["sh", "-c"]);
    expect(scripts.programs.present.has("sh")).toBe(true);
    expect(scripts.has(shell)).toBe(true);
    expect(scripts.has(notExec)).toBe(false);
    // this host has bash (the repo's scripts need it)
    expect(scripts.command(shell, "/tests/test.sh")).toBe("bash /tests/test.sh");
    // a file that is there but not executable is no interpreter
    expect(failure(() => scripts.command(path, "/tests/path.sh")).message).toMatch(/tests\/path\.sh starts with #!.*interp, and the box has no .*interp/);
    const f = failure(() => scripts.check());
    expect(f.type).toBe("ScriptInterpreterNotFoundError");
    expect(f.status).toBe("INFRASTRUCTURE_ERROR");
    expect(f.message).toMatch(/tests\/env\.sh starts with #!\/usr\/bin\/env evolve-no-such-program, and the box has no evolve-no-such-program/);
    expect(f.message).toMatch(/tests\/path\.sh/);
    expect(() => scripts.command(notExec, "/x")).toThrow(/not among the scripts/);
  });

  // what podman's stat (HEAD /containers/{id}/archive) answers on Debian: Go file modes, a link's target resolved
  const LINK = 2 ** 27;
  const DIR = 2 ** 31;
  const debian: Record<string, { mode: number; linkTarget: string }> = {
    "/usr/bin/bash": { mode: 0o755, linkTarget: "/usr/bin/bash" },
    "/usr/bin/dash": { mode: 0o755, linkTarget: "/usr/bin/dash" },
    "/usr/bin/sh": { mode: LINK + 0o777, linkTarget: "/usr/bin/dash" },
    "/bin/sh": { mode: LINK + 0o777, linkTarget: "/usr/bin/dash" },
    "/bin/bash": { mode: 0o755, linkTarget: "/usr/bin/bash" },
    "/usr/bin/notes": { mode: 0o644, linkTarget: "/usr/bin/notes" },
    "/usr/local/sbin/tool": { mode: 0o700, linkTarget: "/usr/local/sbin/tool" },
    "/usr/local/bin/py": { mode: DIR + 0o755, linkTarget: "/usr/local/bin/py" },
    "/usr/bin/dangling": { mode: LINK + 0o777, linkTarget: "/usr/bin/gone" },
  };
  const statOf = (asked: string[]) => async (p: string) => (asked.push(p), debian[p]);

  it("finds the programs by the engine's stat, with no process in the box, when every one is there", async () => {
    const asked: string[] = [];
    expect(await statProbe(["bash", "sh", "/bin/sh"], DEFAULT_BOX_PATH, statOf(asked))).toEqual({ present: new Set(["bash", "sh", "/bin/sh"]), noShell: false });
    // a link is followed to its target, which the engine resolved; the usual folders are asked first: a stat or two each
    expect(asked).toContain("/usr/bin/dash");
    expect(asked.length).toBeLessThanOrEqual(5);
    // a name is looked for on every folder of PATH
    expect(await statProbe(["tool"], DEFAULT_BOX_PATH, statOf([]))).toEqual({ present: new Set(["tool"]), noShell: false });
    // the box's own PATH is the one searched
    expect(await statProbe(["sh"], "/opt/none", statOf([]))).toBeUndefined();
  });

  it("leaves a program it does not find to the exec probe: missing, not executable, a folder, a dangling link", async () => {
    for (const p of ["evolve-no-such-program", "notes", "/usr/bin/notes", "py", "dangling", "/usr/bin/dangling"]) {
      expect(await statProbe(["bash", p], DEFAULT_BOX_PATH, statOf([])), p).toBeUndefined();
    }
  });

  it("asks the box by exec only when the stat probe did not find everything", async () => {
    const shell = script("quick.sh", "#!/bin/bash\necho hi\n");
    const calls: string[][] = [];
    const exec = (argv: string[]) => (calls.push(argv), hostExec(argv));
    const quick = (programs: readonly string[]) => statProbe(programs, DEFAULT_BOX_PATH, statOf([]));
    expect((await probeBox([shell], exec, quick)).command(shell, "/tests/test.sh")).toBe("bash /tests/test.sh");
    expect(calls).toHaveLength(0);
    const python = script("quick.py", "#!/usr/bin/python3\n");
    await probeBox([shell, python], exec, quick);
    expect(calls).toHaveLength(1);
    // a stat that fails is no answer either: the exec gives it
    await probeBox([shell], exec, () => Promise.reject(new Error("engine gone")));
    expect(calls).toHaveLength(2);
  });

  it("reads a box without sh (the probe exits 127) as one that can run nothing", () => {
    expect(parseProbe({ exitCode: 127, stdout: "" }, ["bash", "sh"])).toEqual({ present: new Set(), noShell: true });
    expect(parseProbe({ exitCode: 0, stdout: "sh\n/usr/bin/python3\nnoise\n" }, ["bash", "sh", "/usr/bin/python3"]).present).toEqual(new Set(["sh", "/usr/bin/python3"]));
    expect(probeCommand(["bash"]).slice(-2)).toEqual(["sh", "bash"]);
  });

  it("says which scripts a minimal box runs with something other than bash", () => {
    const s = new BoxScripts([{ script: { name: "tests/test.sh", host: "/t/tests/test.sh" }, shebang: { interpreter: "/bin/bash" } }], box(["sh"]));
    expect(s.fallbackNote()).toBe("the box has no bash: tests/test.sh with sh");
    expect(s.command({ name: "tests/test.sh", host: "/t/tests/test.sh" }, "/tests/test.sh")).toBe("sh /tests/test.sh");
    expect(new BoxScripts([{ script: { name: "a", host: "/a" }, shebang: undefined }], box(["bash"])).fallbackNote()).toBeUndefined();
  });
});

describe("the task's scripts", () => {
  it("are named as the author knows them; a step's own test.sh is the one its verifier runs", () => {
    const task = mkdtempSync(join(dir, "task-"));
    const mk = (rel: string) => {
      const p = join(task, rel);
      spawnSync("mkdir", ["-p", join(p, "..")]);
      writeFileSync(p, "#!/bin/bash\n");
    };
    mk("tests/test.sh");
    mk("steps/two/tests/test.sh");
    expect(testScript(task, [join(task, "tests"), join(task, "steps", "one", "tests")]).name).toBe("tests/test.sh");
    expect(testScript(task, [join(task, "tests"), join(task, "steps", "two", "tests")]).name).toBe("steps/two/tests/test.sh");
    expect(setupScript(task, join(task, "steps", "one")).name).toBe("steps/one/workdir/setup.sh");
    expect(preArtifactsScript(task).name).toBe("pre_artifacts.sh");
  });

  it("quotes what sh would split", () => {
    expect(shellQuote("/tests/test.sh")).toBe("/tests/test.sh");
    expect(shellQuote("/app dir/it's.sh")).toBe(`'/app dir/it'\\''s.sh'`);
    expect(spawnSync("sh", ["-c", `printf %s ${shellQuote("a b'c $HOME")}`], { encoding: "utf8" }).stdout).toBe("a b'c $HOME");
  });
});
