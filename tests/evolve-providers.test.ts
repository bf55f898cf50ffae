/**
 * One provider → wire-API table (engine/providers.ts), used by every caller: a task card run by the conductor against
 * a `local` provider (an OpenAI-compatible upstream of gateway.toml) is sent as OpenAI chat completions, the model
 * named `local/<model>` so the gateway routes it to that upstream, exactly as `evolve conductor run` sends it.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { buildUpstreams } from "../gateway/upstreams.ts";
import { initAgentDir } from "../engine/conductor/init.ts";
import { conductorCardRunner } from "../engine/eval/conductor-runner.ts";
import { cardsEvaluator, loadCards, loadRunner } from "../engine/eval/evals.ts";
import { openLocalGateway, type LocalGateway } from "../engine/eval/local-gateway.ts";
import { conductor } from "../engine/harness/agents/conductor.ts";
import { API_ENV, gatewayModelName, wireApiOf } from "../engine/providers.ts";
import { openStore, type Store } from "../engine/store/index.ts";

const upstream = new ScriptedUpstream();
let home: string;
let store: Store;
let gateway: LocalGateway;

beforeAll(async () => {
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-providers-home-"));
  store = openStore(home);
  const upstreams = buildUpstreams({ upstreams: { local: { base_url: `${upstream.url}/v1`, api_key: "sk-local", models: ["qwen"] } } }, {});
  gateway = await openLocalGateway({ home, store, upstreams });
});

afterAll(async () => {
  await gateway?.close();
  await store?.close();
  await upstream.close();
});

describe("the provider table", () => {
  it("gives a known provider its own API and any other OpenAI chat, with the gateway's name of the model", () => {
    expect(["anthropic", "openai", "gemini", "google", "local", "vllm"].map(wireApiOf)).toEqual(["anthropic", "openai-responses", "gemini", "gemini", "openai-chat", "openai-chat"]);
    expect([gatewayModelName("anthropic", "claude"), gatewayModelName("local", "qwen")]).toEqual(["claude", "local/qwen"]);
    expect(API_ENV["openai-chat"]).toEqual({ key: "OPENAI_API_KEY", baseUrl: "OPENAI_BASE_URL" });
    // the conductor agent in a box asks the same table
    expect(conductor.apiFor("local")).toBe("openai-chat");
  });

  it("a card run by the conductor against a local provider sends OpenAI chat to that upstream", async () => {
    const project = mkdtempSync(join(tmpdir(), "evolve-providers-"));
    initAgentDir(project);
    mkdirSync(join(project, "evolve", "evals"), { recursive: true });
    writeFileSync(join(project, "evolve", "evals", "t1.json"), JSON.stringify({ id: "t1", domain: "d", prompt: "say ok", check: { contains: "ok" } }));
    writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "conductor", model: "local/qwen", timeout_sec: 20 }));
    upstream.reset();
    upstream.responder = () => ({ toolCall: { name: "finish", input: { answer: "ok" } } });
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway, conductor: conductorCardRunner });
    const r = await ev.run({ harnessId: "live", agentRoot: join(project, ".agent"), tasks: ["t1"], marker: null, outDir: join(project, "out", "attempts", "live") });
    expect(r.attempts.map((a) => [a.valid, a.score, a.invalid_reason])).toEqual([[true, 1, undefined]]);
    const paths = upstream.requests.map((q) => q.path);
    // the fixture records paths without their /v1 prefix: Anthropic Messages would be "/messages"
    expect(paths).toEqual(["/chat/completions"]);
    expect(upstream.requests[0].body.model).toBe("qwen");
  });
});
