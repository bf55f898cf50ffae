/**
 * The ATIF validator (engine/trace/atif-validate.ts) rule by rule: each test breaks exactly one rule of harbor.md §4
 * in an otherwise valid document and expects a finding at that rule's path; the valid shapes of every version
 * v1.0–v1.7 pass.
 */
import { describe, expect, it } from "vitest";
import { isIsoTimestamp, MAX_SUBAGENT_DEPTH, validateTrajectory } from "./atif-validate.ts";

type Doc = Record<string, any>;

/** A v1.7 document using most of the format: it must pass, and each test below breaks one thing in it. */
function full(): Doc {
  return {
    schema_version: "ATIF-v1.7",
    session_id: "s-1",
    trajectory_id: "t-root",
    agent: { name: "claude-code", version: "2.1.0", model_name: "claude-sonnet-4-6", tool_definitions: [{ type: "function", function: { name: "Bash" } }], extra: { a: 1 } },
    notes: "n",
    steps: [
      { step_id: 1, timestamp: "2026-01-02T03:04:05Z", source: "system", message: "You are an agent.", observation: { results: [{ content: "ctx" }] }, extra: { context_management: { type: "compaction", boundary: "replace" } } },
      { step_id: 2, timestamp: "2026-01-02T03:04:05.123+00:00", source: "user", message: [{ type: "text", text: "Look:" }, { type: "image", source: { media_type: "image/png", path: "images/a.png" } }], is_copied_context: false },
      {
        step_id: 3,
        source: "agent",
        model_name: "claude-sonnet-4-6",
        reasoning_effort: "high",
        message: "I'll create the file.",
        reasoning_content: "think",
        tool_calls: [{ tool_call_id: "call-1", function_name: "Write", arguments: { path: "hello.txt" }, extra: { x: 1 } }],
        observation: {
          results: [
            { source_call_id: "call-1", content: [{ type: "text", text: "ok" }], extra: { status: "completed" } },
            { source_call_id: null, content: null, subagent_trajectory_ref: [{ trajectory_id: "t-sub", session_id: "s-1" }, { trajectory_path: "trajectory.sub.json" }] },
          ],
        },
        metrics: { prompt_tokens: 812, completion_tokens: 64, cached_tokens: 200, cost_usd: 0.01, prompt_token_ids: [1, 2], completion_token_ids: [3], logprobs: [-0.1], extra: { cache_creation_input_tokens: 5 } },
        llm_call_count: 1,
      },
      { step_id: 4, source: "agent", message: "", llm_call_count: 0, tool_calls: [{ tool_call_id: "d-1", function_name: "dispatch", arguments: {} }] },
    ],
    final_metrics: { total_prompt_tokens: 812, total_completion_tokens: 64, total_cached_tokens: 200, total_cost_usd: 0.01, total_steps: 4, extra: {} },
    continued_trajectory_ref: "trajectory.cont-1.json",
    extra: { k: "v" },
    subagent_trajectories: [{ schema_version: "ATIF-v1.7", trajectory_id: "t-sub", agent: { name: "sub", version: "1" }, steps: [{ step_id: 1, source: "user", message: "go" }] }],
  };
}

const paths = (doc: unknown) => validateTrajectory(doc).map((f) => f.path);
/** Findings of `full()` after `edit`: exactly one, at `path`. */
function onlyFinding(edit: (d: Doc) => void, path: string, message?: RegExp) {
  const d = full();
  edit(d);
  const f = validateTrajectory(d);
  expect(f.map((x) => x.path)).toEqual([path]);
  if (message) expect(f[0].message).toMatch(message);
}

