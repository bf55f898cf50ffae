/**
 * `evolve trajectory validate` through the real CLI: Harbor's own golden trajectories pass, findings print as
 * `PATH: message` with exit 1, and a file that cannot be read as JSON (missing, a folder, a FIFO, a device, not JSON,
 * too large) is `trajectory_unreadable` with exit 2.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";
import { readTrajectoryFile } from "../engine/trace/atif-file.ts";
import { validateTrajectory } from "../engine/trace/atif-validate.ts";
import { buildTrajectory } from "../engine/trace/atif.ts";
import { chunkEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent } from "../engine/trace/events.ts";

const root = resolve(__dirname, "..");
const host = cliHost();
afterAll(() => host.close());
const dir = mkdtempSync(join(tmpdir(), "evolve-atif-cli-"));

function evolve(args: string[]) {
  return host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: join(dir, "home"), NO_COLOR: "1" }, timeoutMs: 60_000 });
}

function file(name: string, body: string | Buffer): string {
  const p = join(dir, name);
  writeFileSync(p, body);
  return p;
}

const HARBOR = join(root, "fixtures/atif/harbor");

describe("evolve trajectory validate", () => {
  const goldens = readdirSync(HARBOR).filter((f) => f.endsWith(".json"));

  it("accepts Harbor's own golden trajectories", () => {
    expect(goldens.length).toBeGreaterThanOrEqual(3);
    for (const g of goldens) {
      const r = evolve(["trajectory", "validate", join(HARBOR, g)]);
      expect({ g, code: r.code, out: r.stdout }).toEqual({ g, code: 0, out: "ok\n" });
    }
  });

  it("accepts what evolve's builder writes", () => {
    const t = buildTrajectory(
      [
        promptEvent("Create hello.txt"),
        chunkEvent("agent_message_chunk", "On it.", "m1"),
        toolCallEvent({ toolCallId: "t1", name: "Write", title: "Write hello.txt", kind: "edit", status: "pending", rawInput: { path: "hello.txt" }, messageId: "m1" }),
        toolResultEvent("t1", "completed", "ok"),
        usageEvent("call", { promptTokens: 10, completionTokens: 2 }, { messageId: "m1" }),
      ],
      { agent: { name: "claude-code", version: "2.1.0" }, sessionId: "s" },
    );
    const r = evolve(["trajectory", "validate", file("built.json", JSON.stringify(t))]);
    expect([r.code, r.stdout]).toEqual([0, "ok\n"]);
  });

  it("prints one PATH: message line per finding and exits 1", () => {
    const golden = JSON.parse(readFileSync(join(HARBOR, "terminus_2-hello-world-invalid-json.trajectory.json"), "utf8"));
    golden.steps[2].tool_calls[0].function_name = 7;
    golden.steps[3].step_id = 9;
    const r = evolve(["trajectory", "validate", file("broken.json", JSON.stringify(golden))]);
    expect(r.code).toBe(1);
    expect(r.stdout.trim().split("\n")).toEqual(["$.steps[2].tool_calls[0].function_name: must be a string, not a number", "$.steps[3].step_id: must be 4 (step ids run from 1 without gaps), not 9"]);
  });

  it("prints {ok, findings} with --json", () => {
    const ok = evolve(["trajectory", "validate", join(HARBOR, goldens[0]), "--json"]);
    expect([ok.code, JSON.parse(ok.stdout)]).toEqual([0, { ok: true, findings: [] }]);
    const bad = evolve(["trajectory", "validate", file("v15.json", JSON.stringify({ schema_version: "ATIF-v1.5", session_id: "s", agent: { name: "a", version: "1" }, steps: [{ step_id: 1, source: "agent", message: "", llm_call_count: 1 }] })), "--json"]);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout)).toEqual({ ok: false, findings: [{ path: "$.steps[0].llm_call_count", message: "llm_call_count is new in ATIF-v1.7; this document is ATIF-v1.5" }] });
  });

  it("refuses what it cannot read as JSON with trajectory_unreadable and exit 2", () => {
    const fifo = join(dir, "fifo");
    execFileSync("mkfifo", [fifo]);
    const cases: [string, RegExp][] = [
      [join(dir, "missing.json"), /no such file/],
      [dir, /a folder/],
      [fifo, /not a regular file/],
      ["/dev/zero", /not a regular file/],
      [file("not.json", "{\"steps\": ["), /not JSON/],
      [file("latin1.json", Buffer.from([0x22, 0xe9, 0x22])), /not UTF-8 text/],
    ];
    for (const [p, why] of cases) {
      const r = evolve(["trajectory", "validate", p]);
      expect(r.code, p).toBe(2);
      expect(r.stdout, p).toBe("");
      expect(r.stderr, p).toMatch(/^error\[trajectory_unreadable\]: cannot read /);
      expect(r.stderr, p).toMatch(why);
    }
  });

  it("refuses a file over the size limit without reading it", async () => {
    const p = file("big.json", JSON.stringify({ notes: "x".repeat(2000) }));
    await expect(readTrajectoryFile(p, 1000)).rejects.toMatchObject({ code: "trajectory_unreadable", exit: 2, message: expect.stringMatching(/over the 1000-byte limit/) });
    expect(validateTrajectory(await readTrajectoryFile(p))).not.toEqual([]);
  });

  it("checks a document with a deeply nested extra without overflowing", () => {
    const depth = 100_000;
    const p = file("deep.json", `{"agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":"","extra":{"x":${"[".repeat(depth)}${"]".repeat(depth)}}}]}`);
    const r = evolve(["trajectory", "validate", p]);
    expect([r.code, r.stdout]).toEqual([0, "ok\n"]);
  });

  it("reads a file with a UTF-8 byte-order mark", () => {
    const p = file("bom.json", "\ufeff" + JSON.stringify({ agent: { name: "a", version: "1" }, steps: [{ step_id: 1, source: "user", message: "" }] }));
    const r = evolve(["trajectory", "validate", p]);
    expect([r.code, r.stdout]).toEqual([0, "ok\n"]);
  });
});
