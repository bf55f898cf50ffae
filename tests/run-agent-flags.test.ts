/**
 * `evolve run -a <cli> -m … --ak …`: a model whose provider the agent cannot speak, a missing -m, and an --ak key or
 * value the agent does not take are refused with their codes, exit 2, before a job is recorded (issue 11 §1).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
const TASK = join(root, "fixtures/tasks/valid/minimal");
let home: string;
const host = cliHost();
afterAll(() => host.close());
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-agent-flags-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const evolve = (args: string[]) => host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
const jobs = () => JSON.parse(evolve(["job", "list", "--json"]).stdout);

describe("evolve run refuses what the agent cannot run with, before a job is recorded", () => {
  it.each([
    [["-a", "opencode", "-m", "gemini/gemini-2.5-pro"], "agent_model_unsupported", /opencode cannot call a model of provider gemini/],
    [["-a", "opencode"], "agent_model_invalid", /opencode calls a model: give -m provider\/model/],
    [["-a", "opencode", "-m", "claude-sonnet-4-6"], "agent_model_invalid", /expected provider\/model/],
    [["-a", "opencode", "-m", "anthropic/claude-sonnet-4-6", "--ak", "max_turns=3"], "agent_option_unknown", /--ak max_turns: opencode has no option/],
    [["-a", "opencode", "-m", "anthropic/claude-sonnet-4-6", "--ak", "agent=yolo"], "agent_option_invalid", /--ak agent=yolo: .*one of build, plan/],
    [["-a", "oracle", "--ak", "x=1"], "agent_option_unknown", /oracle takes no --ak options/],
    [["-a", "oracle", "--ak", "x"], "agent_option_invalid", /expected KEY=VALUE/],
  ])("%j → %s", (flags, code, message) => {
    const r = evolve(["run", "-p", TASK, ...flags]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^error\\[${code}\\]: `));
    expect(r.stderr).toMatch(message);
    expect(jobs()).toEqual([]);
  });

  it("names the agent's keys when an --ak key is unknown, and takes --ak from a run config file too", () => {
    const r = evolve(["run", "-p", TASK, "-a", "opencode", "-m", "anthropic/claude-sonnet-4-6", "--ak", "nope=1"]);
    expect(r.stderr).toContain("its options: variant, agent");
    const file = join(home, "run.toml");
    writeFileSync(file, `path = "${TASK}"\nagent = "opencode"\nmodel = "anthropic/claude-sonnet-4-6"\nak = ["nope=1"]\n`);
    const c = evolve(["run", "-c", file]);
    expect(c.code).toBe(2);
    expect(c.stderr).toMatch(/^error\[agent_option_unknown\]: --ak nope/);
    expect(jobs()).toEqual([]);
  });
});
