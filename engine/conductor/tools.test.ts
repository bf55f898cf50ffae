/**
 * The conductor's built-in tools (engine/conductor/tools.ts) on real files and real processes: a shell timeout kills
 * the whole process group (a child ignoring SIGTERM included), output is bounded with a note, a FIFO never blocks a
 * read or a write, and edit_file replaces only an exact, single match.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONDUCTOR_CONFIG } from "./layout.ts";
import { runTool, type ToolContext } from "./tools.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "evolve-conductor-tools-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ctx = (over: Partial<ToolContext["config"]> = {}): ToolContext => ({ workdir: dir, config: { ...DEFAULT_CONDUCTOR_CONFIG, ...over } });
const tool = (name: string, input: Record<string, unknown>, c = ctx()) => runTool({ id: "t", name, input }, c);

/** Whether `pid` still runs: a zombie (killed, not yet reaped by a PID 1 that may never reap) does not. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) [ZX]/.test(stat);
  } catch {
    return false;
  }
}

describe("shell", () => {
  it("returns output and the exit code of a failing command", async () => {
    expect(await tool("shell", { command: "echo out; echo err >&2" })).toEqual({ text: "out\nerr\n", isError: false });
    const r = await tool("shell", { command: "echo nope; exit 7" });
    expect(r).toEqual({ text: "nope\n[exit code 7]", isError: true });
  });

  it("kills the whole process group on timeout, a child that ignores SIGTERM included", async () => {
    const pidFile = join(dir, "child.pid");
    const t0 = Date.now();
    const r = await tool("shell", { command: `(trap '' TERM; exec sleep 30) & echo $! > ${pidFile}; echo started; wait` }, ctx({ shell_timeout_sec: 0.5 }));
    expect(Date.now() - t0).toBeLessThan(4000);
    expect(r.isError).toBe(true);
    expect(r.text).toBe("started\n[killed: the command ran past shell_timeout_sec (0.5 s)]");
    const pid = Number(readFileSync(pidFile, "utf8"));
    for (let i = 0; i < 50 && alive(pid); i++) await new Promise((res) => setTimeout(res, 20));
    expect(alive(pid)).toBe(false);
  });

  it("does not wait for a background process that keeps the output open", async () => {
    const t0 = Date.now();
    const r = await tool("shell", { command: "sleep 3 & echo ok" });
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(r).toEqual({ text: "ok\n", isError: false });
  });

  it("bounds long output to max_observation_chars, keeping its head and tail with a note", async () => {
    const r = await tool("shell", { command: "echo HEAD; yes x | head -c 100000; echo; echo TAIL" }, ctx({ max_observation_chars: 1000 }));
    expect(r.isError).toBe(false);
    expect(r.text.length).toBeLessThan(1100);
    expect(r.text.startsWith("HEAD\n")).toBe(true);
    expect(r.text.endsWith("TAIL\n")).toBe(true);
    expect(r.text).toMatch(/\[… \d+ of 10001\d characters left out …\]/);
  });

  it("runs in the working directory with the given environment", async () => {
    const r = await tool("shell", { command: "pwd; echo $GREETING" }, { ...ctx(), env: { PATH: process.env.PATH ?? "/usr/bin:/bin", GREETING: "hi" } });
    expect(r.text).toBe(`${dir}\nhi\n`);
  });
});

describe("files", () => {
  it("read_file on a FIFO answers an error at once instead of blocking", async () => {
    const fifo = join(dir, "pipe");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const t0 = Date.now();
    const r = await tool("read_file", { path: "pipe" });
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(/not a regular file/);
    const w = await tool("write_file", { path: "pipe", content: "x" });
    expect(w.isError).toBe(true);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("read_file reads by lines from offset, cuts at max_observation_chars and says where to read on", async () => {
    writeFileSync(join(dir, "lines.txt"), Array.from({ length: 100 }, (_, i) => `line ${i + 1}`).join("\n"));
    expect(await tool("read_file", { path: "lines.txt", offset: 3, limit: 2 })).toEqual({ text: "line 3\nline 4", isError: false });
    const cut = await tool("read_file", { path: "lines.txt" }, ctx({ max_observation_chars: 30 }));
    expect(cut.text).toBe("line 1\nline 2\nline 3\nline 4\n[… cut at line 4 of 100: read on with offset 5]");
    expect((await tool("read_file", { path: "missing.txt" })).text).toMatch(/^no such file/);
    expect((await tool("read_file", { path: "." })).text).toMatch(/is a folder/);
  });

  it("write_file creates folders; edit_file replaces an exact single match only", async () => {
    expect((await tool("write_file", { path: "sub/deep/a.txt", content: "one two two" })).isError).toBe(false);
    const file = join(dir, "sub/deep/a.txt");
    expect(readFileSync(file, "utf8")).toBe("one two two");
    const twice = await tool("edit_file", { path: "sub/deep/a.txt", old_text: "two", new_text: "2" });
    expect(twice).toMatchObject({ isError: true });
    expect(twice.text).toMatch(/occurs 2 times/);
    const none = await tool("edit_file", { path: "sub/deep/a.txt", old_text: "three", new_text: "3" });
    expect(none.text).toMatch(/does not occur/);
    expect(readFileSync(file, "utf8")).toBe("one two two");
    expect((await tool("edit_file", { path: "sub/deep/a.txt", old_text: "one", new_text: "1" })).isError).toBe(false);
    expect(readFileSync(file, "utf8")).toBe("1 two two");
    // a shorter write truncates what was there
    await tool("write_file", { path: "sub/deep/a.txt", content: "x" });
    expect(readFileSync(file, "utf8")).toBe("x");
  });

  it("answers a missing argument or an unknown tool as an error result", async () => {
    expect(await tool("shell", {})).toEqual({ text: 'argument "command" must be a non-empty string', isError: true });
    expect(await tool("browse", { url: "x" })).toEqual({ text: 'unknown tool "browse"', isError: true });
  });
});
