#!/usr/bin/env python3
"""Checks that `evolve gateway serve` fronts a local OpenAI-compatible server (scripts/device/local-model-server.py)
and measures what it adds. Called by gateway-local-model.sh, which starts both; prints one JSON summary.

Checks: /v1/models lists local/tiny-random; non-streaming and streaming chat completions through the gateway, for
`local/tiny-random` and the bare `tiny-random`, answer 200 with the text the server generated (greedy, so also the
text of a direct call); a streaming client that did not ask for usage gets no usage chunk (the gateway asks
upstream and drops it) while one that asked gets it; every call in `$EVOLVE_HOME/gateway/calls.jsonl` is metered
with the server's own token counts and `cost_usd: null` (unknown model, never priced as zero); the gateway key never
reaches the upstream (it sends the configured `api_key`). Then N sequential non-streaming calls direct and through
the gateway, interleaved, for the added latency.
"""
import argparse
import json
import socket
import statistics
import subprocess
import sys
import time

import httpx

MESSAGES = [
    {"role": "system", "content": "You are a tiny random model on a GPU box."},
    {"role": "user", "content": "Say something through the evolve gateway."},
]


def sse_events(resp):
    """`data:` payloads of an SSE response, in order, as raw strings."""
    buf = ""
    for text in resp.iter_text():
        buf += text.replace("\r\n", "\n")
        while "\n\n" in buf:
            block, buf = buf.split("\n\n", 1)
            data = [ln[5:].lstrip(" ") if ln.startswith("data:") else None for ln in block.split("\n")]
            data = [d for d in data if d is not None]
            if data:
                yield "\n".join(data)
    if buf.strip():
        yield buf.strip()[5:].lstrip(" ") if buf.strip().startswith("data:") else buf.strip()


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True, help="gateway root, e.g. http://127.0.0.1:4000")
    ap.add_argument("--direct", required=True, help="server /v1 base, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--key", required=True, help="the gateway key `gateway serve` printed")
    ap.add_argument("--calls", required=True, help="$EVOLVE_HOME/gateway/calls.jsonl")
    ap.add_argument("--server-log", required=True)
    ap.add_argument("--bench", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--bench-max-tokens", type=int, default=8)
    args = ap.parse_args()

    checks, failures, samples = {}, [], {}

    def check(name, ok, detail=None):
        checks[name] = bool(ok)
        if not ok:
            failures.append({"check": name, "detail": detail})

    # TCP_NODELAY on both: h11 writes headers and body apart, and Nagle + delayed ACK would add ~40 ms to a call
    def transport():
        return httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])

    gw = httpx.Client(base_url=args.gateway.rstrip("/") + "/v1", headers={"authorization": f"Bearer {args.key}"}, timeout=120, transport=transport())
    direct = httpx.Client(base_url=args.direct.rstrip("/"), headers={"authorization": "Bearer none"}, timeout=120, transport=transport())
    gw_tags = []  # tags of calls sent through the gateway, in order

    def body(model, tag, stream=False, include_usage=None, max_tokens=None):
        b = {"model": model, "messages": MESSAGES, "max_tokens": max_tokens or args.max_tokens, "temperature": 0, "user": tag}
        if stream:
            b["stream"] = True
        if include_usage is not None:
            b["stream_options"] = {"include_usage": include_usage}
        return b

    def nonstream(client, model, tag, **kw):
        if client is gw:
            gw_tags.append(tag)
        t0 = time.perf_counter()
        r = client.post("/chat/completions", json=body(model, tag, **kw))
        ms = (time.perf_counter() - t0) * 1000
        return r, ms

    def stream(client, model, tag, include_usage=None):
        if client is gw:
            gw_tags.append(tag)
        chunks, raw, done, status = [], [], False, None
        with client.stream("POST", "/chat/completions", json=body(model, tag, stream=True, include_usage=include_usage)) as r:
            status = r.status_code
            ctype = r.headers.get("content-type", "")
            if status != 200:
                r.read()
                return {"status": status, "error": r.text[:500]}
            for data in sse_events(r):
                raw.append(data)
                if data == "[DONE]":
                    done = True
                    continue
                chunks.append(json.loads(data))
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
        usage_chunks = [c for c in chunks if c.get("usage")]
        empty_choice_chunks = [c for c in chunks if c.get("choices") == []]
        return {
            "status": status, "content_type": ctype, "chunks": len(chunks), "done": done, "text": text,
            "usage_chunks": usage_chunks, "empty_choice_chunks": len(empty_choice_chunks),
            "all_chunk_objects": all(c.get("object") == "chat.completion.chunk" for c in chunks),
            "done_last": bool(raw) and raw[-1] == "[DONE]",
            "finish_reasons": [c["choices"][0].get("finish_reason") for c in chunks if c.get("choices") and c["choices"][0].get("finish_reason")],
        }

    # -- models
    r = gw.get("/models")
    ids = [m.get("id") for m in r.json().get("data", [])] if r.status_code == 200 else []
    check("gateway_models_lists_local_tiny_random", r.status_code == 200 and "local/tiny-random" in ids, {"status": r.status_code, "ids": ids})
    r = direct.get("/models")
    check("server_models_200", r.status_code == 200, r.text[:200])

    # -- reference: a direct greedy call
    r, _ = nonstream(direct, "tiny-random", "direct-ref")
    ref = r.json() if r.status_code == 200 else {}
    ref_text = ref.get("choices", [{}])[0].get("message", {}).get("content") if ref else None
    check("direct_nonstream_200", r.status_code == 200, r.text[:300])
    samples["direct_text"] = ref_text
    samples["direct_usage"] = ref.get("usage")

    # -- through the gateway, non-streaming, both names
    for model, tag in (("local/tiny-random", "gw-nonstream-prefixed"), ("tiny-random", "gw-nonstream-bare")):
        r, _ = nonstream(gw, model, tag)
        ok = r.status_code == 200
        check(f"{tag}_200", ok, r.text[:300])
        if ok:
            j = r.json()
            text = j["choices"][0]["message"]["content"]
            check(f"{tag}_same_text_as_direct", text == ref_text, {"gateway": text, "direct": ref_text})
            check(f"{tag}_usage_passed_through", j.get("usage") == ref.get("usage"), {"gateway": j.get("usage"), "direct": ref.get("usage")})
            samples[f"{tag}_model_field"] = j.get("model")

    # -- through the gateway, streaming: without usage asked (must get none), with usage asked (must get it)
    for model, tag, inc in (
        ("local/tiny-random", "gw-stream-prefixed", None),
        ("tiny-random", "gw-stream-bare", None),
        ("local/tiny-random", "gw-stream-include-false", False),
        ("local/tiny-random", "gw-stream-include-usage", True),
    ):
        s = stream(gw, model, tag, include_usage=inc)
        ok = s["status"] == 200
        check(f"{tag}_200", ok, s.get("error"))
        if not ok:
            continue
        check(f"{tag}_sse_wire_format", "text/event-stream" in s["content_type"] and s["done_last"] and s["all_chunk_objects"] and s["finish_reasons"],
              {k: s[k] for k in ("content_type", "done_last", "all_chunk_objects", "finish_reasons")})
        check(f"{tag}_streamed_text_same_as_direct", s["text"] == ref_text, {"stream": s["text"], "direct": ref_text})
        if inc:
            got = s["usage_chunks"][-1]["usage"] if s["usage_chunks"] else None
            check(f"{tag}_client_got_usage_chunk", got == ref.get("usage") and s["empty_choice_chunks"] == 1, {"usage": got, "expected": ref.get("usage")})
        else:
            check(f"{tag}_no_usage_chunk_for_client", not s["usage_chunks"] and s["empty_choice_chunks"] == 0,
                  {"usage_chunks": s["usage_chunks"], "empty_choice_chunks": s["empty_choice_chunks"]})
        samples[f"{tag}_chunks"] = s["chunks"]

    # -- the server itself: a direct stream without include_usage carries no usage either (the wire format)
    s = stream(direct, "tiny-random", "direct-stream")
    check("direct_stream_no_usage_unasked", s["status"] == 200 and not s["usage_chunks"] and s["done_last"] and s["text"] == ref_text, s)

    # -- latency: N sequential non-streaming calls each, interleaved so drift hits both alike
    lat = {"direct": [], "gateway": []}
    bench_ok = True
    for i in range(args.bench):
        for name, client in (("direct", direct), ("gateway", gw)):
            r, ms = nonstream(client, "tiny-random" if client is direct else "local/tiny-random", f"{'gw' if client is gw else 'direct'}-bench-{i}",
                              max_tokens=args.bench_max_tokens)
            bench_ok &= r.status_code == 200
            lat[name].append(ms)
    check("bench_all_200", bench_ok)
    latency = {}
    for name, xs in lat.items():
        if xs:
            latency[name] = {"n": len(xs), "p50_ms": round(pct(xs, 0.5), 3), "p90_ms": round(pct(xs, 0.9), 3),
                             "mean_ms": round(statistics.mean(xs), 3), "min_ms": round(min(xs), 3)}
    if lat["direct"] and lat["gateway"]:
        latency["added_p50_ms"] = round(latency["gateway"]["p50_ms"] - latency["direct"]["p50_ms"], 3)
        latency["added_p50_of_pairs_ms"] = round(statistics.median(g - d for g, d in zip(lat["gateway"], lat["direct"])), 3)
        latency["max_tokens"] = args.bench_max_tokens

    # -- metering: calls.jsonl against the server's own log (streams are recorded when they end: wait a little)
    def read_jsonl(path):
        try:
            with open(path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    deadline = time.time() + 10
    calls = read_jsonl(args.calls)
    while len(calls) < len(gw_tags) and time.time() < deadline:
        time.sleep(0.2)
        calls = read_jsonl(args.calls)
    server = [e for e in read_jsonl(args.server_log) if str(e.get("tag", "")).startswith("gw-")]
    check("calls_jsonl_one_record_per_gateway_call", len(calls) == len(gw_tags), {"records": len(calls), "gateway_calls": len(gw_tags)})
    check("server_saw_every_gateway_call", [e["tag"] for e in server] == gw_tags, {"server": [e["tag"] for e in server][:10], "sent": gw_tags[:10]})
    mismatches = []
    for i, (c, e) in enumerate(zip(calls, server)):
        u = c.get("usage") or {}
        want = {"input_tokens": e["prompt_tokens"], "output_tokens": e["completion_tokens"], "cached_read_tokens": 0, "cache_write_tokens": 0}
        got = {k: u.get(k) for k in want}
        problems = []
        if c.get("status") != 200:
            problems.append(f"status {c.get('status')}")
        if got != want:
            problems.append(f"usage {got} != server {want}")
        if c.get("cost_usd", "absent") is not None:
            problems.append(f"cost_usd {c.get('cost_usd')!r} (want null)")
        if c.get("model") != "local/tiny-random" or c.get("upstream") != "local":
            problems.append(f"model {c.get('model')} upstream {c.get('upstream')}")
        if c.get("stream") != e["stream"]:
            problems.append(f"stream {c.get('stream')} != {e['stream']}")
        if c.get("error"):
            problems.append(f"error {c.get('error')}")
        if problems:
            mismatches.append({"i": i, "tag": e["tag"], "problems": problems})
    check("metered_usage_equals_server_counts_and_cost_null", not mismatches and calls, mismatches[:5])
    check("upstream_got_configured_key_not_gateway_key", server and all(e.get("authorization") == "Bearer none" for e in server),
          sorted({str(e.get("authorization"))[:16] for e in server}))
    samples["first_call_record"] = calls[0] if calls else None
    samples["streams_server_asked_usage"] = sum(1 for e in server if e["stream"] and e["include_usage"])

    # -- GPU: the server's own view, and nvidia-smi's
    gpu = {}
    try:
        gpu["server_stats"] = httpx.get(args.direct.rstrip("/").rsplit("/v1", 1)[0] + "/debug/stats", timeout=10).json()
    except Exception as err:  # noqa: BLE001
        gpu["server_stats_error"] = str(err)
    for key, cmd in (
        ("gpus", ["nvidia-smi", "--query-gpu=name,memory.total,memory.used,driver_version", "--format=csv,noheader"]),
        ("compute_apps", ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]),
    ):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            gpu[key] = p.stdout.strip().splitlines() if p.returncode == 0 else f"rc {p.returncode}: {p.stderr.strip()[:200]}"
        except Exception as err:  # noqa: BLE001
            gpu[key] = f"unavailable: {err}"

    summary = {
        "ok": not failures,
        "checks_passed": sum(checks.values()),
        "checks_total": len(checks),
        "failures": failures,
        "checks": checks,
        "latency": latency,
        "gateway_calls_metered": len(calls),
        "gpu": gpu,
        "samples": samples,
    }
    print(json.dumps(summary))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
