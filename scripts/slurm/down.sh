#!/usr/bin/env bash
# Stops what scripts/slurm/up.sh started, by the pids it recorded (never by name: another cluster or engineer's
# daemons on this host are not ours), and leaves $SLURM_DIR for its logs. `--purge` removes $SLURM_DIR too.
set -uo pipefail
SLURM_DIR="${SLURM_DIR:-/tmp/evolve-slurm}"
stop() {
  local f="$SLURM_DIR/pids/$1.pid" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}
for f in "$SLURM_DIR"/pids/slurmd-*.pid; do [ -e "$f" ] && stop "$(basename "$f" .pid)"; done
stop slurmctld
stop munged
[ "${1:-}" = "--purge" ] && rm -rf "$SLURM_DIR"
echo "slurm down"
