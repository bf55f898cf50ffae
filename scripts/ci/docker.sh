#!/usr/bin/env bash
# Docker for the engine tests' Docker leg: installs docker.io, starts dockerd by hand on its own socket (no systemd
# on these hosts; see reference/toolchain.md) and loads the local base images from podman into it (no registry is
# reachable). Idempotent: a daemon that already answers on the socket is reused, images already loaded are kept.
# Prints the line to export at the end:  export DOCKER_HOST=unix:///run/evolve-docker.sock
#
# The daemon is left running on purpose (the next run reuses it); `scripts/ci/docker.sh stop` ends it. A daemon
# that died leaves a pidfile and socket behind: both are cleared before a new one starts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SOCK="${EVOLVE_DOCKER_SOCK:-/run/evolve-docker.sock}"
DATA="${EVOLVE_DOCKER_DATA:-/var/lib/evolve-docker}"
EXEC_ROOT="${EVOLVE_DOCKER_EXEC:-/run/evolve-docker}"
PIDFILE="${EVOLVE_DOCKER_PID:-/run/evolve-docker.pid}"
LOG="${EVOLVE_DOCKER_LOG:-/var/log/evolve-dockerd.log}"
export DOCKER_HOST="unix://$SOCK"
# The images the tests and fixtures use; each must already exist in podman (scripts/ci/base-images.sh).
IMAGES=(debian:bookworm-slim busybox:latest)

answers() {
  # /_ping through the client: curl may be absent on a fresh host, the docker CLI is not.
  timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

pid_alive() {
  [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

stop() {
  if pid_alive; then
    local pid
    pid="$(cat "$PIDFILE")"
    _as_root kill "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "dockerd stopped"
  fi
}

start() {
  if answers; then
    echo "dockerd answers on $SOCK"
    return 0
  fi
  if pid_alive; then
    # Alive but not answering (still starting, or wedged): give it a moment, then replace it.
    for _ in $(seq 1 50); do answers && return 0; sleep 0.2; done
    stop
  fi
  _as_root rm -f "$PIDFILE" "$SOCK"
  _as_root mkdir -p "$DATA" "$EXEC_ROOT" "$(dirname "$LOG")"
  # setsid + nohup: the daemon outlives this script and the CI step, and no terminal signal reaches it.
  _as_root setsid nohup dockerd -H "unix://$SOCK" --data-root "$DATA" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" \
    >>"$LOG" 2>&1 </dev/null &
  for _ in $(seq 1 150); do
    if answers; then echo "dockerd started on $SOCK (log: $LOG)"; return 0; fi
    sleep 0.2
  done
  echo "dockerd did not answer on $SOCK within 30 s; last lines of $LOG:" >&2
  tail -n 20 "$LOG" >&2 || true
  return 1
}

load_images() {
  local img
  for img in "${IMAGES[@]}"; do
    if docker image inspect "$img" >/dev/null 2>&1; then continue; fi
    podman image exists "$img" || { echo "podman has no $img: run scripts/ci/base-images.sh first" >&2; return 1; }
    podman save "$img" | docker load >/dev/null
    # podman saves under its full name (docker.io/library/…): make sure the short name is there too.
    docker image inspect "$img" >/dev/null 2>&1 || docker tag "docker.io/library/$img" "$img"
    echo "loaded $img into docker"
  done
}

case "${1:-up}" in
  stop) stop ;;
  up)
    apt_ensure docker.io
    start
    load_images
    echo "export DOCKER_HOST=$DOCKER_HOST"
    ;;
  *) echo "usage: $0 [up|stop]" >&2; exit 2 ;;
esac
