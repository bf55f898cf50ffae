/**
 * `evolve dashboard [--port N]` (hidden): the dashboard's pages alone on loopback, for working on them until
 * `evolve serve` mounts them at `/` behind its tokens. Loopback only: the pages carry no auth of their own.
 */
import { loadConfig } from "../engine/config.ts";
import { dashboardApp } from "../engine/dashboard/mod.ts";
import { serveFetch } from "../engine/runtime.ts";
import { out, style } from "./output.ts";
import { withStore } from "./store.ts";

/** Serves the dashboard until SIGINT/SIGTERM; prints the address it listens on. */
export async function dashboardCommand(opts: { port?: number }): Promise<number> {
  const { home } = loadConfig();
  return withStore(async (store) => {
    const app = dashboardApp({ home, store });
    const listener = await serveFetch((req) => app.fetch(req), { host: "127.0.0.1", port: opts.port ?? 4300 });
    out(`${style.bold("dashboard")} on ${listener.url}/  ${style.dim("(loopback only; Ctrl-C stops it)")}`);
    try {
      await new Promise<void>((done) => {
        process.once("SIGINT", () => done());
        process.once("SIGTERM", () => done());
      });
    } finally {
      await listener.close();
    }
    return 0;
  });
}
