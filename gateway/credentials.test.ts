import { describe, expect, it } from "vitest";
import { admits } from "./app.ts";
import { agentEnv, Credentials, hashKey, judgeEnv, type CredentialRecord } from "./credentials.ts";
import type { Credential } from "./types.ts";
import { buildUpstreams, routeModel } from "./upstreams.ts";

/** Whether the gateway lets `cred` call `model`, routed as a request for it is (claude on Messages, others on chat). */
const UPSTREAMS = buildUpstreams({}, { ANTHROPIC_API_KEY: "sk-ant", OPENAI_API_KEY: "sk-oai" });
function admitsModel(cred: Credential, model: string): boolean {
  const routed = routeModel(UPSTREAMS, model, model.includes("claude") ? "messages" : "chat");
  if (!routed) throw new Error(`no upstream routes ${model}`);
  return admits(cred, model, routed);
}

describe("gateway credentials", () => {
  it("issue → authenticate → revoke → refused; the key is stored only as its hash", () => {
    const persisted: CredentialRecord[] = [];
    const creds = new Credentials((r) => persisted.push({ ...r }));
    const { key, credential } = creds.issueAgent({ trialId: "t1", jobId: "j1", models: ["anthropic/*", "claude-*"] });
    expect(key).toMatch(/^evk-[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(persisted)).not.toContain(key);
    expect(persisted[0]!.keyHash).toBe(hashKey(key));

    const seen = creds.authenticate(key);
    expect(seen).toEqual({ id: credential.id, trialId: "t1", jobId: "j1", lane: "agent", models: ["anthropic/*", "claude-*"] });
    expect(seen).not.toHaveProperty("keyHash");

    expect(creds.authenticate(key.slice(0, -1) + (key.endsWith("A") ? "B" : "A"))).toBeUndefined();
    expect(creds.authenticate("")).toBeUndefined();
    expect(creds.authenticate(hashKey(key))).toBeUndefined();

    expect(creds.revoke(credential.id)).toBe(true);
    expect(creds.authenticate(key)).toBeUndefined();
    expect(creds.revoke(credential.id)).toBe(false);
    expect(persisted.at(-1)!.revokedAt).toBeTruthy();
  });

  it("keys are unique and unguessable", () => {
    const creds = new Credentials();
    const keys = new Set(Array.from({ length: 200 }, () => creds.issueAgent({ trialId: "t" }).key));
    expect(keys.size).toBe(200);
  });

  it("expiry: refused at and after expiresAt", () => {
    let now = Date.parse("2026-01-01T00:00:00Z");
    const creds = new Credentials(undefined, () => now);
    const { key, credential } = creds.issueAgent({ trialId: "t1", ttlMs: 60_000 });
    expect(credential.expiresAt).toBe("2026-01-01T00:01:00.000Z");
    now += 59_999;
    expect(creds.authenticate(key)).toBeDefined();
    now += 1;
    expect(creds.authenticate(key)).toBeUndefined();
    expect(creds.prune()).toBe(1);
  });

  it("revokeTrial revokes a trial's credentials, optionally one lane, and leaves others alone", () => {
    const creds = new Credentials();
    const agent = creds.issueAgent({ trialId: "t1" });
    const judge = creds.issueJudge({ trialId: "t1", family: "anthropic" });
    const other = creds.issueAgent({ trialId: "t2" });
    expect(creds.revokeTrial("t1", "agent")).toBe(1);
    expect(creds.authenticate(agent.key)).toBeUndefined();
    expect(creds.authenticate(judge.key)?.lane).toBe("judge");
    expect(creds.revokeTrial("t1")).toBe(1);
    expect(creds.authenticate(judge.key)).toBeUndefined();
    expect(creds.authenticate(other.key)?.trialId).toBe("t2");
  });

  it("model scoping: agent lists, and a judge key admits only its family", () => {
    const creds = new Credentials();
    const anyModel = creds.authenticate(creds.issueAgent({ trialId: "t" }).key)!;
    expect(admitsModel(anyModel, "gpt-5")).toBe(true);

    const scoped = creds.authenticate(creds.issueAgent({ trialId: "t", models: ["claude-sonnet-4-5", "openai/gpt-5*"] }).key)!;
    expect(admitsModel(scoped, "claude-sonnet-4-5")).toBe(true);
    expect(admitsModel(scoped, "claude-opus-4-5")).toBe(false);
    expect(admitsModel(scoped, "openai/gpt-5-mini")).toBe(true);

    const a = creds.authenticate(creds.issueJudge({ trialId: "t", family: "anthropic" }).key)!;
    expect(a.lane).toBe("judge");
    expect(admitsModel(a, "anthropic/claude-sonnet-4-6")).toBe(true);
    expect(admitsModel(a, "claude-haiku-4-5")).toBe(true);
    expect(admitsModel(a, "gpt-4o")).toBe(false);
    expect(admitsModel(a, "openai/gpt-4o")).toBe(false);

    const o = creds.authenticate(creds.issueJudge({ trialId: "t", family: "openai" }).key)!;
    for (const m of ["gpt-4o", "openai/gpt-5", "o3", "o4-mini"]) expect(admitsModel(o, m)).toBe(true);
    for (const m of ["claude-sonnet-4-5", "anthropic/claude-opus-4-5"]) expect(admitsModel(o, m)).toBe(false);
  });

  it("route scoping: an agent key may call every route unless told; a judge key only its family's API", () => {
    const creds = new Credentials();
    expect(creds.authenticate(creds.issueAgent({ trialId: "t" }).key)!).not.toHaveProperty("routes");
    expect(creds.authenticate(creds.issueAgent({ trialId: "t", routes: ["responses", "models"] }).key)!.routes).toEqual(["responses", "models"]);
    expect(creds.authenticate(creds.issueJudge({ trialId: "t", family: "anthropic" }).key)!.routes).toEqual(["messages", "count_tokens", "models"]);
    expect(creds.authenticate(creds.issueJudge({ trialId: "t", family: "openai" }).key)!.routes).toEqual(["chat", "responses", "models"]);
    // a loaded record keeps its routes
    const persisted: CredentialRecord[] = [];
    const { key } = new Credentials((r) => persisted.push({ ...r })).issueJudge({ trialId: "t", family: "openai" });
    const restored = new Credentials();
    restored.load(persisted);
    expect(restored.authenticate(key)!.routes).toEqual(["chat", "responses", "models"]);
  });

  it("persisted records can be loaded back", () => {
    const saved: CredentialRecord[] = [];
    const a = new Credentials((r) => saved.push(r));
    const { key } = a.issueAgent({ trialId: "t9" });
    const b = new Credentials();
    b.load(saved);
    expect(b.authenticate(key)?.trialId).toBe("t9");
  });
});

describe("environment handed to boxes", () => {
  it("agentEnv: all three providers, base URL forms each SDK expects, _API_BASE companions", () => {
    expect(agentEnv("evk-x", "http://10.0.2.2:4000/")).toEqual({
      ANTHROPIC_API_KEY: "evk-x",
      ANTHROPIC_BASE_URL: "http://10.0.2.2:4000",
      ANTHROPIC_API_BASE: "http://10.0.2.2:4000",
      OPENAI_API_KEY: "evk-x",
      OPENAI_BASE_URL: "http://10.0.2.2:4000/v1",
      OPENAI_API_BASE: "http://10.0.2.2:4000/v1",
      GEMINI_API_KEY: "evk-x",
      GOOGLE_API_KEY: "evk-x",
      GOOGLE_GEMINI_BASE_URL: "http://10.0.2.2:4000",
    });
  });

  it("judgeEnv: the asked-for key name with its companions only", () => {
    expect(judgeEnv("anthropic", "evk-j", "http://gw:1")).toEqual({
      ANTHROPIC_API_KEY: "evk-j",
      ANTHROPIC_BASE_URL: "http://gw:1",
      ANTHROPIC_API_BASE: "http://gw:1",
    });
    expect(judgeEnv("openai", "evk-j", "http://gw:1")).toEqual({
      OPENAI_API_KEY: "evk-j",
      OPENAI_BASE_URL: "http://gw:1/v1",
      OPENAI_API_BASE: "http://gw:1/v1",
    });
  });
});
