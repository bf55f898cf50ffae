/**
 * One rule of "this attempt never reached its model" (issue 19 §2/§3 follow-ups): a task card run by a shell-command
 * runner is judged from the local gateway's own record of its calls (gateway/meter.ts), exactly as a conductor card
 * run is, and the conductor's loop reads what it was answered by that same rule, so a budget's refusal (a 429, like
 * a provider's rate limit) or an answered call it could not parse is never taken for an unreachable model.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { buildUpstreams } from "../gateway/upstreams.ts";
import { initAgentDir } from "../engine/conductor/init.ts";
import { runConductor } from "../engine/conductor/loop.ts";
import { cardsEvaluator, loadCards, loadRunner } from "../engine/eval/evals.ts";
import { conductorCardRunner } from "../engine/eval/conductor-runner.ts";
import { openLocalGateway, type LocalGateway } from "../engine/eval/local-gateway.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import { cliHost } from "./support/cli-host.ts";

const MODEL = "claude-sonnet-4-5";

/**
 * A command agent: one Anthropic Messages call through the gateway its runner points it at (ANTHROPIC_BASE_URL and
 * ANTHROPIC_API_KEY are the gateway's), prints the reply's text (or the error, exiting 1), and writes an episode to
 * its overlay's memory as an agent with memory would.
 */
const AGENT = String.raw`
const { appendFileSync, mkdirSync } = require("node:fs");
const [root, prompt] = process.argv.slice(2);
mkdirSync(root + "/memory", { recursive: true });
appendFileSync(root + "/memory/episodes.jsonl", JSON.stringify({ task: prompt, outcome: "ran" }) + "\n");
const calls = Number(process.env.CALLS || 1);
(async () => {
  let out = "";
  for (let i = 0; i < calls; i++) {
    const r = await fetch(process.env.ANTHROPIC_BASE_URL + "/v1/messages", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": process.env.ANTHROPIC_API_KEY, "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "${MODEL}", max_tokens: 64, messages: [{ role: "user", content: prompt }] }),
    });
    const j = await r.json();
    if (!r.ok) { console.error("model call failed: " + r.status); process.exitCode = 1; continue; }
    out += j.content.map((c) => c.text || "").join("");
  }
  console.log(out);
})();
`;

/** A project with the conductor's default .agent/, `n` cards (`say okI` → contains okI) and a command runner. */
function commandProject(n = 2): string {
  const project = mkdtempSync(join(tmpdir(), "evolve-cmd-unavail-"));
  initAgentDir(project);
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
  for (let i = 1; i <= n; i++) writeFileSync(join(project, "evolve", "evals", `t${i}.json`), JSON.stringify({ id: `t${i}`, domain: "d", prompt: `say ok${i}`, check: { contains: `ok${i}` } }));
  writeFileSync(join(project, "agent.cjs"), AGENT);
  writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "command", command: `node ${join(project, "agent.cjs")} {agent_root} {prompt}`, timeout_sec: 30 }));
  return project;
}

const liveEpisodes = (project: string) => join(project, ".agent", "memory", "episodes.jsonl");

/**
 * A stand-in Anthropic upstream in a process of its own (the CLI host blocks this one while a command runs): it
 * answers every Messages call 401, or, with `answer`, with the first `okN` of the prompt; it prints its port.
 */
const UPSTREAM = String.raw`
const answer = process.argv.includes("answer");
const server = require("node:http").createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    res.setHeader("content-type", "application/json");
    if (!answer) return res.writeHead(401).end(JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }));
    const text = (/ok\d/.exec(body) || ["?"])[0];
    res.end(JSON.stringify({ id: "msg_1", type: "message", role: "assistant", model: "${MODEL}", content: [{ type: "text", text }], stop_reason: "end_turn", usage: { input_tokens: 5, output_tokens: 1 } }));
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
`;

