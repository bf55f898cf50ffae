/**
 * `evolve gateway serve`: the LLM gateway on its own, for trying a client against it or serving a GPU box's
 * local models. It issues one local credential (printed once, with the env a client needs) and meters every call
 * to `$EVOLVE_HOME/gateway/calls.jsonl`. During `evolve run` the same app runs in-process instead.
 */
import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../engine/config.ts";
import { EvolveError } from "../engine/errors.ts";
import { Budgets } from "../gateway/budget.ts";
import { agentEnv, Credentials } from "../gateway/credentials.ts";
import { CallMeter } from "../gateway/meter.ts";
import { Prices } from "../gateway/prices.ts";
import { serveGateway } from "../gateway/serve.ts";
import { serveFetch } from "../engine/runtime.ts";
import { loadUpstreams } from "../gateway/upstreams.ts";
import { out, style } from "./output.ts";

/** `evolve gateway serve [--port N] [--host H] [--config FILE]`; runs until SIGINT/SIGTERM. */
export async function gatewayServeCommand(opts: { port?: number; host?: string; config?: string }): Promise<number> {
  const port = opts.port ?? 4000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new EvolveError("usage", `--port must be 0–65535, got ${opts.port}`, "e.g. --port 4000");
  const { home } = loadConfig();
  const upstreams = loadUpstreams({ configPath: opts.config, home });
  const prices = Prices.fromHome(home, (m) => process.stderr.write(`${style.yellow("warning")}: ${m}\n`));
  const credentials = new Credentials();
  const { key } = credentials.issueAgent({ trialId: "local" });
  const logDir = join(home, "gateway");
  mkdirSync(logDir, { recursive: true });
  const calls = join(logDir, "calls.jsonl");
  const meter = new CallMeter({ sink: (c) => appendFileSync(calls, JSON.stringify(c) + "\n"), keepRecords: false });
  const gw = await serveGateway({
    upstreams,
    authenticate: credentials.authenticate,
    meter: meter.meter,
    budget: new Budgets(),
    prices: (m) => prices.priceOf(m) ?? undefined,
  }, { port, host: opts.host ?? "127.0.0.1" }, serveFetch);
  out(`${style.bold("gateway")} listening on ${gw.url}  ${style.dim(`(calls metered to ${calls})`)}`);
  out(style.dim("a client reaches it with:"));
  for (const [k, v] of Object.entries(agentEnv(key, gw.url))) out(`export ${k}=${v}`);
  await new Promise<void>((done) => {
    const stop = () => done();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  await gw.close();
  return 0;
}
