#!/bin/sh
# Slurm epilog (issue 24 §1): runs on the node as root when each job ends, however it ended. An `evolve worker`
# killed outright (SIGKILL, OOM) runs none of its own cleanup, and its trial's boxes live on under the engine's
# conmon: every container and network an evolve worker made in this job carries the label
# dev.evolve.worker-job=$SLURM_JOB_ID (engine/driver/types.ts LABEL_WORKER_JOB), and goes here. Always exits 0: a
# failing epilog drains the node. Wired by up.sh (`Epilog=`); a real cluster adds it to its own slurm.conf.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
label="dev.evolve.worker-job=$SLURM_JOB_ID"
# podman's rm -f waits out each box's stop timeout (its `sleep infinity` ignores SIGTERM): -t 0 kills at once, and
# the node stays COMPLETING (no new job) until the epilog ends
for engine in podman docker; do
  command -v "$engine" >/dev/null 2>&1 || continue
  now=""
  [ "$engine" = podman ] && now="-t 0"
  ids="$("$engine" ps -aq --filter "label=$label" 2>/dev/null)"
  [ -n "$ids" ] && "$engine" rm -f $now $ids >/dev/null 2>&1
  nets="$("$engine" network ls -q --filter "label=$label" 2>/dev/null)"
  [ -n "$nets" ] && "$engine" network rm -f $nets >/dev/null 2>&1
done
exit 0
