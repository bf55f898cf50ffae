/**
 * opencode, droid and kimi-code: each recorded run (fixtures/agents/<cli>/<case>) → its parser → ATIF-v1.7
 * (engine/trace/atif.ts) that the validator accepts, with one agent step per model call where the harness says
 * which call an event belongs to, the tool call under the harness's own name with its output as the observation,
 * and the final metrics equal to what the scripted upstream reported.
 */
import { describe, expect, it } from "vitest";
import { buildTrajectory, type AtifTrajectory } from "./atif.ts";
import { validateTrajectory } from "./atif-validate.ts";
import { loadFixture, parse } from "../../tests/support/agent-fixtures.ts";

const VERSIONS: Record<string, string> = { opencode: "1.18.33", droid: "0.225.2", "kimi-code": "2.1.0" };
const SHELL: Record<string, string> = { opencode: "bash", droid: "Execute", "kimi-code": "Bash" };

function atif(cli: string, name: string): { doc: AtifTrajectory; expectedPrompt: number; expectedCompletion: number } {
  const f = loadFixture(cli, name);
  const events = parse(cli, f.stdout, f.session, f.upstream.instruction);
  const doc = buildTrajectory(events, { agent: { name: cli, version: VERSIONS[cli]!, model_name: f.upstream.api } });
  const replies = f.upstream.replies.filter((r) => r.expected);
  return {
    doc,
    expectedPrompt: replies.reduce((s, r) => s + r.expected!.promptTokens, 0),
    expectedCompletion: replies.reduce((s, r) => s + r.expected!.completionTokens, 0),
  };
}

describe.each(["opencode", "droid", "kimi-code"])("%s fixtures as ATIF", (cli) => {
  it.each(["text", "tool", "error"])("%s: a trajectory the validator accepts, the instruction first", (name) => {
    const { doc } = atif(cli, name);
    expect(validateTrajectory(doc)).toEqual([]);
    expect(doc.schema_version).toBe("ATIF-v1.7");
    expect(doc.steps[0]).toMatchObject({ step_id: 1, source: "user", message: loadFixture(cli, name).upstream.instruction });
  });

  it("tool: the shell call under its own name, its output observed in the same step, then the answer", () => {
    const { doc, expectedPrompt, expectedCompletion } = atif(cli, "tool");
    const agent = doc.steps.filter((s) => s.source === "agent");
    const withCall = agent.find((s) => s.tool_calls?.length);
    expect(withCall!.tool_calls).toEqual([expect.objectContaining({ tool_call_id: "call_rec_1", function_name: SHELL[cli] })]);
    expect(withCall!.tool_calls![0]!.arguments).toMatchObject({ command: "echo hello-from-tool > out.txt" });
    expect(withCall!.observation!.results).toEqual([expect.objectContaining({ source_call_id: "call_rec_1" })]);
    expect(agent.at(-1)!.message).toBe("Done: out.txt holds hello-from-tool.");
    expect(doc.final_metrics.total_prompt_tokens).toBe(expectedPrompt);
    expect(doc.final_metrics.total_completion_tokens).toBe(expectedCompletion);
    // two model calls, two agent steps; opencode and kimi-code give each its own metrics, droid states only totals
    expect(agent).toHaveLength(2);
    expect(agent.map((s) => s.metrics?.prompt_tokens)).toEqual(cli === "droid" ? [undefined, undefined] : [2600, 3900]);
    expect(doc.final_metrics.extra.metered_by).toBe(cli === "droid" ? "harness_total" : "harness_calls");
  });

  it("error: the failure is a system step, not the model's words", () => {
    const { doc } = atif(cli, "error");
    const errors = doc.steps.filter((s) => s.source === "system" && s.extra?.kind === "error");
    expect(errors.length).toBeGreaterThan(0);
    expect(doc.steps.some((s) => s.source === "agent" && s.message)).toBe(false);
  });
});
