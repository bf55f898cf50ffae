/**
 * Spend and budgets through the real CLI (its entry run in one Bun host process, tests/support/cli-host.ts), on a real store and without containers: `run` refuses bad
 * `--ve` and `--max-spend-usd` before any job is recorded, `trial show` prints the three spend states and the judge
 * apart, `job show` sums both lanes, and `gateway stop|resume|status` round-trip through the store and its ledger.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";
import { createJob, type JobConfig } from "../engine/job/job.ts";
import { openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { monthOf } from "../gateway/budget.ts";
import { traceUsage, zeroLane, type LaneTotals } from "../gateway/meter.ts";
import type { Usage } from "../gateway/types.ts";
import { appendGatewayUsage } from "../engine/trace/store.ts";
import { spendRecord } from "../engine/trial/spend.ts";

const root = resolve(__dirname, "..");
const TASK = join(root, "fixtures/tasks/valid/minimal");
const DIGEST = `sha256:${"b".repeat(64)}`;
let home: string;

// one Bun process runs this file's CLI calls in-process (tests/support/cli-host.ts)
const host = cliHost();
afterAll(() => host.close());

function evolve(args: string[], env: Record<string, string | undefined> = process.env) {
  return host.run(args, { cwd: root, env: { ...env, EVOLVE_HOME: home, NO_COLOR: "1" } });
}

/** Opens the temp home's store for `fn` and closes it before the CLI runs, so the two never hold it at once. */
async function withStore<T>(fn: (s: Store) => T): Promise<T> {
  const store = openStore(home);
  try {
    return fn(store);
  } finally {
    await store.close();
  }
}

function config(n: number): JobConfig {
  return {
    agent: { name: "claude-code", model: "anthropic/claude-sonnet-4-6" },
    attempts: n,
    concurrency: 1,
    timeout_multiplier: 1,
    secret_names: [],
    force_build: false,
    max_retries: 0,
    source: { kind: "path", path: "/x" },
    tasks: [{ name: "t", digest: DIGEST }],
  };
}

/** A job whose trials carry the given fields (one trial per entry); returns the job id and the trial ids. */
function jobWith(fields: Partial<TrialRecord>[]): Promise<{ job: string; trials: string[] }> {
  return withStore((store) => {
    const job = createJob(store, config(fields.length));
    const trials = store.listTrials(job.id);
    trials.forEach((t, i) => store.putTrial({ ...t, status: "SCORED", rewards: { reward: 1 }, ...fields[i] }));
    return { job: job.id, trials: trials.map((t) => t.id) };
  });
}

// as a record keeps them: prompt counts the cached reads (engine/trial/tokens.ts)
const tokens = { prompt: 1500, cached_read: 300, cache_write: 0, output: 450, reasoning: 0 };
const measured = { spend: { live_usd: 0.0123, final_usd: 0.0123, source: "measured", calls: 3, unpriced_calls: 0 }, tokens };
const lowerBound = { spend: { live_usd: 0.005, final_usd: null, source: "lower_bound", calls: 2, unpriced_calls: 1 }, tokens };
const live = { spend: { live_usd: 0.002, final_usd: null, source: "live", calls: 1, unpriced_calls: 0 }, tokens };
const withJudge = {
  spend: {
    ...measured.spend,
    judge: { live_usd: 0.004, final_usd: 0.004, calls: 1, unpriced_calls: 0, tokens: { prompt: 800, cached_read: 0, cache_write: 0, output: 60, reasoning: 0 } },
  },
  tokens,
};

/** The value printed on a `trial show` row. */
const row = (stdout: string, key: string) => stdout.split("\n").find((l) => l.trimStart().startsWith(`${key} `))?.trim().slice(key.length).trim();

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-spend-cli-"));
});