describe("validateTrajectory: valid documents", () => {
  it("accepts the full v1.7 document", () => {
    expect(validateTrajectory(full())).toEqual([]);
  });

  it("accepts a minimal document of each version 1.0–1.7 in its own shape", () => {
    for (let minor = 0; minor <= 7; minor++) {
      const doc: Doc = { schema_version: `ATIF-v1.${minor}`, session_id: "s", agent: { name: "a", version: "1" }, steps: [{ step_id: 1, source: "user", message: "hi" }, { step_id: 2, source: "agent", message: "ok", tool_calls: [{ tool_call_id: "c", function_name: "f", arguments: {} }], observation: { results: [{ source_call_id: "c", content: "r" }] }, metrics: { prompt_tokens: 1, completion_tokens: 1 } }] };
      if (minor >= 1) doc.extra = {};
      if (minor >= 2) doc.steps.push({ step_id: 3, source: "system", message: "s", observation: { results: [{ content: "x" }] } });
      if (minor >= 3) doc.steps[1].metrics.completion_token_ids = [1];
      if (minor >= 4) doc.steps[1].metrics.prompt_token_ids = [1];
      if (minor >= 5) {
        doc.agent.tool_definitions = [];
        doc.steps[0].is_copied_context = true;
      }
      if (minor >= 6) doc.steps[0].message = [{ type: "text", text: "hi" }];
      if (minor >= 6) doc.steps[1].observation.results.push({ subagent_trajectory_ref: [{ session_id: "sub" }] });
      if (minor >= 7) {
        delete doc.session_id;
        doc.steps[1].llm_call_count = 1;
        doc.steps[1].observation.results[1].subagent_trajectory_ref = [{ trajectory_id: "sub" }];
      }
      expect(validateTrajectory(doc), `ATIF-v1.${minor}`).toEqual([]);
    }
  });

  it("takes a document without schema_version as v1.7 (Harbor's default)", () => {
    const d = full();
    delete d.schema_version;
    expect(validateTrajectory(d)).toEqual([]);
  });

  it("treats null on an optional field as absent, as pydantic does", () => {
    expect(validateTrajectory({ agent: { name: "a", version: "1", model_name: null }, steps: [{ step_id: 1, source: "user", message: "", model_name: null, timestamp: null }] })).toEqual([]);
  });
});

