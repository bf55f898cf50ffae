/**
 * The conductor's seats as `.agent/` sets them: seats.json overrides (a .ts and a .mjs module, imported at run time)
 * taking over what the model is sent, every way seats.json can be wrong (each `seats_invalid`, one line), bad tool
 * schemas and a bad config.json, and a seat that throws mid-run.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readConductorConfig } from "./config.ts";
import { initAgentDir } from "./init.ts";
import { DEFAULT_CONDUCTOR_CONFIG } from "./layout.ts";
import { runConductor } from "./loop.ts";
import { loadSeats, readToolSchemas } from "./seats.ts";
import { DEFAULT_TOOL_SCHEMAS } from "./tools.ts";
import type { TraceUpdate } from "../trace/events.ts";
import { expectCode } from "../../tests/support/expect-code.ts";
import { startConductorGateway, type ConductorGateway } from "../../tests/support/conductor-gateway.ts";

let gw: ConductorGateway;
let scratch: string;
let n = 0;

beforeAll(async () => {
  gw = await startConductorGateway();
  scratch = mkdtempSync(join(tmpdir(), "evolve-conductor-seats-"));
});
afterAll(async () => {
  await gw.close();
  rmSync(scratch, { recursive: true, force: true });
});
beforeEach(() => gw.upstream.reset());

function agent(): { root: string; workdir: string } {
  const dir = join(scratch, `a${++n}`);
  const { agentRoot } = initAgentDir(dir);
  const workdir = join(dir, "work");
  mkdirSync(workdir);
  return { root: agentRoot, workdir };
}

const write = (root: string, rel: string, text: string) => {
  mkdirSync(join(root, rel, ".."), { recursive: true });
  writeFileSync(join(root, rel), text);
};

describe("seats.json overrides", () => {
  it("a .ts planning seat and a .mjs capability seat replace the defaults, and the trace's first event names them", async () => {
    const a = agent();
    write(
      a.root,
      "seats/planning.ts",
      `import type { SeatInput } from "${join(__dirname, "types.ts")}";\nexport function plan(input: SeatInput): string {\n  return "PLANNED BY TS at turn " + input.turn;\n}\n`,
    );
    write(a.root, "seats/tools.mjs", `export const only = (input) => [{ name: "finish", description: "end (turn " + input.turn + ")", input_schema: { type: "object", properties: { answer: { type: "string" } } } }];\n`);
    write(a.root, "harness/seats.json", JSON.stringify({ planning: "seats/planning.ts:plan", capability: "seats/tools.mjs:only" }));
    gw.upstream.push({ toolCall: { id: "c1", name: "shell", input: { command: "true" } } }, { toolCall: { id: "f", name: "finish", input: { answer: "ok" } } });
    const r = await runConductor({ agentRoot: a.root, workdir: a.workdir, instruction: "go", endpoint: gw.endpoint("anthropic") });
    expect(r.outcome).toBe("finished");
    const [first, second] = gw.upstream.requests.map((q) => q.body);
    expect(first.system).toBe("PLANNED BY TS at turn 1");
    expect(second.system).toBe("PLANNED BY TS at turn 2");
    expect(first.tools).toEqual([{ name: "finish", description: "end (turn 1)", input_schema: { type: "object", properties: { answer: { type: "string" } } } }]);
    const prompt = r.trace[0] as Extract<TraceUpdate, { type: "prompt" }>;
    expect(prompt.data._meta?.seats).toEqual({ planning: "seats/planning.ts:plan", capability: "seats/tools.mjs:only" });
    expect(prompt.data._prompt.system).toBe("PLANNED BY TS at turn 1");
  });

  it("a memory seat decides what the model sees, and an action seat can veto", async () => {
    const a = agent();
    write(a.root, "seats/memory.mjs", `export function onlyInstruction(input) { return [{ kind: "instruction", text: "REWRITTEN: " + input.instruction }]; }\n`);
    write(a.root, "seats/action.mjs", `export default { never: (call) => ({ allow: false, reason: "no " + call.name + " today" }) };\n`);
    write(a.root, "harness/seats.json", JSON.stringify({ memory: "seats/memory.mjs:onlyInstruction", action: "seats/action.mjs:never" }));
    gw.upstream.push({ toolCall: { id: "c1", name: "shell", input: { command: "touch made" } } }, { text: "giving up" });
    const r = await runConductor({ agentRoot: a.root, workdir: a.workdir, instruction: "go", endpoint: gw.endpoint("anthropic") });
    expect(r.outcome).toBe("finished");
    expect(gw.upstream.requests[1]!.body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "REWRITTEN: go" }] }]);
    const u = r.trace.find((x) => x.type === "tool_call_update") as Extract<TraceUpdate, { type: "tool_call_update" }>;
    expect(u.data.update._meta).toEqual({ vetoed: true, reason: "no shell today" });
  });

  it("a seat that throws mid-run is seat_failed, after an error event", async () => {
    const a = agent();
    write(a.root, "seats/boom.mjs", `export function boom(input) { if (input.turn > 1) throw new Error("kaboom"); return [{ kind: "instruction", text: input.instruction }]; }\n`);
    write(a.root, "harness/seats.json", JSON.stringify({ memory: "seats/boom.mjs:boom" }));
    gw.upstream.push({ toolCall: { id: "c1", name: "shell", input: { command: "true" } } });
    const seen: TraceUpdate[] = [];
    const e = await expectCode(() => runConductor({ agentRoot: a.root, workdir: a.workdir, instruction: "go", endpoint: gw.endpoint("anthropic"), onTrace: (u) => seen.push(u) }), "seat_failed");
    expect(e.message).toBe("the memory seat failed: kaboom");
    expect(seen.at(-1)).toMatchObject({ type: "error", data: { update: { message: "the memory seat failed: kaboom", fatal: true } } });
  });

  const bad: [string, (root: string) => void, RegExp][] = [
    ["not JSON", (r) => write(r, "harness/seats.json", "{memory:"), /seats\.json is not JSON/],
    ["not an object", (r) => write(r, "harness/seats.json", "[]"), /must hold a JSON object/],
    ["an unknown seat", (r) => write(r, "harness/seats.json", '{"memroy": "m.mjs:f"}'), /unknown seat "memroy"/],
    ["no function part", (r) => write(r, "harness/seats.json", '{"memory": "m.mjs"}'), /must be "module:function"/],
    ["a missing module", (r) => write(r, "harness/seats.json", '{"memory": "nope.mjs:f"}'), /does not exist in \.agent\//],
    [
      "a module outside .agent/",
      (r) => {
        write(join(r, ".."), "outside.mjs", "export const f = () => [];\n");
        write(r, "harness/seats.json", '{"memory": "../outside.mjs:f"}');
      },
      /lies outside \.agent\//,
    ],
    [
      "a link out of .agent/",
      (r) => {
        write(join(r, ".."), "outside2.mjs", "export const f = () => [];\n");
        symlinkSync(join(r, "../outside2.mjs"), join(r, "linked.mjs"));
        write(r, "harness/seats.json", '{"memory": "linked.mjs:f"}');
      },
      /lies outside \.agent\//,
    ],
    ["an absolute module path", (r) => write(r, "harness/seats.json", JSON.stringify({ memory: `${r}/m.mjs:f` })), /must be a path relative to \.agent\//],
    [
      "a missing export",
      (r) => {
        write(r, "m.mjs", "export const other = () => [];\n");
        write(r, "harness/seats.json", '{"memory": "m.mjs:build"}');
      },
      /exports no function "build"/,
    ],
    [
      "a module that does not load",
      (r) => {
        write(r, "broken.mjs", "export const = ;\n");
        write(r, "harness/seats.json", '{"memory": "broken.mjs:f"}');
      },
      /cannot be loaded/,
    ],
  ];
  for (const [what, setup, message] of bad) {
    it(`seats.json with ${what} is seats_invalid`, async () => {
      const a = agent();
      setup(a.root);
      const e = await expectCode(() => loadSeats(a.root), "seats_invalid");
      expect(e.message).toMatch(message);
      expect(e.message.includes("\n")).toBe(false);
    });
  }
});

describe("tool schemas and config.json", () => {
  it("init's schemas are the built-in ones; an absent folder means the built-in ones too", () => {
    const a = agent();
    expect(readToolSchemas(a.root).map((s) => s.name)).toEqual(["edit_file", "finish", "read_file", "shell", "write_file"]);
    expect(readToolSchemas(a.root).find((s) => s.name === "shell")).toEqual(DEFAULT_TOOL_SCHEMAS.shell);
    rmSync(join(a.root, "protocols"), { recursive: true });
    expect(readToolSchemas(a.root)).toHaveLength(5);
  });

  it("a bad schema is tool_schema_invalid, naming the file", async () => {
    const a = agent();
    write(a.root, "protocols/tool_schemas/shell.json", '{"name": "shell", "description": "x", "input_schema": {"type": "array"}}');
    const e = await expectCode(() => loadSeats(a.root), "tool_schema_invalid");
    expect(e.message).toMatch(/^protocols\/tool_schemas\/shell\.json: input_schema must be an object schema/);
    write(a.root, "protocols/tool_schemas/shell.json", '{"name": "browse", "description": "x", "input_schema": {"type": "object"}}');
    expect((await expectCode(() => loadSeats(a.root), "tool_schema_invalid")).message).toMatch(/"browse" is no tool of the conductor/);
    write(a.root, "protocols/tool_schemas/shell.json", "{");
    expect((await expectCode(() => loadSeats(a.root), "tool_schema_invalid")).message).toMatch(/not JSON/);
  });

  it("config.json over the defaults; unknown keys and wrong types are conductor_config_invalid", async () => {
    const a = agent();
    expect(readConductorConfig(a.root)).toEqual(DEFAULT_CONDUCTOR_CONFIG);
    write(a.root, "harness/config.json", '{"max_turns": 3, "disabled_tools": ["shell"]}');
    expect(readConductorConfig(a.root)).toEqual({ ...DEFAULT_CONDUCTOR_CONFIG, max_turns: 3, disabled_tools: ["shell"] });
    write(a.root, "harness/config.json", '{"max_turn": 3}');
    expect((await expectCode(() => readConductorConfig(a.root), "conductor_config_invalid")).message).toMatch(/unknown key "max_turn"/);
    write(a.root, "harness/config.json", '{"max_turns": 2.5}');
    expect((await expectCode(() => readConductorConfig(a.root), "conductor_config_invalid")).message).toMatch(/max_turns must be a whole number/);
    write(a.root, "harness/config.json", '{"shell_timeout_sec": "10"}');
    await expectCode(() => readConductorConfig(a.root), "conductor_config_invalid");
    write(a.root, "harness/config.json", "nope");
    expect((await expectCode(() => runConductor({ agentRoot: a.root, workdir: a.workdir, instruction: "x", endpoint: gw.endpoint("anthropic") }), "conductor_config_invalid")).message).toMatch(/is not JSON/);
    expect(gw.upstream.requests).toHaveLength(0);
  });
});
