/**
 * Where `evolve serve` listens and who may reach it. TCP binds loopback unless told otherwise, and binding anything
 * else while no API token exists is refused (every TCP request needs one, so such a server could answer nobody but
 * would announce itself). The unix socket is trusted without a token: Node exposes no SO_PEERCRED, so instead the
 * socket is created 0600 inside a folder that must be this user's own and mode 0700 — only this user (and root)
 * can connect.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, unlinkSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { EvolveError } from "../errors.ts";
import { serveFetch, type HttpListener } from "../runtime.ts";
import { createServeApp, type ServeDeps } from "./app.ts";
import { hasLiveToken } from "./tokens.ts";

/** The port `evolve serve` takes when none is given. */
export const DEFAULT_SERVE_PORT = 8765;

export interface ServeAt {
  host?: string;
  port?: number;
  /** A unix socket path; without `port`, the only listener. */
  socket?: string;
}

/** Whether a host names only this machine: 127.0.0.0/8, ::1, localhost. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** Refuses a socket folder other users could enter or write; makes it (0700) when it is missing. */
function claimSocketDir(socket: string): void {
  const dir = dirname(socket);
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const uid = process.getuid?.();
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0) {
    throw new EvolveError(
      "serve_socket_unsafe",
      `${dir} is not this user's own mode-0700 folder (mode ${(st.mode & 0o777).toString(8)}), so other users could reach a socket in it`,
      `put the socket in a private folder: mkdir -m 700 ~/.evolve/run && evolve serve --socket ~/.evolve/run/serve.sock`,
    );
  }
  // a socket a previous server left is replaced; anything else at that name is not ours to remove
  const there = lstatSync(socket, { throwIfNoEntry: false });
  if (there) {
    if (!there.isSocket()) throw new EvolveError("usage", `${socket} exists and is not a socket`, "name a new path for --socket");
    unlinkSync(socket);
  }
}

/** A running `evolve serve`: its listeners and how to stop them. */
export interface Serving {
  tcp?: HttpListener;
  socket?: HttpListener;
  close(): Promise<void>;
}

/** Starts the listeners `at` asks for, refusing an exposed bind without a token before anything listens. */
export async function startServe(deps: ServeDeps, at: ServeAt): Promise<Serving> {
  const host = at.host ?? "127.0.0.1";
  const wantTcp = at.socket === undefined || at.port !== undefined;
  if (wantTcp && !isLoopback(host) && !hasLiveToken(deps.store)) {
    throw new EvolveError("serve_public_without_token", `refusing to listen on ${host}: it is reachable from other machines and no API token exists`, "create one first: evolve auth token create --name <who>; or bind loopback (--host 127.0.0.1)");
  }
  const out: Serving = { close: async () => {} };
  if (at.socket !== undefined) {
    const path = resolve(at.socket);
    claimSocketDir(path);
    out.socket = await serveFetch(createServeApp(deps, { trusted: true }).fetch, { path });
    chmodSync(path, 0o600);
  }
  if (wantTcp) {
    try {
      out.tcp = await serveFetch(createServeApp(deps).fetch, { host, port: at.port ?? DEFAULT_SERVE_PORT });
    } catch (e) {
      await out.socket?.close();
      throw e;
    }
  }
  out.close = async () => {
    await Promise.all([out.tcp?.close(), out.socket?.close()]);
  };
  return out;
}