describe("validateTrajectory: one finding per broken rule", () => {
  it("forbids unknown keys on every object (extra=forbid)", () => {
    onlyFinding((d) => (d.bogus = 1), "$.bogus", /unknown field/);
    onlyFinding((d) => (d.agent.bogus = 1), "$.agent.bogus");
    onlyFinding((d) => (d.steps[2].bogus = 1), "$.steps[2].bogus");
    onlyFinding((d) => (d.steps[2].tool_calls[0].bogus = 1), "$.steps[2].tool_calls[0].bogus");
    onlyFinding((d) => (d.steps[2].observation.bogus = 1), "$.steps[2].observation.bogus");
    onlyFinding((d) => (d.steps[2].observation.results[0].bogus = 1), "$.steps[2].observation.results[0].bogus");
    onlyFinding((d) => (d.steps[2].observation.results[1].subagent_trajectory_ref[0].bogus = 1), "$.steps[2].observation.results[1].subagent_trajectory_ref[0].bogus");
    onlyFinding((d) => (d.steps[2].metrics.bogus = 1), "$.steps[2].metrics.bogus");
    onlyFinding((d) => (d.final_metrics.bogus = 1), "$.final_metrics.bogus");
    onlyFinding((d) => (d.steps[1].message[0].bogus = 1), "$.steps[1].message[0].bogus");
    onlyFinding((d) => (d.steps[1].message[1].source.bogus = 1), "$.steps[1].message[1].source.bogus");
    onlyFinding((d) => (d["odd key"] = 1), '$["odd key"]');
  });

  it("requires agent, agent.name, agent.version, steps (non-empty), step_id, source, message", () => {
    onlyFinding((d) => delete d.agent, "$.agent", /required/);
    onlyFinding((d) => delete d.agent.name, "$.agent.name");
    onlyFinding((d) => delete d.agent.version, "$.agent.version");
    onlyFinding((d) => delete d.steps, "$.steps");
    onlyFinding((d) => (d.steps = []), "$.steps", /at least one/);
    onlyFinding((d) => delete d.steps[0].source, "$.steps[0].source");
    onlyFinding((d) => (d.steps[0].message = null), "$.steps[0].message", /null/);
    const noId = full();
    delete noId.steps[3].step_id;
    expect(paths(noId)).toEqual(["$.steps[3].step_id"]);
  });

  it("requires tool_call_id, function_name and an arguments object on a tool call", () => {
    onlyFinding((d) => delete d.steps[3].tool_calls[0].function_name, "$.steps[3].tool_calls[0].function_name");
    onlyFinding((d) => (d.steps[3].tool_calls[0].arguments = "x=1"), "$.steps[3].tool_calls[0].arguments", /object/);
    onlyFinding((d) => delete d.steps[3].tool_calls[0].arguments, "$.steps[3].tool_calls[0].arguments");
    const d = full();
    delete d.steps[3].tool_calls[0].tool_call_id;
    expect(paths(d)).toEqual(["$.steps[3].tool_calls[0].tool_call_id"]);
  });

  it("requires observation.results", () => {
    onlyFinding((d) => delete d.steps[0].observation.results, "$.steps[0].observation.results");
  });

  it("checks field types", () => {
    onlyFinding((d) => (d.agent.name = 7), "$.agent.name", /string/);
    onlyFinding((d) => (d.steps[2].metrics.prompt_tokens = 1.5), "$.steps[2].metrics.prompt_tokens", /whole number/);
    onlyFinding((d) => (d.steps[2].metrics.completion_tokens = "64"), "$.steps[2].metrics.completion_tokens");
    onlyFinding((d) => (d.steps[2].metrics.cost_usd = "0.01"), "$.steps[2].metrics.cost_usd");
    onlyFinding((d) => (d.steps[2].metrics.prompt_token_ids = [1, "2"]), "$.steps[2].metrics.prompt_token_ids[1]");
    onlyFinding((d) => (d.steps[2].metrics.logprobs = [true]), "$.steps[2].metrics.logprobs[0]");
    onlyFinding((d) => (d.steps[2].reasoning_effort = true), "$.steps[2].reasoning_effort");
    onlyFinding((d) => (d.steps[1].is_copied_context = "no"), "$.steps[1].is_copied_context");
    onlyFinding((d) => (d.extra = []), "$.extra", /object/);
    onlyFinding((d) => (d.final_metrics.total_steps = -1), "$.final_metrics.total_steps", /at least 0/);
    onlyFinding((d) => (d.final_metrics = { total_steps: "4" }), "$.final_metrics.total_steps", /whole number/);
  });

  it("numbers step_id from 1 without gaps", () => {
    onlyFinding((d) => (d.steps[2].step_id = 4), "$.steps[2].step_id", /must be 3/);
    onlyFinding((d) => (d.steps[0].step_id = 0), "$.steps[0].step_id", /at least 1/);
  });

  it("allows only system, user and agent as source", () => {
    onlyFinding((d) => (d.steps[1].source = "assistant"), "$.steps[1].source", /"system", "user" or "agent"/);
  });

  it("keeps agent-only fields off system and user steps", () => {
    for (const [f, v] of [["model_name", "m"], ["reasoning_effort", 0.5], ["reasoning_content", "r"], ["tool_calls", []], ["metrics", {}]] as const) {
      onlyFinding((d) => (d.steps[1][f] = v), `$.steps[1].${f}`, /only an agent step/);
      onlyFinding((d) => (d.steps[0][f] = v), `$.steps[0].${f}`, /system step/);
    }
  });

  it("keeps metrics and reasoning_content off a step with llm_call_count 0", () => {
    onlyFinding((d) => (d.steps[3].metrics = { prompt_tokens: 1 }), "$.steps[3].metrics", /llm_call_count 0/);
    onlyFinding((d) => (d.steps[3].reasoning_content = "r"), "$.steps[3].reasoning_content", /llm_call_count 0/);
    onlyFinding((d) => (d.steps[3].llm_call_count = -1), "$.steps[3].llm_call_count", /at least 0/);
  });

  it("requires source_call_id to be a tool_call_id of the same step", () => {
    onlyFinding((d) => (d.steps[2].observation.results[0].source_call_id = "d-1"), "$.steps[2].observation.results[0].source_call_id", /no tool_call_id of this step/);
    onlyFinding((d) => (d.steps[0].observation.results[0].source_call_id = "call-1"), "$.steps[0].observation.results[0].source_call_id");
  });

  it("requires a non-null, unique trajectory_id on every embedded subagent trajectory", () => {
    onlyFinding((d) => delete d.subagent_trajectories[0].trajectory_id, "$.subagent_trajectories[0].trajectory_id", /needs a trajectory_id/);
    onlyFinding((d) => (d.subagent_trajectories[0].trajectory_id = null), "$.subagent_trajectories[0].trajectory_id");
    onlyFinding((d) => d.subagent_trajectories.push({ ...d.subagent_trajectories[0] }), "$.subagent_trajectories[1].trajectory_id", /unique/);
  });

  it("checks embedded subagent trajectories as trajectories, with their own paths", () => {
    onlyFinding((d) => (d.subagent_trajectories[0].steps[0].step_id = 2), "$.subagent_trajectories[0].steps[0].step_id");
  });

  it("requires a SubagentTrajectoryRef to name a trajectory_id or a trajectory_path (v1.7), a session_id before", () => {
    onlyFinding((d) => (d.steps[2].observation.results[1].subagent_trajectory_ref[1] = { session_id: "s" }), "$.steps[2].observation.results[1].subagent_trajectory_ref[1]", /trajectory_id or a trajectory_path/);
    const v16 = { schema_version: "ATIF-v1.6", session_id: "s", agent: { name: "a", version: "1" }, steps: [{ step_id: 1, source: "agent", message: "", observation: { results: [{ subagent_trajectory_ref: [{ trajectory_path: "x.json" }] }] } }] };
    expect(paths(v16)).toEqual(["$.steps[0].observation.results[0].subagent_trajectory_ref[0].session_id"]);
  });

  it("requires timestamps to parse as ISO-8601", () => {
    onlyFinding((d) => (d.steps[0].timestamp = "yesterday"), "$.steps[0].timestamp", /ISO-8601/);
    onlyFinding((d) => (d.steps[0].timestamp = "2026-02-30T00:00:00Z"), "$.steps[0].timestamp");
    onlyFinding((d) => (d.steps[0].timestamp = 1767322245), "$.steps[0].timestamp", /string/);
    for (const ok of ["2026-01-02", "2026-01-02T03:04", "2026-01-02T03:04:05.123456", "2026-01-02 03:04:05+05:30", "2026-01-02T03:04:05z"]) expect(isIsoTimestamp(ok), ok).toBe(true);
    for (const bad of ["2026-1-2", "2026-01-02T25:00:00", "2026-13-01", "2026-01-02T03:04:05Q"]) expect(isIsoTimestamp(bad), bad).toBe(false);
  });

  it("checks content parts: text needs text, image needs a source, nothing else is a type", () => {
    onlyFinding((d) => delete d.steps[1].message[0].text, "$.steps[1].message[0].text");
    onlyFinding((d) => delete d.steps[1].message[1].source, "$.steps[1].message[1].source");
    onlyFinding((d) => (d.steps[1].message[1].text = "alt"), "$.steps[1].message[1].text", /image part has no text/);
    onlyFinding((d) => (d.steps[1].message[0].source = d.steps[1].message[1].source), "$.steps[1].message[0].source", /text part has no source/);
    onlyFinding((d) => (d.steps[1].message[0].type = "audio"), "$.steps[1].message[0].type");
    onlyFinding((d) => (d.steps[1].message[1].source.media_type = "image/bmp"), "$.steps[1].message[1].source.media_type", /image\/jpeg/);
    onlyFinding((d) => delete d.steps[1].message[1].source.path, "$.steps[1].message[1].source.path");
    onlyFinding((d) => (d.steps[2].observation.results[0].content = [{ type: "text" }]), "$.steps[2].observation.results[0].content[0].text");
  });

  it("refuses a field newer than the document's schema_version", () => {
    const at = (minor: number) => {
      const d = full();
      d.schema_version = `ATIF-v1.${minor}`;
      return paths(d);
    };
    const v16 = at(6);
    expect(v16).toEqual(
      expect.arrayContaining([
        "$.trajectory_id",
        "$.subagent_trajectories",
        "$.steps[2].tool_calls[0].extra",
        "$.steps[2].observation.results[0].extra",
        "$.steps[2].observation.results[1].subagent_trajectory_ref[0].trajectory_id",
        "$.steps[2].llm_call_count",
        "$.steps[3].llm_call_count",
      ]),
    );
    expect(at(5)).toEqual(expect.arrayContaining(["$.steps[1].message", "$.steps[2].observation.results[0].content"]));
    expect(at(4)).toEqual(expect.arrayContaining(["$.agent.tool_definitions", "$.steps[1].is_copied_context"]));
    expect(at(3)).toContain("$.steps[2].metrics.prompt_token_ids");
    expect(at(2)).toContain("$.steps[2].metrics.completion_token_ids");
    expect(at(1)).toContain("$.steps[0].observation");
    expect(at(0)).toContain("$.extra");
    expect(at(1)).not.toContain("$.extra");
    // exactly the version's own: a v1.5 doc with a llm_call_count says so and nothing else
    onlyFinding((d) => {
      d.schema_version = "ATIF-v1.5";
      d.steps = [{ step_id: 1, source: "agent", message: "", llm_call_count: 1 }];
      delete d.trajectory_id;
      delete d.subagent_trajectories;
      d.final_metrics.total_steps = 1;
    }, "$.steps[0].llm_call_count", /new in ATIF-v1.7; this document is ATIF-v1.5/);
  });

  it("requires session_id before v1.7", () => {
    const d = { schema_version: "ATIF-v1.6", agent: { name: "a", version: "1" }, steps: [{ step_id: 1, source: "user", message: "x" }] };
    expect(paths(d)).toEqual(["$.session_id"]);
  });

  it("refuses an unknown schema_version and a document that is not an object", () => {
    onlyFinding((d) => (d.schema_version = "ATIF-v2.0"), "$.schema_version", /ATIF-v1.0 … ATIF-v1.7/);
    expect(paths([])).toEqual(["$"]);
    expect(paths("x")).toEqual(["$"]);
  });
});

