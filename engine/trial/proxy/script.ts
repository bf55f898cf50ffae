/**
 * Python both scripts share: `pipe` copies one direction until EOF (then half-closes, or closes when `half` is
 * false or the transport cannot), and `respond` answers a plain-text HTTP error and closes.
 */
const PY_STREAMS = String.raw`
async def pipe(r, w, half):
    try:
        while True:
            b = await r.read(65536)
            if not b:
                break
            w.write(b)
            await w.drain()
    except Exception:
        pass
    try:
        if half and w.can_write_eof():
            w.write_eof()
        else:
            w.close()
    except Exception:
        pass

async def respond(w, code, reason, text):
    body = (text + "\n").encode()
    w.write(("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (code, reason, len(body))).encode() + body)
    try:
        await w.drain()
    finally:
        w.close()
`;

/**
 * The egress proxy that runs inside each allowlist trial's proxy container (python3 from the Debian base image):
 * HTTP CONNECT (for https and any TCP) and plain-HTTP forwarding, each checked against the allowlist, a 403 with a
 * reason otherwise. It is kept as a string so the single-file binary carries it.
 *
 * The allowlist is read per request from /tmp/evolve-allow (one pattern a line; evolve rewrites it by exec when a
 * phase changes the policy), else from $EVOLVE_ALLOWED_HOSTS (comma-separated) given at creation. Matching is
 * hostAllowed's in network.ts: exact names, and `*.x` matching any name below x but never x itself.
 */
export const PROXY_SCRIPT = String.raw`
import asyncio, os, sys
from urllib.parse import urlsplit

ALLOW_FILE = "/tmp/evolve-allow"

def patterns():
    try:
        with open(ALLOW_FILE) as f:
            return [l.strip().lower() for l in f if l.strip()]
    except FileNotFoundError:
        return [h.strip().lower() for h in os.environ.get("EVOLVE_ALLOWED_HOSTS", "").split(",") if h.strip()]

def allowed(host):
    host = host.lower().rstrip(".")
    for p in patterns():
        if p.startswith("*."):
            if host.endswith(p[1:]):
                return True
        elif host == p:
            return True
    return False

def log(msg):
    print(msg, flush=True)

${PY_STREAMS}
async def answer(w, code, reason, why):
    await respond(w, code, reason, "evolve egress proxy: %s" % why)

async def handle(r, w):
    try:
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 30)
    except Exception:
        w.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return await answer(w, 400, "Bad Request", "malformed request line")
    method, target, version = parts
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit():
            return await answer(w, 400, "Bad Request", "CONNECT needs host:port")
        port = int(port)
    else:
        u = urlsplit(target)
        if u.scheme != "http" or not u.hostname:
            return await answer(w, 400, "Bad Request", "only absolute http:// URLs and CONNECT go through this proxy")
        host, port = u.hostname, u.port or 80
        path = (u.path or "/") + ("?" + u.query if u.query else "")
    if not allowed(host):
        log("deny %s %s:%d" % (method, host, port))
        return await answer(w, 403, "Forbidden", "%s is not in allowed_hosts" % host)
    log("allow %s %s:%d" % (method, host, port))
    try:
        ur, uw = await asyncio.wait_for(asyncio.open_connection(host, port), 15)
    except Exception as e:
        return await answer(w, 502, "Bad Gateway", "cannot reach %s:%d: %s" % (host, port, e))
    if method == "CONNECT":
        w.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    else:
        drop = ("proxy-connection:", "proxy-authorization:", "connection:", "keep-alive:")
        hdrs = [l for l in lines[1:] if l and not l.lower().startswith(drop)]
        uw.write(("%s %s %s\r\n" % (method, path, version) + "\r\n".join(hdrs + ["Connection: close"]) + "\r\n\r\n").encode("latin-1"))
    await asyncio.gather(pipe(r, uw, True), pipe(ur, w, False))

async def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 3128
    server = await asyncio.start_server(handle, "0.0.0.0", port)
    log("evolve egress proxy listening on %d" % port)
    async with server:
        await server.serve_forever()

asyncio.run(main())
`;

/**
 * The gateway relay that runs in each gateway trial's relay container (python3 from the Debian base image): it
 * accepts TCP on `0.0.0.0:<argv[1]>` and pipes each connection, byte for byte, to the unix socket at argv[2] (the
 * trial's gateway socket, bind-mounted from the host). It reads nothing of what it carries, so HTTP streaming,
 * keep-alive and any client work unchanged. When the socket is gone (the trial's lease ended) it answers 502 with a
 * reason instead of a bare reset, so an agent's log says why its model calls stopped.
 */
export const RELAY_SCRIPT = String.raw`
import asyncio, sys

${PY_STREAMS}
async def handle(r, w):
    try:
        ur, uw = await asyncio.open_unix_connection(sys.argv[2])
    except Exception as e:
        await respond(w, 502, "Bad Gateway", "evolve gateway relay: the trial's gateway is not listening: %s" % e)
        return
    await asyncio.gather(pipe(r, uw, True), pipe(ur, w, True))
    for s in (w, uw):
        try:
            s.close()
        except Exception:
            pass

async def main():
    server = await asyncio.start_server(handle, "0.0.0.0", int(sys.argv[1]))
    print("evolve gateway relay listening on %s -> %s" % (sys.argv[1], sys.argv[2]), flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
`;
