/**
 * HTTP over the engine's unix socket with `node:http` (`socketPath`). Podman and Docker both serve the Docker API
 * there; one keep-alive connection pool saves the connect per call that makes the CLI slow. Errors are EvolveErrors:
 * `engine_unavailable` when nothing answers on the socket, `engine_error` with the engine's own message when it
 * refuses a call, `engine_timeout` when it does not answer in time.
 */
import http from "node:http";
import { EvolveError } from "../errors.ts";
import { formatDuration } from "../duration.ts";

/** The API version both engines understand (podman 4+ and docker 20.10+). */
export const API_PREFIX = "/v1.41";

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  /** A JSON body (sent with Content-Type application/json). */
  json?: unknown;
  /** A raw body, or a factory of a streamed one (a factory, so a request can be re-sent after a reconnect). */
  body?: Uint8Array | (() => AsyncIterable<Uint8Array>);
  contentType?: string;
  /** Abandon the call after this long (default 120 s; 0 = never, for streams bounded elsewhere). */
  timeoutMs?: number;
  /**
   * Receive the body as it arrives instead of buffering it (exec streams). A returned promise pauses the body until
   * it settles, so a slow consumer (a disk, gzip) holds the engine back instead of piling chunks up in memory.
   */
  onData?: (chunk: Buffer) => unknown;
  /** Aborts the call; a streaming call then resolves with what it had. */
  signal?: AbortSignal;
  /** Statuses ≥ 400 that are answers rather than errors (e.g. 404 on delete). */
  ok?: number[];
}

export interface RestResponse {
  status: number;
  body: Buffer;
  headers: http.IncomingHttpHeaders;
}

const CONNECT_ERRORS = new Set(["ENOENT", "ECONNREFUSED", "ENOTSOCK", "EACCES"]);

/** A small client for one engine socket. */
export class RestClient {
  private agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  /**
   * `reconnect` is called once when the socket does not answer, then the call is retried: podman's service exits
   * after an idle period (e.g. during a long CLI build) and is simply started again.
   */
  constructor(
    public socketPath: string,
    private readonly describe: string,
    private readonly hint: string,
    private readonly reconnect?: () => Promise<void>,
  ) {}

