/**
 * Issue 20 §6: a card's run on the host (`--on-host`) never holds evolve's provider keys. A hostile model's shell
 * command (the conductor's shell tool, a command runner, a card's check command) finds no provider or gateway
 * variable of evolve's in its environment — an allowlist, so a key under any variable name stays out — and whatever
 * it prints that holds a key it read on the host (gateway.toml is the user's own file) is redacted from the attempt's
 * log, its output and the conductor's episode. Real local gateway, real conductor; the model is the scripted upstream.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedUpstream } from "../../fixtures/upstream/server.ts";
import { initAgentDir } from "../conductor/init.ts";
import { conductorCardRunner } from "./conductor-runner.ts";
import { cardsEvaluator, loadCards, loadRunner } from "./evals.ts";
import { openLocalGateway, type LocalGateway } from "./local-gateway.ts";
import { openStore, type Store } from "../store/index.ts";

const upstream = new ScriptedUpstream();
// a key in gateway.toml, one in a standard variable, one in a variable only gateway.toml names
const TOML_KEY = "sk-local-REAL-provider-key-in-gateway-toml-5e1f";
const ENV_KEY = "sk-ant-REAL-provider-key-in-evolve-env-0b7c";
const ODD_KEY = "acme-REAL-provider-key-odd-variable-92ad";
let home: string;
let store: Store;
let gateway: LocalGateway;
const saved = { ANTHROPIC_API_KEY: process.env.ANTHROPIC_API_KEY, ACME_SECRET: process.env.ACME_SECRET };
const dirs: string[] = [];

beforeAll(async () => {
  await upstream.start();
  process.env.ANTHROPIC_API_KEY = ENV_KEY;
  process.env.ACME_SECRET = ODD_KEY;
  home = mkdtempSync(join(tmpdir(), "evolve-cards-keys-home-"));
  dirs.push(home);
  writeFileSync(
    join(home, "gateway.toml"),
    `[upstreams.local]\nbase_url = "${upstream.url}/v1"\napi_key = "${TOML_KEY}"\nmodels = ["qwen"]\n\n[upstreams.acme]\nkind = "openai"\nbase_url = "${upstream.url}/v1"\napi_key_env = "ACME_SECRET"\n`,
  );
  store = openStore(home);
  gateway = await openLocalGateway({ home, store });
});

afterAll(async () => {
  await gateway?.close();
  await store?.close();
  await upstream.close();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function project(runner: unknown, check: unknown): string {
  const p = mkdtempSync(join(tmpdir(), "evolve-cards-keys-"));
  dirs.push(p);
  initAgentDir(p);
  mkdirSync(join(p, "evolve", "evals"), { recursive: true });
  writeFileSync(join(p, "evolve", "evals", "t1.json"), JSON.stringify({ id: "t1", domain: "d", prompt: "say ok", check }));
  writeFileSync(join(p, "evolve", "runner.json"), JSON.stringify(runner));
  return p;
}

const everyKey = () => [TOML_KEY, ENV_KEY, ODD_KEY, gateway.key];
const leaks = (text: string) => everyKey().filter((k) => text.includes(k));
// what a hostile model runs: its environment, and the user's gateway.toml
const HOSTILE = "env; echo TOML; cat HOME_TOML";

describe("a card's run on the host holds no key of evolve's", () => {
  it("a command runner and its check: no provider variable in their environment, every key redacted from the log and the output", async () => {
    const toml = join(home, "gateway.toml");
    const p = project({ agent: "command", command: HOSTILE.replace("HOME_TOML", toml) + "; echo ok", timeout_sec: 20 }, { command: `env > check-env.txt; echo "$TASK_OUTPUT" > check-output.txt; true` });
    const ev = cardsEvaluator({ project: p, cards: loadCards(p), runner: loadRunner(p), gateway });
    const outDir = join(p, "out", "attempts", "live");
    const r = await ev.run({ harnessId: "live", agentRoot: join(p, ".agent"), tasks: ["t1"], marker: null, outDir });
    expect(r.attempts.map((a) => [a.valid, a.score])).toEqual([[true, 1]]);
    const log = readFileSync(join(outDir, "t1.log"), "utf8");
    // the run did reach gateway.toml (the user's file: host mode cannot hide it) and printed it, redacted
    expect(log).toContain("TOML");
    expect(log).toContain("[redacted]");
    expect(leaks(log)).toEqual([]);
    // its environment held the gateway's URL, none of evolve's keys (the check's neither)
    expect(log).toContain("EVOLVE_GATEWAY_URL=");
    const checkEnv = readFileSync(join(outDir, "work", "t1", "check-env.txt"), "utf8");
    // (ANTHROPIC_API_KEY there is the local gateway's key, as a trial's agent gets it: no provider key)
    expect(checkEnv).not.toContain("VITEST");
    expect(leaks(checkEnv)).toEqual([]);
    // the output the check was given (and a metaharness run records as material) is redacted too
    expect(leaks(readFileSync(join(outDir, "work", "t1", "check-output.txt"), "utf8"))).toEqual([]);
  });

  it("the log never holds a key on disk, not even while the run goes on, nor one split across two writes", async () => {
    const toml = join(home, "gateway.toml");
    const half = ENV_KEY.length >> 1;
    // the key read from the host, then a second key printed in two halves a moment apart (two chunks of output)
    const cmd = `cat ${toml}; printf '%s' '${ENV_KEY.slice(0, half)}'; sleep 0.3; printf '%s\\n' '${ENV_KEY.slice(half)}'; echo MID; sleep 2; echo ok`;
    const p = project({ agent: "command", command: cmd, timeout_sec: 20 }, { contains: "ok" });
    const ev = cardsEvaluator({ project: p, cards: loadCards(p), runner: loadRunner(p), gateway });
    const outDir = join(p, "out", "attempts", "live");
    const logPath = join(outDir, "t1.log");
    const running = ev.run({ harnessId: "live", agentRoot: join(p, ".agent"), tasks: ["t1"], marker: null, outDir });
    // while the command sleeps: the gateway.toml it printed is in the log already, its key redacted
    let mid = "";
    for (let i = 0; i < 100 && !mid.includes("api_key = "); i++) {
      await new Promise((done) => setTimeout(done, 20));
      mid = existsSync(logPath) ? readFileSync(logPath, "utf8") : "";
    }
    expect(mid).toContain("api_key = \"[redacted]\"");
    expect(leaks(mid)).toEqual([]);
    const r = await running;
    expect(r.attempts.map((a) => [a.valid, a.score])).toEqual([[true, 1]]);
    const log = readFileSync(logPath, "utf8");
    expect(log).toContain("[redacted]\nMID\n");
    expect(leaks(log)).toEqual([]);
  });

  it("the conductor's shell tool: no provider variable in its environment; the trace log and the episode hold no key", async () => {
    const toml = join(home, "gateway.toml");
    const p = project({ agent: "conductor", model: "local/qwen", timeout_sec: 30 }, { contains: "ok" });
    upstream.reset();
    let turn = 0;
    upstream.responder = () => (turn++ === 0 ? { toolCall: { id: "call_1", name: "shell", input: { command: `env; echo TOML; cat ${toml}` } } } : { toolCall: { id: "call_2", name: "finish", input: { answer: `ok ${TOML_KEY}` } } });
    const ev = cardsEvaluator({ project: p, cards: loadCards(p), runner: loadRunner(p), gateway, conductor: conductorCardRunner });
    const outDir = join(p, "out", "attempts", "live");
    const r = await ev.run({ harnessId: "live", agentRoot: join(p, ".agent"), tasks: ["t1"], marker: null, outDir });
    expect(r.attempts.map((a) => [a.valid, a.score])).toEqual([[true, 1]]);
    // what the model was sent back holds the tool's environment: none of evolve's variables
    const sent = JSON.stringify(upstream.requests[1]?.body ?? {});
    expect(sent).toContain("TOML");
    expect(sent).not.toContain("ANTHROPIC_API_KEY");
    expect(sent).not.toContain("VITEST");
    expect(sent).not.toContain(ENV_KEY);
    expect(sent).not.toContain(ODD_KEY);
    const log = readFileSync(join(outDir, "t1.log"), "utf8");
    expect(log).toContain("[redacted]");
    expect(leaks(log)).toEqual([]);
    const episodes = join(p, ".agent", "memory", "episodes.jsonl");
    expect(existsSync(episodes)).toBe(true);
    expect(leaks(readFileSync(episodes, "utf8"))).toEqual([]);
  });
});
