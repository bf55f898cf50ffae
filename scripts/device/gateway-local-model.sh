#!/usr/bin/env bash
# Device check: the evolve binary's gateway fronts a model served on the GPU box (an OpenAI-compatible server on
# 127.0.0.1:8000, as vLLM / llama.cpp / Ollama would be). Run from the repo root:
#
#   bash scripts/device/gateway-local-model.sh
#
# It uses .device/evolve.xz (made here by `npm run build && xz -T2 -6 -c dist/evolve > .device/evolve.xz`, carried
# to the device), else $EVOLVE_BIN, else dist/evolve. Env: OUT (where summary.json and logs go; a temp dir if unset),
# PYTHON (default python3; needs torch + transformers unless SERVER_ARGS=--fake, and httpx), SERVER_ARGS, BENCH (50).
# Prints one JSON summary on stdout (also $OUT/summary.json); exits non-zero when a check fails.
set -uo pipefail

ROOT=$(pwd)
OUT=${OUT:-$(mktemp -d)}
PYTHON=${PYTHON:-python3}
SERVER_ARGS=${SERVER_ARGS:-}
BENCH=${BENCH:-50}
SERVER_PORT=${SERVER_PORT:-8000}
GATEWAY_PORT=${GATEWAY_PORT:-4000}
WORK=$(mktemp -d)
mkdir -p "$OUT"
SERVER_PID= GATEWAY_PID=

cleanup() {
  [ -n "$GATEWAY_PID" ] && kill "$GATEWAY_PID" 2>/dev/null
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# A failure before the checks run still prints a summary.
fail() {
  local stage=$1 detail=$2
  "$PYTHON" - "$stage" "$detail" "$OUT/summary.json" <<'EOF'
import json, sys
s = {"ok": False, "failed_stage": sys.argv[1], "detail": sys.argv[2][-3000:]}
open(sys.argv[3], "w").write(json.dumps(s, indent=1) + "\n")
print(json.dumps(s))
EOF
  exit 2
}

# -- the binary
T0=$(date +%s.%N)
if [ -f .device/evolve.xz ]; then
  "$PYTHON" -c "import lzma,shutil,sys;shutil.copyfileobj(lzma.open(sys.argv[1]),open(sys.argv[2],'wb'))" .device/evolve.xz "$WORK/evolve" \
    || fail decompress "could not decompress .device/evolve.xz"
  BIN=$WORK/evolve
else
  BIN=${EVOLVE_BIN:-$ROOT/dist/evolve}
fi
chmod +x "$BIN" 2>/dev/null
DECOMPRESS_S=$("$PYTHON" -c "import time;print(round(time.time()-$T0,3))")
if ! VERSION=$("$BIN" --version 2>"$WORK/version.err"); then
  fail binary "evolve --version failed (glibc or arch?): $(cat "$WORK/version.err"; ldd "$BIN" 2>&1 | head -5; ldd --version 2>&1 | head -1; uname -m)"
fi

# -- the GPU as found, before the server takes any of it
(nvidia-smi || echo "nvidia-smi unavailable") >"$OUT/nvidia-smi-before.txt" 2>&1

# -- the model server
"$PYTHON" scripts/device/local-model-server.py --port "$SERVER_PORT" --log "$WORK/server-calls.jsonl" $SERVER_ARGS \
  >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 600); do
  grep -q '"ready"' "$OUT/server.log" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail server "model server exited: $(tail -c 3000 "$OUT/server.log")"
  sleep 0.2
done
grep -q '"ready"' "$OUT/server.log" || fail server "model server not ready after 120 s: $(tail -c 3000 "$OUT/server.log")"

# -- the gateway, in a home of its own, with only the local upstream
export EVOLVE_HOME=$WORK/home
mkdir -p "$EVOLVE_HOME"
cat >"$EVOLVE_HOME/gateway.toml" <<EOF
[upstreams.local]
kind = "openai-compatible"
base_url = "http://127.0.0.1:$SERVER_PORT/v1"
api_key = "none"
models = ["tiny-random"]
EOF
env -u OPENAI_API_KEY -u OPENAI_BASE_URL -u OPENAI_API_BASE -u ANTHROPIC_API_KEY -u ANTHROPIC_BASE_URL -u ANTHROPIC_API_BASE \
  NO_COLOR=1 "$BIN" gateway serve --port "$GATEWAY_PORT" >"$OUT/gateway.log" 2>&1 &
GATEWAY_PID=$!
KEY=
for _ in $(seq 1 300); do
  KEY=$(sed -n 's/^export OPENAI_API_KEY=//p' "$OUT/gateway.log" | head -1)
  [ -n "$KEY" ] && break
  kill -0 "$GATEWAY_PID" 2>/dev/null || fail gateway "gateway exited: $(tail -c 3000 "$OUT/gateway.log")"
  sleep 0.1
done
[ -n "$KEY" ] || fail gateway "no export OPENAI_API_KEY line after 30 s: $(tail -c 3000 "$OUT/gateway.log")"

# -- the checks and the timings
PYTHONUNBUFFERED=1 "$PYTHON" scripts/device/check-gateway-local-model.py \
  --gateway "http://127.0.0.1:$GATEWAY_PORT" --direct "http://127.0.0.1:$SERVER_PORT/v1" --key "$KEY" \
  --calls "$EVOLVE_HOME/gateway/calls.jsonl" --server-log "$WORK/server-calls.jsonl" --bench "$BENCH" \
  >"$WORK/check.json" 2>"$OUT/check.err"
RC=$?
[ -s "$WORK/check.json" ] || fail checks "check script printed nothing (rc $RC): $(tail -c 3000 "$OUT/check.err")"
cp "$EVOLVE_HOME/gateway/calls.jsonl" "$OUT/calls.jsonl" 2>/dev/null
(nvidia-smi || echo "nvidia-smi unavailable") >"$OUT/nvidia-smi-after.txt" 2>&1

# -- one summary: the checks' JSON plus the run's context (secrets never printed: the key is not in it)
"$PYTHON" - "$WORK/check.json" "$OUT/summary.json" "$VERSION" "$DECOMPRESS_S" "$RC" <<'EOF'
import json, platform, sys
s = json.load(open(sys.argv[1]))
s = {"ok": s["ok"] and sys.argv[5] == "0", "check_rc": int(sys.argv[5]), "evolve_version": sys.argv[3],
     "decompress_s": float(sys.argv[4]) if sys.argv[4] not in ("", "null") else None,
     "host": {"machine": platform.machine(), "python": platform.python_version(), "libc": "-".join(platform.libc_ver())},
     **{k: v for k, v in s.items() if k != "ok"}}
open(sys.argv[2], "w").write(json.dumps(s, indent=1) + "\n")
print(json.dumps(s))
EOF
[ "$RC" = 0 ] || exit 1