  /** One call; resolves with the status and (unless streamed) the body. Throws EvolveError on failure. */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<RestResponse> {
    let reconnected = false;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await this.once(method, path, opts);
        if (res.status >= 400 && !(opts.ok ?? []).includes(res.status)) {
          throw new EvolveError("engine_error", `${this.describe} ${method} ${path}: ${res.status} ${apiMessage(res.body)}`, "");
        }
        return res;
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? "";
        // A pooled connection the server closed while idle: safe to send again on a fresh one.
        if ((e as { staleSocket?: boolean }).staleSocket && attempt < 2) continue;
        if (CONNECT_ERRORS.has(code)) {
          if (this.reconnect && !reconnected) {
            reconnected = true;
            await this.reconnect();
            continue;
          }
          throw new EvolveError("engine_unavailable", `cannot reach ${this.describe} at ${this.socketPath} (${code})`, this.hint);
        }
        throw e;
      }
    }
  }

  /** A call whose answer is JSON. */
  async json<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<{ status: number; data: T }> {
    const res = await this.request(method, path, opts);
    const text = res.body.toString("utf8");
    return { status: res.status, data: (text.trim() ? JSON.parse(text) : undefined) as T };
  }

  /** Closes pooled connections. */
  close(): void {
    this.agent.destroy();
  }

  private once(method: string, path: string, opts: RequestOptions): Promise<RestResponse> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) qs.set(k, String(v));
    // a path that names its own version (podman's libpod calls: /v4.0.0/libpod/...) is sent as it is
    const url = `${path.startsWith("/_ping") || /^\/v\d/.test(path) ? "" : API_PREFIX}${path}${qs.size ? `?${qs}` : ""}`;
    const headers: Record<string, string> = {};
    let payload: Uint8Array | undefined;
    if (opts.json !== undefined) {
      payload = Buffer.from(JSON.stringify(opts.json));
      headers["Content-Type"] = "application/json";
    } else if (opts.body instanceof Uint8Array) {
      payload = opts.body;
    }
    if (opts.body !== undefined) headers["Content-Type"] = opts.contentType ?? "application/x-tar";
    if (payload) headers["Content-Length"] = String(payload.length);
    const timeoutMs = opts.timeoutMs ?? 120_000;

    return new Promise<RestResponse>((resolve, reject) => {
      let settled = false;
      const done = (err: unknown, res?: RestResponse) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(res!);
      };
      let status = 0;
      let resHeaders: http.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      const req = http.request({ socketPath: this.socketPath, agent: this.agent, method, path: url, headers }, (res) => {
        status = res.statusCode ?? 0;
        resHeaders = res.headers;
        res.on("data", (c: Buffer) => {
          if (opts.onData && status < 400) {
            let wait: unknown;
            try {
              wait = opts.onData(c);
            } catch (e) {
              // a consumer that refuses the stream (a tar reader's limit) ends the call with its error
              req.destroy();
              return done(e);
            }
            if (wait instanceof Promise) {
              res.pause();
              wait.then(
                () => res.resume(),
                (e) => (req.destroy(), done(e)),
              );
            }
          } else chunks.push(c);
        });
        res.on("end", () => done(null, { status, body: Buffer.concat(chunks), headers: resHeaders }));
        res.on("error", (e) => done(e));
        // A stream cut short (abort, or the engine closing a hijacked exec stream) still ends the call.
        res.on("close", () => done(null, { status, body: Buffer.concat(chunks), headers: resHeaders }));
      });
      const onAbort = () => {
        req.destroy();
        if (status) done(null, { status, body: Buffer.concat(chunks), headers: resHeaders });
        else done(new EvolveError("engine_aborted", `${this.describe} ${method} ${path}: aborted`, ""));
      };
      opts.signal?.addEventListener("abort", onAbort);
      const timer = setTimeout(() => {
        req.destroy();
        done(new EvolveError("engine_timeout", `${this.describe} ${method} ${path}: no answer within ${formatDuration(timeoutMs)}`, ""));
      }, timeoutMs || 2 ** 31 - 1);
      req.on("error", (e: NodeJS.ErrnoException) => {
        if (req.reusedSocket && (e.code === "ECONNRESET" || e.code === "EPIPE") && status === 0) {
          done(Object.assign(e, { staleSocket: true }));
        } else done(e);
      });
      // only once the error listener and the timer exist: an abort destroys the request at once
      if (opts.signal?.aborted) return onAbort();
      if (typeof opts.body === "function") {
        const it = opts.body();
        (async () => {
          for await (const chunk of it) {
            if (!req.write(chunk)) await new Promise((r) => req.once("drain", r));
          }
          req.end();
        })().catch((e) => {
          req.destroy();
          done(e);
        });
      } else {
        req.end(payload);
      }
    });
  }
}

/** The engine's error message from a JSON error body ({"message": …}), else the raw text's first line. */
function apiMessage(body: Buffer): string {
  const text = body.toString("utf8").trim();
  try {
    const j = JSON.parse(text);
    if (j && typeof j.message === "string") return j.message;
  } catch {
    // not JSON
  }
  return text.split("\n")[0].slice(0, 500);
}

/** Percent-encodes one path segment (image names carry '/' and ':'). */
export function seg(s: string): string {
  return encodeURIComponent(s);
}

/** Whether something answers `/_ping` on `socketPath` within `timeoutMs`. */
export function ping(socketPath: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request({ socketPath, method: "GET", path: "/_ping", timeout: timeoutMs }, (res) => {
      res.resume();
      res.on("end", () => resolve((res.statusCode ?? 0) === 200));
    });
    req.on("timeout", () => {
      req.destroy();
      resolve(false);
    });
    req.on("error", () => resolve(false));
    req.end();
  });
}
