/**
 * Serving the gateway app: in-process during `evolve run` (one unix socket per trial, see engine/gateway-host/model-gateway.ts),
 * standalone under `evolve gateway serve` (TCP, bound to loopback unless told otherwise, since the gateway spends
 * real money). How a fetch handler becomes a listening server differs per runtime, so the caller passes the
 * runtime's `serve` in and this folder stays free of runtime checks.
 */
import { createGatewayApp, type GatewayDeps } from "./app.ts";

/** Where to listen: TCP (port 0 = any free port) or a unix socket. */
export type GatewayListenAt = { host?: string; port?: number } | { path: string };

/** A running listener as the runtime's serve returns it. */
export interface GatewayListener {
  /** `http://host:port` (Anthropic-style base URL; OpenAI clients append `/v1`) or `unix:<path>`. */
  url: string;
  port?: number;
  path?: string;
  /** Stops listening and cuts open connections (a held stream would otherwise keep close() waiting forever). */
  close(): Promise<void>;
}

/** A fetch-style handler, as hono's `app.fetch`. */
export type FetchHandler = (req: Request) => Response | Promise<Response>;

/** Turns a fetch handler into a listening HTTP server (engine/runtime.ts `serveFetch`). */
export type ServeFetch = (handler: FetchHandler, at: GatewayListenAt) => Promise<GatewayListener>;

/** Builds the app from `deps` and serves it at `at` with `serve`; resolves once listening. */
export async function serveGateway(deps: GatewayDeps, at: GatewayListenAt, serve: ServeFetch): Promise<GatewayListener> {
  const app = createGatewayApp(deps);
  return await serve(app.fetch, at);
}
