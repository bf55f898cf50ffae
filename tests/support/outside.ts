/**
 * "The internet" for network tests on a machine that has none: an HTTP server in a network namespace of its own,
 * on an address that is not the host's, routed from the host over a veth pair. A box that reaches it reached a
 * remote machine; the host's own end of the pair (`hostIp`) is a host address like any other. Needs root.
 *
 * The server answers `<prefix> <Host header without port>`, so a reply proves which name got through (or just
 * `<prefix>` with `echoHost: false`).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomInt } from "node:crypto";

export interface Outside {
  /** The server's address, off the host. */
  ip: string;
  /** The host's end of the link: one of the host's own addresses. */
  hostIp: string;
  port: number;
  url: string;
  close(): void;
}

const SERVER = String.raw`
import http.server, sys
prefix, echo = sys.argv[2], sys.argv[3] == "1"
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (("%s %s" % (prefix, (self.headers.get("Host") or "").rsplit(":", 1)[0])) if echo else prefix).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
`;

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * Starts the outside server in a /30 drawn at random from `base` (a /16 such as "198.18"; 198.18.0.0/15 is
 * reserved for benchmarks and routed nowhere, so it is neither private nor anybody's).
 */
export async function startOutside(prefix: string, base = "198.18", opts: { echoHost?: boolean } = {}): Promise<Outside> {
  const tag = randomInt(0, 0xffffff).toString(16).padStart(6, "0");
  const ns = `evout-${tag}`;
  const slot = randomInt(0, 16384) * 4;
  const net = `${base}.${Math.floor(slot / 256)}`;
  const hostIp = `${net}.${(slot % 256) + 1}`;
  const outIp = `${net}.${(slot % 256) + 2}`;
  ip("netns", "add", ns);
  let server: ChildProcess | undefined;
  const close = () => {
    server?.kill("SIGKILL");
    try {
      ip("netns", "del", ns);
    } catch {
      // already gone
    }
    try {
      ip("link", "del", `evo${tag}h`);
    } catch {
      // went with the namespace
    }
  };
  // a worker that ends without afterAll (a hook timeout, a kill) must not leave the namespace behind
  process.once("exit", close);
  try {
    ip("link", "add", `evo${tag}h`, "type", "veth", "peer", "name", `evo${tag}n`);
    ip("link", "set", `evo${tag}n`, "netns", ns);
    ip("addr", "add", `${hostIp}/30`, "dev", `evo${tag}h`);
    ip("link", "set", `evo${tag}h`, "up");
    ip("-n", ns, "addr", "add", `${outIp}/30`, "dev", `evo${tag}n`);
    ip("-n", ns, "link", "set", `evo${tag}n`, "up");
    ip("-n", ns, "link", "set", "lo", "up");
    ip("-n", ns, "route", "add", "default", "via", hostIp);
    const port = 8080;
    server = spawn("ip", ["netns", "exec", ns, "python3", "-c", SERVER, String(port), prefix, opts.echoHost === false ? "0" : "1"], { stdio: "ignore" });
    const url = `http://${outIp}:${port}/`;
    for (let i = 0; ; i++) {
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
        if ((await r.text()).startsWith(prefix)) break;
      } catch {
        if (i > 100) throw new Error(`the outside server at ${url} did not answer`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    return { ip: outIp, hostIp, port, url, close };
  } catch (e) {
    close();
    throw e;
  }
}
