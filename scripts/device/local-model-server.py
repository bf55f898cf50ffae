#!/usr/bin/env python3
"""A minimal OpenAI-compatible server for a GPU box's device check: what vLLM / llama.cpp / Ollama look like to
the evolve gateway, without any download.

    POST /v1/chat/completions   JSON, or `stream: true` SSE in OpenAI's wire format (`data: {chunk}\\n\\n` ...
                                `data: [DONE]\\n\\n`; with `stream_options.include_usage` every chunk carries
                                `usage: null` and a last chunk has `choices: []` and the usage)
    GET  /v1/models             the one served model
    GET  /debug/stats           device, parameter count, GPU memory (not part of OpenAI's API)

The model is a small Llama built from a `LlamaConfig` with RANDOM weights (no files needed), on cuda when there is
one, else cpu. The tokenizer is byte-level (token id = byte + 3; 0 pad, 1 bos, 2 eos), so usage counts are exact:
prompt_tokens = 1 + bytes of the rendered chat prompt, completion_tokens = tokens generated. Generation is limited
to printable ASCII (one token = one character), greedy when temperature is 0, else sampled.

`--fake` replaces the model with a deterministic generator that needs no torch (for testing where torch is absent).
`--log FILE` appends one JSON line per answered completion (tag = the request's `user`, counts, text, the
Authorization header it was sent), so a check can compare what a proxy metered with what the server counted.
Python stdlib only (plus torch + transformers unless --fake).
"""
import argparse
import hashlib
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAD, BOS, EOS, OFFSET = 0, 1, 2, 3
VOCAB = 256 + OFFSET
PRINTABLE = list(range(32 + OFFSET, 127 + OFFSET))  # ' ' .. '~'


def encode(text):
    return [b + OFFSET for b in text.encode("utf-8")]


def decode(ids):
    return bytes(i - OFFSET for i in ids if i >= OFFSET).decode("utf-8", errors="replace")


def render_prompt(messages):
    """A fixed chat template: one `<|role|>` header per message, then the assistant's header."""
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"<|{m.get('role', 'user')}|>\n{content or ''}\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


class FakeModel:
    """Deterministic stand-in: printable characters from a hash of the prompt (and the seed when sampling)."""

    info = {"backend": "fake", "device": "cpu"}

    def generate(self, prompt_ids, max_tokens, temperature, seed):
        h = hashlib.sha256(bytes(str(prompt_ids) + (f"|{seed}|{temperature}" if temperature > 0 else ""), "utf-8")).digest()
        for i in range(max_tokens):
            if i and i % len(h) == 0:
                h = hashlib.sha256(h).digest()
            yield PRINTABLE[h[i % len(h)] % len(PRINTABLE)]


