/**
 * `evolve gateway serve|stop|resume|status`. `serve`: the LLM gateway on its own, for trying a client against it or serving a GPU box's
 * local models. It issues one local credential (printed once, with the env a client needs) and meters every call
 * to `$EVOLVE_HOME/gateway/calls.jsonl`. During `evolve run` the same app runs in-process instead.
 * `stop`/`resume` set the store's global stop, which those in-process gateways poll; `status` reads it and the ledger.
 */
import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../engine/config.ts";
import { EvolveError, firstLine } from "../engine/errors.ts";
import { monthOf } from "../gateway/budget.ts";
import { agentEnv } from "../gateway/credentials.ts";
import { loadUpstreams } from "../gateway/upstreams.ts";
import { ModelGateway, publishedInFlight, STOP_SETTING } from "../engine/gateway-host/mod.ts";
import { out, outJson, style } from "./output.ts";
import { withStore } from "./store.ts";

/**
 * `evolve gateway serve [--port N] [--host H] [--config FILE]`; runs until SIGINT/SIGTERM. The store stays open
 * meanwhile: the `[budget]` limits apply as in a run, spend is booked in its ledger, and `gateway stop` reaches it.
 */
export async function gatewayServeCommand(opts: { port?: number; host?: string; config?: string }): Promise<number> {
  const port = opts.port ?? 4000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new EvolveError("usage", `--port must be 0–65535, got ${opts.port}`, "e.g. --port 4000");
  const { home, budget } = loadConfig();
  let upstreams;
  try {
    upstreams = loadUpstreams({ configPath: opts.config, home });
  } catch (e) {
    const file = opts.config ?? join(home, "gateway.toml");
    throw new EvolveError("gateway_config_invalid", `cannot read the gateway's upstreams (${file}): ${firstLine(e)}`, "fix the file, or move it aside to use ANTHROPIC_*/OPENAI_* from the environment");
  }
  const logDir = join(home, "gateway");
  mkdirSync(logDir, { recursive: true });
  const calls = join(logDir, "calls.jsonl");
  return withStore(async (store) => {
    const warn = (m: string) => process.stderr.write(`${style.yellow("warning")}: ${m}\n`);
    const gateway = new ModelGateway({ home, store, upstreams, budget, warn });
    try {
      const { url, key } = await gateway.serveLocal({ port, host: opts.host ?? "127.0.0.1" }, (c) => appendFileSync(calls, JSON.stringify(c) + "\n"));
      out(`${style.bold("gateway")} listening on ${url}  ${style.dim(`(calls metered to ${calls})`)}`);
      out(style.dim("a client reaches it with:"));
      for (const [k, v] of Object.entries(agentEnv(key, url))) out(`export ${k}=${v}`);
      await new Promise<void>((done) => {
        process.once("SIGINT", () => done());
        process.once("SIGTERM", () => done());
      });
    } finally {
      await gateway.close();
    }
    return 0;
  });
}

/** The default reason `gateway stop` records, as refused calls report it (`other: <reason>`). */
export const DEFAULT_STOP_REASON = "spending stopped by `evolve gateway stop`";

/** `evolve gateway stop [reason]`: sets the store's global stop, which every running gateway polls. */
export async function gatewayStopCommand(reason: string | undefined, opts: { json?: boolean }): Promise<number> {
  const why = reason?.trim() || DEFAULT_STOP_REASON;
  return withStore((store) => {
    store.putSetting(STOP_SETTING, why);
    if (opts.json) return outJson({ stopped: true, reason: why }), 0;
    out(`gateway stopped: new model calls are refused (${why}); \`evolve gateway resume\` lifts it`);
    return 0;
  });
}

/** `evolve gateway resume`: clears the global stop. */
export async function gatewayResumeCommand(opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const was = store.getSetting(STOP_SETTING);
    store.putSetting(STOP_SETTING, undefined);
    if (opts.json) return outJson({ stopped: false, was_stopped: typeof was === "string" }), 0;
    out(typeof was === "string" ? "gateway resumed: model calls are accepted again" : "gateway was not stopped; nothing to resume");
    return 0;
  });
}

const usd = (v: number) => `$${v.toFixed(2)}`;

/**
 * `evolve gateway status`: the global stop, and the ledger's settled spend for this home's user (against
 * `user_credits_usd`) and team (this UTC month, against `team_monthly_usd`), with what running gateways hold in
 * flight against those limits. `--json` prints
 * `{ stopped, reason, user: {name, spent_usd, in_flight_usd, credits_usd|null, left_usd|null},
 *    team: {name, month, spent_usd, in_flight_usd, monthly_usd|null, left_usd|null} | null, global_cap_usd,
 *    trial_cap_usd, judge_trial_cap_usd }`; `left_usd` is the limit less settled spend.
 */
export async function gatewayStatusCommand(opts: { json?: boolean }): Promise<number> {
  const { budget: b } = loadConfig();
  return withStore((store) => {
    const reason = store.getSetting(STOP_SETTING);
    const stopped = typeof reason === "string";
    const left = (limit: number | undefined, spent: number) => (limit === undefined ? null : Math.max(0, limit - spent));
    const userSpent = store.getSpend("user", b.user, "");
    const month = monthOf(Date.now());
    const teamSpent = b.team !== undefined ? store.getSpend("team", b.team, month) : 0;
    const flight = publishedInFlight(store, { user: b.user, team: b.team, month });
    const doc = {
      stopped,
      reason: stopped ? reason : null,
      user: { name: b.user, spent_usd: userSpent, in_flight_usd: flight.user_usd, credits_usd: b.user_credits_usd ?? null, left_usd: left(b.user_credits_usd, userSpent) },
      team: b.team === undefined ? null : { name: b.team, month, spent_usd: teamSpent, in_flight_usd: flight.team_usd, monthly_usd: b.team_monthly_usd ?? null, left_usd: left(b.team_monthly_usd, teamSpent) },
      global_cap_usd: b.global_cap_usd ?? null,
      trial_cap_usd: b.trial_cap_usd ?? null,
      judge_trial_cap_usd: b.judge_trial_cap_usd ?? null,
    };
    if (opts.json) return outJson(doc), 0;
    out(stopped ? `${style.red("stopped")}: ${reason}  ${style.dim("(`evolve gateway resume` lifts it)")}` : `${style.green("accepting")} model calls`);
    const held = (v: number) => (v > 0 ? style.dim(` (+${usd(v)} in flight)`) : "");
    out(`user ${b.user}: ${usd(userSpent)}${b.user_credits_usd !== undefined ? ` of ${usd(b.user_credits_usd)} credits` : style.dim(" spent (no credit limit)")}${held(flight.user_usd)}`);
    if (doc.team) {
      out(`team ${doc.team.name}: ${usd(teamSpent)}${b.team_monthly_usd !== undefined ? ` of ${usd(b.team_monthly_usd)} in ${month}` : style.dim(` spent in ${month} (no monthly budget)`)}${held(flight.team_usd)}`);
    }
    const caps = [
      b.global_cap_usd !== undefined ? `global ${usd(b.global_cap_usd)} per process` : "",
      b.trial_cap_usd !== undefined ? `trial ${usd(b.trial_cap_usd)}` : "",
      b.judge_trial_cap_usd !== undefined ? `judge ${usd(b.judge_trial_cap_usd)} per trial` : "",
    ].filter(Boolean);
    if (caps.length) out(style.dim(`caps: ${caps.join(", ")}`));
    return 0;
  });
}
