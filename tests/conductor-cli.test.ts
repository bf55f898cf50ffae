/**
 * `evolve conductor run` and `evolve harness init` as a user (or a trial box) runs them: `bun main.ts` against the
 * real gateway in front of the scripted upstream. stdout is the trace, one `{type, data}` line each, exactly the
 * vocabulary's shape; the exit status says whether the run finished.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readEpisodes } from "../engine/conductor/episodes.ts";
import { TRACE_KINDS } from "../engine/trace/events.ts";
import { startConductorGateway, type ConductorGateway } from "./support/conductor-gateway.ts";

const root = resolve(__dirname, "..");
const BUN = join(root, "node_modules/.bin/bun");
let gw: ConductorGateway;
let scratch: string;

beforeAll(async () => {
  gw = await startConductorGateway();
  scratch = mkdtempSync(join(tmpdir(), "evolve-conductor-cli-"));
});
afterAll(async () => {
  await gw.close();
  rmSync(scratch, { recursive: true, force: true });
});
beforeEach(() => gw.upstream.reset());

/** Runs `evolve …` from source without blocking this process (the gateway answering it lives here). */
function evolve(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(BUN, [join(root, "main.ts"), ...args], {
      cwd: scratch,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: scratch, EVOLVE_HOME: join(scratch, "home"), NO_COLOR: "1", ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

describe("evolve harness init + conductor run", () => {
  it("init writes a .agent/ that conductor run runs: trace lines on stdout, the answer in --output-file, exit 0, an episode on --episode", async () => {
    const dir = join(scratch, "proj");
    const init = await evolve(["harness", "init", dir]);
    expect(init.code).toBe(0);
    expect(init.stdout).toContain("protocols/tool_schemas/shell.json");
    const work = join(dir, "work");
    mkdirSync(work);
    writeFileSync(join(dir, "task.md"), "count the files");
    gw.upstream.push({ toolCall: { id: "c1", name: "shell", input: { command: "ls | wc -l" } } }, { toolCall: { id: "c2", name: "finish", input: { answer: "there are 0 files" } } });
    const args = ["conductor", "run", "--agent-root", join(dir, ".agent"), "--prompt-file", join(dir, "task.md"), "-m", "anthropic/claude-sonnet-4-5", "--base-url", gw.url];
    const r = await evolve([...args, "--key-env", "MY_KEY", "--workdir", work, "--output-file", join(dir, "answer.txt"), "--episode"], { MY_KEY: gw.key });
    expect(r.stderr).toBe("conductor: finished after 2 turns\n");
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    for (const l of lines) {
      expect(Object.keys(l).sort()).toEqual(["data", "type"]);
      expect(TRACE_KINDS).toContain(l.type);
    }
    expect(lines[0]).toMatchObject({ type: "prompt", data: { _prompt: { text: "count the files" } } });
    expect(lines.find((l) => l.type === "tool_call").data.update).toMatchObject({ sessionUpdate: "tool_call", toolCallId: "c1", rawInput: { command: "ls | wc -l" } });
    expect(readFileSync(join(dir, "answer.txt"), "utf8")).toBe("there are 0 files");
    const { episodes } = await readEpisodes(join(dir, ".agent"));
    expect(episodes).toHaveLength(1);
    expect(episodes[0]).toMatchObject({ outcome: "finished", score: null, turns: 2, failures: [] });

    const again = await evolve(["harness", "init", dir]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/^error\[agent_dir_exists\]/);
  });

  it("exits 1 when the run does not finish; the key falls back to the provider's *_API_KEY and the URL to *_BASE_URL", async () => {
    const dir = join(scratch, "proj2");
    expect((await evolve(["harness", "init", dir])).code).toBe(0);
    gw.upstream.push({ status: 401, body: { error: { message: "bad key", type: "invalid_request_error" } } });
    const r = await evolve(["conductor", "run", "--agent-root", join(dir, ".agent"), "--prompt", "hi", "-m", "openai/gpt-5", "--workdir", dir], {
      OPENAI_API_KEY: gw.key,
      OPENAI_BASE_URL: `${gw.url}/v1`,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("conductor: model_error after 1 turn: openai-responses 401: bad key\n");
    expect(gw.upstream.requests[0]!.path).toBe("/responses");
  });

  it("refuses a missing key or URL and a bad -m with a one-line error", async () => {
    const dir = join(scratch, "proj3");
    expect((await evolve(["harness", "init", dir])).code).toBe(0);
    const base = ["conductor", "run", "--agent-root", join(dir, ".agent"), "--prompt", "hi"];
    const noKey = await evolve([...base, "-m", "anthropic/x", "--base-url", gw.url]);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/^error\[conductor_endpoint_missing\]: no gateway key: EVOLVE_GATEWAY_KEY and ANTHROPIC_API_KEY are both unset/);
    const noUrl = await evolve([...base, "-m", "gemini/x"], { EVOLVE_GATEWAY_KEY: "k" });
    expect(noUrl.stderr).toMatch(/^error\[conductor_endpoint_missing\]: no gateway URL: give --base-url or set GOOGLE_GEMINI_BASE_URL/);
    const badModel = await evolve([...base, "-m", "claude"], { EVOLVE_GATEWAY_KEY: "k" });
    expect(badModel.code).toBe(2);
    expect(badModel.stderr).toMatch(/^error\[usage\]: -m "claude" is not provider\/model/);
    const env = { EVOLVE_GATEWAY_KEY: "k" };
    const noWork = await evolve([...base, "-m", "anthropic/x", "--base-url", gw.url, "--workdir", join(dir, "nope")], env);
    expect(noWork.stderr).toMatch(/^error\[usage\]: --workdir .*nope does not exist or is not a folder/);
    const noRoot = await evolve(["conductor", "run", "--agent-root", join(dir, "missing"), "--prompt", "hi", "-m", "anthropic/x", "--base-url", gw.url], env);
    expect(noRoot.code).toBe(2);
    expect(noRoot.stderr).toMatch(/^error\[agent_dir_missing\]: the agent directory .*missing does not exist/);
    // a prompt file that would hang (a FIFO with no writer) or never end (/dev/zero) is refused at once
    const fifo = join(dir, "prompt.fifo");
    execFileSync("mkfifo", [fifo]);
    for (const [file, why] of [[fifo, "not a regular file"], ["/dev/zero", "a socket or a device|not a regular file"], [join(dir, "none.md"), "no such file"], [dir, "a folder, not a file"]] as const) {
      const t0 = Date.now();
      const r = await evolve(["conductor", "run", "--agent-root", join(dir, ".agent"), "--prompt-file", file, "-m", "anthropic/x", "--base-url", gw.url], env);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^error\\[conductor_prompt_unreadable\\]: --prompt-file .*: (${why})`));
      expect(Date.now() - t0).toBeLessThan(15_000);
    }
    expect(gw.upstream.requests).toHaveLength(0);
  });
});