class TinyLlama:
    """A random-weight Llama (hidden 256, 4 layers) with a manual KV-cached decode loop, so tokens stream as made."""

    def __init__(self, seed, max_context):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(seed)
        cfg = LlamaConfig(
            vocab_size=VOCAB, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=4, max_position_embeddings=max_context, pad_token_id=PAD, bos_token_id=BOS,
            eos_token_id=EOS, tie_word_embeddings=False,
        )
        t0 = time.time()
        self.model = LlamaForCausalLM(cfg).to(self.device).eval()
        self.max_context = max_context
        mask = torch.full((VOCAB,), float("-inf"), device=self.device)
        mask[PRINTABLE] = 0.0
        mask[EOS] = 0.0
        self.mask = mask
        self.cached_decode = True
        self.info = {
            "backend": "transformers",
            "device": self.device,
            "gpu": torch.cuda.get_device_name(0) if self.device == "cuda" else None,
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "params": sum(p.numel() for p in self.model.parameters()),
            "dtype": str(next(self.model.parameters()).dtype),
            "load_s": round(time.time() - t0, 3),
            "decode": "kv-cache",
        }

    def generate(self, prompt_ids, max_tokens, temperature, seed):
        torch = self.torch
        keep = self.max_context - max_tokens
        ids = prompt_ids[-keep:] if keep > 0 else prompt_ids[-1:]
        gen = None
        if temperature > 0:
            gen = torch.Generator(device=self.device)
            gen.manual_seed(seed if seed is not None else int(time.time_ns() % (2**63)))
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([ids], device=self.device), use_cache=True)
            for _ in range(max_tokens):
                logits = out.logits[0, -1, :].float() + self.mask
                if temperature > 0:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    nxt = int(torch.multinomial(probs, 1, generator=gen).item())
                else:
                    nxt = int(torch.argmax(logits).item())
                yield nxt
                if nxt == EOS:
                    return
                ids = ids + [nxt]
                if self.cached_decode:
                    try:
                        out = self.model(
                            input_ids=torch.tensor([[nxt]], device=self.device), past_key_values=out.past_key_values, use_cache=True
                        )
                        continue
                    except Exception as err:  # noqa: BLE001 - a transformers API change: recompute instead
                        self.cached_decode = False
                        self.info["decode"] = f"full recompute ({type(err).__name__}: {str(err)[:200]})"
                out = self.model(input_ids=torch.tensor([ids], device=self.device), use_cache=False)

    def stats(self):
        torch = self.torch
        s = dict(self.info)
        if self.device == "cuda":
            s["cuda_memory_allocated_mib"] = round(torch.cuda.memory_allocated() / 2**20, 2)
            s["cuda_max_memory_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 2)
            s["cuda_memory_reserved_mib"] = round(torch.cuda.memory_reserved() / 2**20, 2)
        return s


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_handler(model, served, log_path):
    lock = threading.Lock()  # one generation at a time: the model and its cache are not shared across threads
    log_lock = threading.Lock()
    names = {served, f"local/{served}"}

    def log(entry):
        if not log_path:
            return
        with log_lock, open(log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive; SSE goes out chunked
        disable_nagle_algorithm = True  # TCP_NODELAY: headers and body are separate writes

        def log_message(self, fmt, *args):  # quiet: one line per request would swamp a benchmark
            pass

        def send_json(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, status, message, code=None):
            self.send_json(status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}})

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                self.send_json(200, {"object": "list", "data": [{"id": served, "object": "model", "created": 0, "owned_by": "local"}]})
            elif self.path == "/debug/stats":
                self.send_json(200, model.stats() if hasattr(model, "stats") else dict(model.info))
            else:
                self.error(404, f"no route GET {self.path}")

        def do_POST(self):
            if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                return self.error(404, f"no route POST {self.path}")
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                req = json.loads(raw)
                assert isinstance(req, dict) and isinstance(req.get("messages"), list)
            except Exception:
                return self.error(400, "body must be JSON with a messages array")
            name = req.get("model")
            if name not in names:
                return self.error(404, f"The model `{name}` does not exist.", "model_not_found")
            max_tokens = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
            max_tokens = max(1, min(max_tokens, 512))
            temperature = float(req.get("temperature", 1.0) if req.get("temperature") is not None else 1.0)
            seed = req.get("seed")
            prompt_ids = [BOS] + encode(render_prompt(req["messages"]))
            stream = req.get("stream") is True
            include_usage = stream and bool((req.get("stream_options") or {}).get("include_usage"))
            cid = "chatcmpl-" + uuid.uuid4().hex[:24]
            created = int(time.time())
            t0 = time.perf_counter()
            with lock:
                if stream:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream; charset=utf-8")
                    self.send_header("cache-control", "no-cache")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()

                    def send(obj):
                        data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))) + "\n\n").encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()

                    def chunk(delta, finish=None):
                        c = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                             "system_fingerprint": None,
                             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
                        if include_usage:
                            c["usage"] = None
                        return c

                    send(chunk({"role": "assistant", "content": ""}))
                    toks = []
                    for t in model.generate(prompt_ids, max_tokens, temperature, seed):
                        if t == EOS:
                            break
                        toks.append(t)
                        send(chunk({"content": decode([t])}))
                    n_out = len(toks) + (1 if len(toks) < max_tokens else 0)  # an EOS counts as generated
                    finish = "stop" if len(toks) < max_tokens else "length"
                    send(chunk({}, finish))
                    usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": n_out, "total_tokens": len(prompt_ids) + n_out}
                    if include_usage:
                        send({"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                              "system_fingerprint": None, "choices": [], "usage": usage})
                    send("[DONE]")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                else:
                    toks = []
                    for t in model.generate(prompt_ids, max_tokens, temperature, seed):
                        if t == EOS:
                            break
                        toks.append(t)
                    n_out = len(toks) + (1 if len(toks) < max_tokens else 0)
                    finish = "stop" if len(toks) < max_tokens else "length"
                    usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": n_out, "total_tokens": len(prompt_ids) + n_out}
                    self.send_json(200, {
                        "id": cid, "object": "chat.completion", "created": created, "model": name,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": decode(toks), "refusal": None},
                                     "logprobs": None, "finish_reason": finish}],
                        "usage": usage, "system_fingerprint": None,
                    })
            log({"tag": req.get("user"), "model": name, "stream": stream, "include_usage": include_usage,
                 "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                 "text": decode(toks), "finish_reason": finish, "authorization": self.headers.get("authorization"),
                 "gen_ms": round((time.perf_counter() - t0) * 1000, 3)})

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--served-name", default="tiny-random")
    ap.add_argument("--seed", type=int, default=0, help="weight init seed")
    ap.add_argument("--max-context", type=int, default=2048)
    ap.add_argument("--log", help="append one JSON line per answered completion")
    ap.add_argument("--fake", action="store_true", help="no torch: a deterministic stand-in generator")
    args = ap.parse_args()
    model = FakeModel() if args.fake else TinyLlama(args.seed, args.max_context)
    if not args.fake:  # warm up (cuda context, kernels) before saying ready
        list(model.generate([BOS] + encode("warm up"), 4, 0.0, None))
    srv = Server((args.host, args.port), make_handler(model, args.served_name, args.log))
    print(json.dumps({"ready": f"http://{args.host}:{args.port}/v1", "model": args.served_name, **model.info}), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
