/**
 * Serving the gateway app over HTTP with @hono/node-server: in-process during `evolve run`, standalone under
 * `evolve gateway serve`. Bound to loopback unless told otherwise, since the gateway spends real money.
 */
import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { createGatewayApp, type GatewayDeps } from "./app.ts";

/** A running gateway. */
export interface RunningGateway {
  /** `http://host:port`, no trailing slash (Anthropic-style base URL; OpenAI clients append `/v1`). */
  url: string;
  port: number;
  host: string;
  close(): Promise<void>;
}

/** Starts the gateway on `host` (default 127.0.0.1) and `port` (0 = any free port); resolves once listening. */
export async function serveGateway(opts: GatewayDeps & { port?: number; host?: string }): Promise<RunningGateway> {
  const { port = 0, host = "127.0.0.1", ...deps } = opts;
  const app = createGatewayApp(deps);
  return await new Promise<RunningGateway>((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port, hostname: host }, (info: AddressInfo) => {
      const shownHost = host.includes(":") ? `[${host}]` : host;
      resolve({
        url: `http://${shownHost}:${info.port}`,
        port: info.port,
        host,
        close: () =>
          new Promise<void>((done) => {
            // Open streams would keep close() waiting forever; a stopping gateway cuts them.
            (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
            server.close(() => done());
          }),
      });
    });
    server.once("error", reject);
  });
}
