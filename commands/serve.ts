/**
 * `evolve serve` (the local API, engine/serve) and `evolve auth token create|list|revoke` (its tokens). Argument
 * parsing and printing only: the routes, the token rules and who may connect are engine/serve's.
 */
import { resolve } from "node:path";
import type { Command } from "commander";
import { startServe } from "../engine/serve/mod.ts";
import { createToken, listTokens, revokeToken } from "../engine/serve/mod.ts";
import { localUser } from "../engine/org/mod.ts";
import { out, outJson, outTable, style, when } from "./output.ts";
import { applyRunDoc } from "./run-config.ts";
import type { RunOptions } from "./run.ts";
import { withStore } from "./store.ts";

/**
 * `run`'s options from an API request body: the body's keys are a run config file's (`n-attempts` or `n_attempts`),
 * checked by the same parsers, over run's own defaults.
 */
function runOptionsFrom(run: Command, doc: Record<string, unknown>): RunOptions {
  const defaults: Record<string, unknown> = {};
  for (const o of run.options) if (o.defaultValue !== undefined) defaults[o.attributeName()] = o.defaultValue;
  return applyRunDoc(defaults, run, doc, "the request body") as unknown as RunOptions;
}

/**
 * `evolve serve [--port N] [--host H] [--socket PATH]`: the API and the dashboard; runs until SIGINT/SIGTERM. `run`: the `run` command, whose
 * flags POST /api/v1/jobs takes.
 */
export async function serveCommand(opts: { port?: number; host?: string; socket?: string; project?: string; metaharnessRun?: string }, version: string, run: Command): Promise<number> {
  return withStore(async (store, home) => {
    // a job started over the API acts as the token's user: its org is resolved and recorded as theirs
    const startJob = async (doc: Record<string, unknown>, user: string) => (await import("./run.ts")).startJobQuietly({ ...runOptionsFrom(run, doc), asUser: user });
    const where = { ...(opts.project !== undefined ? { project: resolve(opts.project) } : {}), ...(opts.metaharnessRun !== undefined ? { metaharnessRun: resolve(opts.metaharnessRun) } : {}) };
    const serving = await startServe({ store, home, version, startJob, ...where }, { host: opts.host, port: opts.port, socket: opts.socket });
    try {
      if (serving.tcp) {
        out(`${style.bold("evolve serve")} listening on ${serving.tcp.url}/api/v1  ${style.dim("(every request needs Authorization: Bearer <token>)")}`);
        out(`${style.bold("dashboard")} ${serving.tcp.url}/  ${style.dim("(log in once with a token: evolve auth token create --name browser)")}`);
      }
      if (serving.socket) out(`${style.bold("evolve serve")} listening on ${serving.socket.url}  ${style.dim("(mode 0600: this user only, no token needed)")}`);
      out(style.dim(`routes: GET /api/v1/openapi.json`));
      await new Promise<void>((done) => {
        process.once("SIGINT", () => done());
        process.once("SIGTERM", () => done());
      });
    } finally {
      await serving.close();
    }
    return 0;
  });
}

/** `evolve auth token create [--scope read|run] [--name N]`: prints the token once; only its hash is kept. */
export async function tokenCreateCommand(opts: { scope?: string; name?: string; json?: boolean }): Promise<number> {
  return withStore((store) => {
    const { token, record } = createToken(store, { scope: opts.scope, name: opts.name, user: localUser() });
    if (opts.json) return outJson({ token, id: record.id, name: record.name, scope: record.scope, created_at: record.created_at }), 0;
    out(token);
    process.stderr.write(style.dim(`token ${record.id} (${record.scope}${record.name ? `, ${record.name}` : ""}): shown once, only its hash is kept; send it as Authorization: Bearer <token>\n`));
    return 0;
  });
}

/** `evolve auth token list`: every token, revoked ones included; never a token itself. */
export async function tokenListCommand(opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const rows = listTokens(store);
    if (opts.json) return outJson(rows), 0;
    if (rows.length === 0) return out("no API tokens yet: evolve auth token create"), 0;
    outTable(
      ["ID", "NAME", "SCOPE", "CREATED", "LAST USED", "REVOKED"],
      rows.map((r) => [r.id, r.name || "-", r.scope, when(r.created_at), r.last_used_at ? when(r.last_used_at) : "-", r.revoked_at ? when(r.revoked_at) : "-"]),
    );
    return 0;
  });
}

/** `evolve auth token revoke <id>`: the token is refused from the next request on. */
export async function tokenRevokeCommand(id: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const r = revokeToken(store, id);
    if (opts.json) return outJson(r), 0;
    out(`revoked token ${r.id}${r.name ? ` (${r.name})` : ""} at ${r.revoked_at}`);
    return 0;
  });
}