describe("evolve run: spend and verifier flags are checked before a job is recorded", () => {
  it("refuses a --ve key other than REWARDKIT_JUDGE / REWARDKIT_MODEL with ve_key_unsupported, exit 2, no job", () => {
    const r = evolve(["run", "-p", TASK, "-a", "oracle", "--ve", "ANTHROPIC_API_KEY=sk-x"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[ve_key_unsupported\]: --ve ANTHROPIC_API_KEY: only REWARDKIT_JUDGE and REWARDKIT_MODEL/);
    expect(r.stderr).not.toContain("sk-x");
    expect(r.stdout).toBe("");
    expect(JSON.parse(evolve(["job", "list", "--json"]).stdout)).toEqual([]);
  });

  it("refuses a bad key even beside an accepted one", () => {
    const r = evolve(["run", "-p", TASK, "--ve", "REWARDKIT_MODEL=anthropic/claude-sonnet-4-6", "--ve", "PATH=/x"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[ve_key_unsupported\]: --ve PATH/);
    expect(JSON.parse(evolve(["job", "list", "--json"]).stdout)).toEqual([]);
  });

  it.each([["REWARDKIT_MODEL"], ["=x"], ["REWARDKIT_MODEL="]])("refuses a malformed --ve %s as a usage error", (flag) => {
    const r = evolve(["run", "-p", TASK, "--ve", flag]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[usage\]: --ve /);
    expect(JSON.parse(evolve(["job", "list", "--json"]).stdout)).toEqual([]);
  });

  it.each([["0"], ["-1"], ["abc"], [""], ["Infinity"]])("refuses --max-spend-usd %j as a usage error, no job", (v) => {
    const r = evolve(["run", "-p", TASK, "--max-spend-usd", v]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[usage\]: --max-spend-usd must be a positive number of dollars/);
    expect(JSON.parse(evolve(["job", "list", "--json"]).stdout)).toEqual([]);
  });

  it("accepted flags become the job's max_spend_usd and verifier_env", async () => {
    const { parseMaxSpend, parseVerifierEnv } = await import("../commands/run.ts");
    expect(parseMaxSpend("2.5")).toBe(2.5);
    expect(parseMaxSpend(undefined)).toBeUndefined();
    expect(parseVerifierEnv(["REWARDKIT_JUDGE=codex", "REWARDKIT_MODEL=openai/gpt-5=mini"])).toEqual({ REWARDKIT_JUDGE: "codex", REWARDKIT_MODEL: "openai/gpt-5=mini" });
    expect(parseVerifierEnv([])).toBeUndefined();
  });

  it("check does not take the run-only flags", () => {
    expect(evolve(["check", "-p", TASK, "--ve", "REWARDKIT_MODEL=m"]).stderr).toMatch(/^error\[usage\]: unknown option '--ve'/);
  });
});

describe("evolve trial show: spend", () => {
  it("prints a settled figure plainly, a lower bound as `at least`, and `-` when nothing was measured", async () => {
    const { trials } = await jobWith([measured, lowerBound, live, {}]);
    const shown = trials.map((id) => evolve(["trial", "show", id]));
    for (const s of shown) expect(s.code).toBe(0);
    expect(row(shown[0].stdout, "spend")).toBe("$0.0123  (3 calls)");
    expect(row(shown[1].stdout, "spend")).toBe("at least $0.0050  (2 calls, 1 unpriced)");
    expect(row(shown[2].stdout, "spend")).toBe("at least $0.0020  (1 call)");
    expect(row(shown[3].stdout, "spend")).toBe("-");
    expect(row(shown[0].stdout, "tokens")).toBe("prompt 1500 (cached_read 300, cache_write 0), output 450 (reasoning 0)");
    expect(row(shown[3].stdout, "tokens")).toBe("-");
    for (const s of shown) expect(s.stdout).not.toMatch(/judge spend/);
  });

  it("shows the judge on its own row, apart from the agent's spend and tokens", async () => {
    const { trials } = await jobWith([withJudge]);
    const s = evolve(["trial", "show", trials[0]]);
    expect(row(s.stdout, "spend")).toBe("$0.0123  (3 calls)");
    expect(row(s.stdout, "judge spend")).toBe("$0.0040  (1 call)  prompt 800 (cached_read 0, cache_write 0), output 60 (reasoning 0)");
    expect(row(s.stdout, "tokens")).toBe("prompt 1500 (cached_read 300, cache_write 0), output 450 (reasoning 0)");
  });

  it("--json keeps the record and adds the spec's field names", async () => {
    const { trials } = await jobWith([withJudge, lowerBound, {}]);
    const [a, b, c] = trials.map((id) => JSON.parse(evolve(["trial", "show", id, "--json"]).stdout));
    expect(a.spend).toEqual(withJudge.spend);
    expect(a).toMatchObject({
      id: trials[0],
      live_spent_usd: 0.0123,
      spend_source: "measured",
      agent_result: { cost_usd: 0.0123 },
      usage: { ...tokens, cost_usd: 0.0123 },
      judge_spent_usd: 0.004,
    });
    expect(b).toMatchObject({ live_spent_usd: 0.005, spend_source: "lower_bound", agent_result: { cost_usd: null }, judge_spent_usd: null });
    expect(c).toMatchObject({ live_spent_usd: null, spend_source: null, agent_result: { cost_usd: null }, usage: null, judge_spent_usd: null });
  });
});

describe("prompt tokens: one definition, cached included (issue 19 §4)", () => {
  // two metered calls with cached reads and a cache write, as the gateway normalizes them (input_tokens uncached)
  const calls: Usage[] = [
    { input_tokens: 369, cached_read_tokens: 2048, cache_write_tokens: 0, output_tokens: 40, reasoning_tokens: 0 },
    { input_tokens: 2048, cached_read_tokens: 0, cache_write_tokens: 0, output_tokens: 60, reasoning_tokens: 12 },
  ];
  const lane = (): LaneTotals => {
    const l = zeroLane();
    for (const u of calls) {
      l.calls++;
      l.tokens.input_tokens += u.input_tokens;
      l.tokens.cached_read_tokens += u.cached_read_tokens;
      l.tokens.cache_write_tokens += u.cache_write_tokens;
      l.tokens.output_tokens += u.output_tokens;
      l.tokens.reasoning_tokens += u.reasoning_tokens;
    }
    l.spentUsd = 0.01;
    return l;
  };

  it("trial show, its --json, job show's usage and the ATIF's total_prompt_tokens print the same prompt figure", async () => {
    const fields = spendRecord({ agent: lane(), judge: zeroLane() }, true);
    const { job, trials } = await jobWith([fields as Partial<TrialRecord>]);
    const id = trials[0];
    appendGatewayUsage(home, id, calls.map((u) => ({ type: "usage", data: { update: { sessionUpdate: "usage", source: "gateway", scope: "call", model: "anthropic/claude-sonnet-4-6", lane: "agent", usage: traceUsage(u), cost_usd: 0.005 } } })));
    const atif = evolve(["trial", "download", id, "--stream", "trace-atif"]);
    expect(atif.code, atif.stderr).toBe(0);
    const total = JSON.parse(atif.stdout).final_metrics;
    expect(total).toMatchObject({ total_prompt_tokens: 369 + 2048 + 2048, total_cached_tokens: 2048 });
    expect(row(evolve(["trial", "show", id]).stdout, "tokens")).toBe(`prompt ${total.total_prompt_tokens} (cached_read 2048, cache_write 0), output 100 (reasoning 12)`);
    const shown = JSON.parse(evolve(["trial", "show", id, "--json"]).stdout);
    expect(shown.tokens).toEqual({ prompt: total.total_prompt_tokens, cached_read: 2048, cache_write: 0, output: 100, reasoning: 12 });
    expect(shown.usage).toMatchObject({ prompt: total.total_prompt_tokens });
    const summary = JSON.parse(evolve(["job", "show", job, "--json"]).stdout);
    expect(JSON.stringify(summary)).toContain(`"prompt":${total.total_prompt_tokens}`);
  });

  it("a record from before `prompt` was kept (its `input` the uncached share) is shown in the same terms", async () => {
    const { trials } = await jobWith([{ tokens: { input: 2417, cached_read: 2048, cache_write: 0, output: 100, reasoning: 0 } }]);
    expect(row(evolve(["trial", "show", trials[0]]).stdout, "tokens")).toBe("prompt 4465 (cached_read 2048, cache_write 0), output 100 (reasoning 0)");
    expect(JSON.parse(evolve(["trial", "show", trials[0], "--json"]).stdout).tokens).toEqual({ prompt: 4465, cached_read: 2048, cache_write: 0, output: 100, reasoning: 0 });
  });
});

describe("evolve job show: spend summed per lane", () => {
  const spendLine = (stdout: string) => stdout.split("\n").find((l) => l.startsWith("spend "));

  it("sums agent and judge apart; settled figures print plainly", async () => {
    const { job } = await jobWith([withJudge, measured]);
    const s = evolve(["job", "show", job]);
    expect(s.code).toBe(0);
    expect(spendLine(s.stdout)).toBe("spend  $0.0246 (agent)  $0.0040 (judge)");
    const doc = JSON.parse(evolve(["job", "show", job, "--json"]).stdout);
    expect(doc.spend.agent_usd).toBeCloseTo(0.0246, 10);
    expect(doc.spend).toMatchObject({ agent_lower_bound: false, judge_usd: 0.004, judge_lower_bound: false });
  });

  it("says `at least` when any trial's figure is a lower bound, and leaves out a judge no trial had", async () => {
    const { job } = await jobWith([measured, lowerBound, {}]);
    expect(spendLine(evolve(["job", "show", job]).stdout)).toBe("spend  at least $0.0173 (agent)");
    expect(JSON.parse(evolve(["job", "show", job, "--json"]).stdout).spend).toMatchObject({ agent_lower_bound: true, judge_usd: null });
  });

  it("shows the ledger's figure for the job, which counts the attempts a trial's record no longer keeps, as gateway status does", async () => {
    // one trial whose record keeps its last attempt ($0.0123); its first attempt's calls cost $0.0077 more, booked in
    // the ledger against the user and the job alike
    const { job } = await jobWith([withJudge]);
    writeFileSync(join(home, "config.toml"), '[budget]\nuser = "erin"\n');
    await withStore((st) => {
      st.addSpend("user", "erin", "", 0.0246);
      st.addSpend("job", job, "agent", 0.02);
      st.addSpend("job", job, "judge", 0.0046);
    });
    expect(spendLine(evolve(["job", "show", job]).stdout)).toBe("spend  $0.0200 (agent)  $0.0046 (judge)");
    const doc = JSON.parse(evolve(["job", "show", job, "--json"]).stdout);
    expect(doc.spend).toMatchObject({ agent_usd: 0.02, agent_lower_bound: false, judge_usd: 0.0046 });
    expect(doc.spend.agent_usd + doc.spend.judge_usd).toBeCloseTo(JSON.parse(evolve(["gateway", "status", "--json"]).stdout).user.spent_usd, 12);
  });

  it("prints `-` when no trial measured any spend", async () => {
    const { job } = await jobWith([{}, {}]);
    expect(spendLine(evolve(["job", "show", job]).stdout)).toBe("spend  -");
    expect(JSON.parse(evolve(["job", "show", job, "--json"]).stdout).spend).toEqual({ agent_usd: null, agent_lower_bound: false, judge_usd: null, judge_lower_bound: false });
  });
});

describe("evolve gateway stop|resume|status", () => {
  it("stop sets the store's stop, status shows it, resume clears it", async () => {
    const { STOP_SETTING } = await import("../engine/gateway-host/model-gateway.ts");
    expect(evolve(["gateway", "status"]).stdout.split("\n")[0]).toBe("accepting model calls");

    const stop = evolve(["gateway", "stop"]);
    expect(stop.code).toBe(0);
    expect(stop.stdout.trim().split("\n")).toHaveLength(1);
    expect(await withStore((s) => s.getSetting(STOP_SETTING))).toBe("spending stopped by `evolve gateway stop`");
    expect(JSON.parse(evolve(["gateway", "status", "--json"]).stdout)).toMatchObject({ stopped: true, reason: "spending stopped by `evolve gateway stop`" });

    expect(evolve(["gateway", "stop", "provider incident"]).code).toBe(0);
    expect(await withStore((s) => s.getSetting(STOP_SETTING))).toBe("provider incident");
    expect(evolve(["gateway", "status"]).stdout.split("\n")[0]).toBe("stopped: provider incident  (`evolve gateway resume` lifts it)");

    const resume = evolve(["gateway", "resume"]);
    expect(resume.code).toBe(0);
    expect(resume.stdout).toBe("gateway resumed: model calls are accepted again\n");
    expect(await withStore((s) => s.getSetting(STOP_SETTING))).toBeUndefined();
    expect(JSON.parse(evolve(["gateway", "status", "--json"]).stdout)).toMatchObject({ stopped: false, reason: null });
    expect(evolve(["gateway", "resume"]).stdout).toBe("gateway was not stopped; nothing to resume\n");
  });

  it("status reports the ledger's settled spend against the [budget] limits", async () => {
    writeFileSync(join(home, "config.toml"), '[budget]\nuser = "alice"\nuser_credits_usd = 50\nteam = "acme"\nteam_monthly_usd = 200\ntrial_cap_usd = 5\n');
    const month = monthOf(Date.now());
    await withStore((s) => {
      s.addSpend("user", "alice", "", 1.23);
      s.addSpend("team", "acme", month, 10.5);
      s.addSpend("team", "acme", "2000-01", 99); // another month is not this month's budget
      s.addSpend("user", "bob", "", 7); // nor is another user's spend alice's
    });
    const s = evolve(["gateway", "status"]);
    expect(s.code).toBe(0);
    expect(s.stdout).toContain("user alice: $1.23 of $50.00 credits\n");
    expect(s.stdout).toContain(`team acme: $10.50 of $200.00 in ${month}\n`);

    // what running gateways publish as in flight shows beside it; an entry gone stale (a dead process) does not
    const { INFLIGHT_SETTING } = await import("../engine/gateway-host/model-gateway.ts");
    const now = Date.now();
    await withStore((st) =>
      st.putSetting(INFLIGHT_SETTING, {
        live: { user: "alice", team: "acme", month, user_usd: 0.4, team_usd: 0.25, at: now },
        other: { user: "bob", team: null, month, user_usd: 3, team_usd: 0, at: now },
        dead: { user: "alice", team: "acme", month, user_usd: 9, team_usd: 9, at: now - 60_000 },
      }),
    );
    const held = evolve(["gateway", "status"]);
    expect(held.stdout).toContain("user alice: $1.23 of $50.00 credits (+$0.40 in flight)\n");
    expect(held.stdout).toContain(`team acme: $10.50 of $200.00 in ${month} (+$0.25 in flight)\n`);
    expect(JSON.parse(evolve(["gateway", "status", "--json"]).stdout)).toMatchObject({ user: { in_flight_usd: 0.4 }, team: { in_flight_usd: 0.25 } });
    await withStore((st) => st.putSetting(INFLIGHT_SETTING, undefined));
    expect(s.stdout).toContain("caps: trial $5.00\n");
    const doc = JSON.parse(evolve(["gateway", "status", "--json"]).stdout);
    expect(doc).toMatchObject({
      stopped: false,
      user: { name: "alice", spent_usd: 1.23, credits_usd: 50 },
      team: { name: "acme", month, spent_usd: 10.5, monthly_usd: 200, left_usd: 189.5 },
      trial_cap_usd: 5,
      global_cap_usd: null,
    });
    expect(doc.user.left_usd).toBeCloseTo(48.77, 10);
  });

  it("bills the OS account when USER is unset (not Bun's \"unknown\"), and USER when it is set", () => {
    const { USER: _u, LOGNAME: _l, ...bare } = process.env;
    const account = spawnSync("id", ["-un"], { encoding: "utf8" }).stdout.trim();
    expect(account).not.toBe("");
    expect(JSON.parse(evolve(["gateway", "status", "--json"], bare).stdout).user.name).toBe(account);
    expect(JSON.parse(evolve(["gateway", "status", "--json"], { ...bare, USER: "dana" }).stdout).user.name).toBe("dana");
  });
});
