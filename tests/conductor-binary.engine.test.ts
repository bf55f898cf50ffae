/**
 * The compiled binary `dist/evolve` runs the conductor with a seats.json override: a .ts module (and a .mjs one) in
 * the `.agent/` imported at run time by the binary's own Bun, which is how a trial box runs the conductor (the
 * binary mounted read-only, no repository, no node_modules). Skipped until `npm run build` has run (CI builds it
 * before `npm test`; its `.engine.test.ts` name keeps it out of the unit tier, which runs before the build).
 */
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initAgentDir } from "../engine/conductor/init.ts";
import { startConductorGateway, type ConductorGateway } from "./support/conductor-gateway.ts";

const built = resolve(__dirname, "../dist/evolve");
const hasBinary = existsSync(built);

let gw: ConductorGateway;
let dir: string;

describe.skipIf(!hasBinary)(`dist/evolve conductor run${hasBinary ? "" : " (skipped: dist/evolve not built; run npm run build)"}`, () => {
  beforeAll(async () => {
    gw = await startConductorGateway();
    dir = mkdtempSync(join(tmpdir(), "evolve-conductor-bin-"));
    // the binary alone in a folder, as a box gets it
    mkdirSync(join(dir, "bin"));
    copyFileSync(built, join(dir, "bin/evolve"));
  });
  afterAll(async () => {
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function evolve(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((done, fail) => {
      const child = spawn(join(dir, "bin/evolve"), args, { cwd: dir, env: { PATH: "/usr/bin:/bin", HOME: dir, NO_COLOR: "1", ...env } });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("error", fail);
      child.on("close", (code) => done({ code, stdout, stderr }));
    });
  }

  it("loads a .ts planning seat and a .mjs memory seat named in seats.json", async () => {
    const { agentRoot } = initAgentDir(join(dir, "proj"));
    mkdirSync(join(agentRoot, "seats"));
    writeFileSync(join(agentRoot, "seats/helper.ts"), "export const prefix: string = \"BINARY-TS\";\n");
    writeFileSync(
      join(agentRoot, "seats/plan.ts"),
      'import { prefix } from "./helper.ts";\ninterface In { turn: number }\nexport function plan(input: In): string {\n  return `${prefix} plan for turn ${input.turn}`;\n}\n',
    );
    writeFileSync(join(agentRoot, "seats/memory.mjs"), 'export function mem(input) { return [{ kind: "instruction", text: "MJS: " + input.instruction }]; }\n');
    writeFileSync(join(agentRoot, "harness/seats.json"), JSON.stringify({ planning: "seats/plan.ts:plan", memory: "seats/memory.mjs:mem" }));
    gw.upstream.push({ toolCall: { id: "f1", name: "finish", input: { answer: "from the binary" } } });
    const r = await evolve(
      ["conductor", "run", "--agent-root", agentRoot, "--prompt", "hello", "-m", "anthropic/claude-sonnet-4-5", "--base-url", gw.url, "--output-file", join(dir, "out.txt")],
      { EVOLVE_GATEWAY_KEY: gw.key },
    );
    expect(r.stderr).toBe("conductor: finished after 1 turn\n");
    expect(r.code).toBe(0);
    expect(readFileSync(join(dir, "out.txt"), "utf8")).toBe("from the binary");
    const body = gw.upstream.requests[0]!.body;
    expect(body.system).toBe("BINARY-TS plan for turn 1");
    expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "MJS: hello" }] }]);
    const first = JSON.parse(r.stdout.split("\n")[0]!);
    expect(first.data._meta.seats).toEqual({ planning: "seats/plan.ts:plan", memory: "seats/memory.mjs:mem" });
  });
});