describe("validateTrajectory: bounded", () => {
  it("walks deeply nested subagent trajectories without the stack, stopping at the cap with a finding", () => {
    const leaf = () => ({ trajectory_id: "x", agent: { name: "a", version: "1" }, steps: [{ step_id: 1, source: "user", message: "" }] }) as Doc;
    const root = leaf();
    let cur = root;
    for (let i = 0; i < 10_000; i++) {
      const next = leaf();
      cur.subagent_trajectories = [next];
      cur = next;
    }
    const f = validateTrajectory(root);
    expect(f).toHaveLength(1);
    expect(f[0].message).toMatch(new RegExp(`nested more than ${MAX_SUBAGENT_DEPTH} deep`));
  });

  it("stops listing after many findings, and says so", () => {
    const steps = Array.from({ length: 5000 }, (_, i) => ({ step_id: i + 1, source: "robot", message: "" }));
    const f = validateTrajectory({ agent: { name: "a", version: "1" }, steps });
    expect(f.length).toBeLessThanOrEqual(1001);
    expect(f.at(-1)!.message).toMatch(/the rest are not listed/);
  });

  it("reports one finding for a long list of bad token ids, not one per id", () => {
    onlyFinding((d) => (d.steps[2].metrics.completion_token_ids = Array.from({ length: 100_000 }, () => "t")), "$.steps[2].metrics.completion_token_ids[0]");
  });
});