/** Starts {@link UPSTREAM}; resolves its URL and a stop function. */
async function startUpstream(mode: "refuse" | "answer"): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, ["-e", UPSTREAM, mode], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((done, fail) => {
    child.stdout.once("data", (b: Buffer) => done(b.toString().trim()));
    child.once("exit", (code) => fail(new Error(`the stand-in upstream exited ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

describe("a command runner's attempts are judged by the gateway's record of their calls", () => {
  const host = cliHost();
  afterAll(() => host.close());

  /** The CLI's environment: a fresh home, `url` as Anthropic's upstream, no other provider variable. */
  function env(url: string): Record<string, string | undefined> {
    const e: Record<string, string | undefined> = { ...process.env, EVOLVE_HOME: mkdtempSync(join(tmpdir(), "evolve-cmd-unavail-home-")), NO_COLOR: "1" };
    for (const k of Object.keys(e)) if (/^(ANTHROPIC|OPENAI|GEMINI|GOOGLE)_/.test(k)) delete e[k];
    return { ...e, ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: "sk-real" };
  }

  it("an upstream that refuses every call: harness eval exits attempts_model_unavailable, nothing appended to memory", async () => {
    const project = commandProject();
    const up = await startUpstream("refuse");
    try {
      const r = host.run(["harness", "eval", "--on-host"], { cwd: project, env: env(up.url), timeoutMs: 60_000 });
      expect(r.code, r.stdout + r.stderr).toBe(2);
      expect(r.stdout).not.toMatch(/pass@1/);
      expect(r.stderr.split("\n").filter((l) => !l.startsWith("warning: --on-host:"))[0]).toMatch(/^error\[attempts_model_unavailable\]: 2 of 2 attempts of live never reached their model \(t1: the model was never reached: the agent's 1 model call to anthropic\/claude-sonnet-4-5 all failed before any answer: upstream anthropic answered 401 \(1\)/);
      expect(existsSync(liveEpisodes(project))).toBe(false);
    } finally {
      up.stop();
    }
  });

  it("an upstream that answers: the attempts are valid and scored, their episodes appended", async () => {
    const project = commandProject();
    const up = await startUpstream("answer");
    try {
      const r = host.run(["harness", "eval", "--on-host", "--json"], { cwd: project, env: env(up.url), timeoutMs: 60_000 });
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j.attempts.map((a: { valid: boolean; score: number; model_unavailable?: boolean }) => [a.valid, a.score, a.model_unavailable])).toEqual([[true, 1, undefined], [true, 1, undefined]]);
      expect(j.episodes).toBe(2);
      expect(readFileSync(liveEpisodes(project), "utf8").trim().split("\n")).toHaveLength(2);
    } finally {
      up.stop();
    }
  });
});

describe("one rule for the conductor's loop and the gateway's meter", () => {
  const upstream = new ScriptedUpstream();
  let home: string;
  let store: Store;
  let gw: LocalGateway;
  let odd: Server;
  let oddUrl: string;

  beforeAll(async () => {
    await upstream.start();
    home = mkdtempSync(join(tmpdir(), "evolve-rule-home-"));
    // no credit left: the gateway refuses every priced call for the user's budget (a 429, never sent upstream)
    writeFileSync(join(home, "config.toml"), '[budget]\nuser = "u-broke"\nuser_credits_usd = 0\n');
    store = openStore(home);
    gw = await openLocalGateway({ home, store, upstreams: buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-real", models: [MODEL] } } }, {}) });
    // a server that answers 200 with a body no Messages client can read: the model answered, oddly
    odd = createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('"hello"'));
    await new Promise<void>((done) => odd.listen(0, "127.0.0.1", done));
    oddUrl = `http://127.0.0.1:${(odd.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await gw?.close();
    await store?.close();
    await upstream.close();
    await new Promise((done) => odd?.close(done));
  });

  it("a budget's refusal is not an unreachable model: not retried, not model_unavailable, in the loop as in a card's attempt", async () => {
    const project = mkdtempSync(join(tmpdir(), "evolve-rule-"));
    initAgentDir(project);
    const started = Date.now();
    const result = await runConductor({ agentRoot: join(project, ".agent"), instruction: "say ok", workdir: project, endpoint: { api: "anthropic", baseUrl: gw.url, key: gw.key, model: MODEL } });
    expect(result.outcome).toBe("model_error");
    expect(result.error).toMatch(/^anthropic 429: user: user u-broke budget/);
    expect(result.model_unavailable).toBeUndefined();
    // the refusal was not retried into the ground (three retries wait 1 + 2 + 4 s)
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(upstream.requests).toHaveLength(0);

    mkdirSync(join(project, "evolve", "evals"), { recursive: true });
    writeFileSync(join(project, "evolve", "evals", "t1.json"), JSON.stringify({ id: "t1", domain: "d", prompt: "say ok1", check: { contains: "ok1" } }));
    writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "conductor", model: `anthropic/${MODEL}`, timeout_sec: 20 }));
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway: gw, conductor: conductorCardRunner });
    const r = await ev.run({ harnessId: "live", agentRoot: join(project, ".agent"), tasks: ["t1"], marker: null, outDir: join(project, "out", "attempts", "live") });
    // nor is it a score: the attempt is invalid, as a trial refused by such a budget settles BUDGET
    expect(r.attempts[0]).toMatchObject({ valid: false, score: null, invalid_reason: expect.stringMatching(/^a budget refused a model call: user: user u-broke budget/) });
    expect(r.attempts[0].model_unavailable).toBeUndefined();
  });

  it("a model that answered 200 with a reply the client cannot read was reached", async () => {
    const project = mkdtempSync(join(tmpdir(), "evolve-rule-"));
    initAgentDir(project);
    const result = await runConductor({ agentRoot: join(project, ".agent"), instruction: "say ok", workdir: project, endpoint: { api: "anthropic", baseUrl: oddUrl, key: "k", model: MODEL } });
    expect([result.outcome, result.error]).toEqual(["model_error", "anthropic: the reply is not a JSON object"]);
    expect(result.model_unavailable).toBeUndefined();
  });
});
