/**
 * What seeding a session from a task's `trajectory.json` (platform-tasks.md) needs whichever CLI's session format it
 * becomes: the ATIF steps read (or refused), a message's text, and ids derived from the trajectory so the same
 * trajectory always seeds the same session.
 */
import { createHash } from "node:crypto";
import { EvolveError } from "../../errors.ts";

/** One ATIF step as far as seeding reads it. */
export interface SeedStep {
  source: unknown;
  text: string;
  timestamp?: string;
  modelName?: string;
  calls: { id: string; name: string; arguments: Record<string, unknown>; output?: string }[];
}

/** An ATIF message or observation content (a string, or content parts) as text. */
export function atifText(message: unknown): string {
  if (typeof message === "string") return message;
  if (!Array.isArray(message)) return "";
  return message.map((p) => (p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : "")).join("");
}

/** The steps of an ATIF trajectory, each tool call with its observation's text; `trajectory_seed_invalid` when it is none. */
export function seedSteps(trajectory: string): SeedStep[] {
  const hint = "give trajectory.json as an ATIF document (harbor.md §4), or remove it";
  let doc: unknown;
  try {
    doc = JSON.parse(trajectory);
  } catch (e) {
    throw new EvolveError("trajectory_seed_invalid", `trajectory.json is not JSON: ${(e as Error).message}`, hint);
  }
  const steps = doc && typeof doc === "object" ? (doc as { steps?: unknown }).steps : undefined;
  if (!Array.isArray(steps)) throw new EvolveError("trajectory_seed_invalid", "trajectory.json has no `steps` list: it is no ATIF trajectory", hint);
  return steps.map((raw) => {
    const s = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
    const results = Array.isArray((s.observation as { results?: unknown } | undefined)?.results) ? (s.observation as { results: Record<string, unknown>[] }).results : [];
    const calls = (Array.isArray(s.tool_calls) ? s.tool_calls : []).map((c: Record<string, unknown>) => {
      const r = results.find((x) => x && x.source_call_id === c?.tool_call_id);
      const args = c?.arguments;
      return {
        id: String(c?.tool_call_id ?? ""),
        name: String(c?.function_name ?? ""),
        arguments: args && typeof args === "object" && !Array.isArray(args) ? (args as Record<string, unknown>) : {},
        ...(r ? { output: atifText(r.content) } : {}),
      };
    });
    return {
      source: s.source,
      text: atifText(s.message),
      ...(typeof s.timestamp === "string" ? { timestamp: s.timestamp } : {}),
      ...(typeof s.model_name === "string" ? { modelName: s.model_name } : {}),
      calls,
    };
  });
}

/** A UUID-shaped id (version 4 layout) derived from `parts`. */
export function derivedUuid(...parts: string[]): string {
  const h = createHash("sha256").update(parts.join("\0")).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
