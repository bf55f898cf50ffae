#!/usr/bin/env bash
# A three-node Slurm on this one machine (issue 24 §2), for the Slurm tests and the bench: a munge daemon with its
# own key, one slurmctld and three slurmd (n1..n3, all 127.0.0.1 on their own ports, one CPU each), every daemon
# started in the foreground in the background and remembered by pid. Everything lives under $SLURM_DIR (default
# /tmp/evolve-slurm); `export SLURM_CONF=$SLURM_DIR/slurm.conf` points the client commands at it. Idempotent: a
# cluster already up (its pids alive) is left as it is. Needs root and Debian's slurmctld slurmd slurm-client munge.
# The configuration is the one results-out.md §Scale-out records as working with slurm 22.05 on Debian 12.
set -euo pipefail
SLURM_DIR="${SLURM_DIR:-/tmp/evolve-slurm}"
NODES="${SLURM_NODES:-3}"
CTLD_PORT="${SLURM_CTLD_PORT:-16817}"
NODE_PORT0="${SLURM_NODE_PORT0:-17000}"
mkdir -p "$SLURM_DIR"/{state,spool,log,pids}
export SLURM_CONF="$SLURM_DIR/slurm.conf"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

for b in munged slurmctld slurmd sinfo; do
  command -v "$b" >/dev/null || { echo "up.sh: $b is missing: apt-get install slurmctld slurmd slurm-client munge" >&2; exit 2; }
done

# munge: its own key and socket, so a host's munge (if any) is neither used nor disturbed
# the key folder is munge's alone; the socket's folder must be searchable by every user (munged checks)
MUNGE_SOCKET="$SLURM_DIR/munge-run/munge.socket"
if ! alive "$SLURM_DIR/pids/munged.pid"; then
  mkdir -p "$SLURM_DIR/munge" "$SLURM_DIR/munge-run"
  [ -f "$SLURM_DIR/munge/munge.key" ] || dd if=/dev/urandom of="$SLURM_DIR/munge/munge.key" bs=1024 count=1 status=none
  chown -R munge:munge "$SLURM_DIR/munge" "$SLURM_DIR/munge-run"
  chmod 700 "$SLURM_DIR/munge"
  chmod 755 "$SLURM_DIR/munge-run"
  chmod 400 "$SLURM_DIR/munge/munge.key"
  rm -f "$MUNGE_SOCKET"
  setsid runuser -u munge -- munged -F --key-file="$SLURM_DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$SLURM_DIR/munge-run/munged.pid" --log-file="$SLURM_DIR/munge/munged.log" --seed-file="$SLURM_DIR/munge/munged.seed" \
    </dev/null >>"$SLURM_DIR/log/munged.out" 2>&1 &
  echo $! >"$SLURM_DIR/pids/munged.pid"
  for _ in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && break; sleep 0.1; done
  [ -S "$MUNGE_SOCKET" ] || { echo "up.sh: munged did not start (see $SLURM_DIR/munge/munged.log)" >&2; exit 1; }
fi

host="$(hostname)"
{
  echo "ClusterName=evolve"
  echo "SlurmctldHost=localhost"
  echo "SlurmctldPort=$CTLD_PORT"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$MUNGE_SOCKET"
  echo "CredType=cred/munge"
  echo "StateSaveLocation=$SLURM_DIR/state"
  echo "SlurmdSpoolDir=$SLURM_DIR/spool/%n"
  echo "SlurmctldPidFile=$SLURM_DIR/slurmctld.pid"
  echo "SlurmdPidFile=$SLURM_DIR/slurmd-%n.pid"
  echo "SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log"
  echo "SlurmdLogFile=$SLURM_DIR/log/slurmd-%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  echo "ReturnToService=2"
  echo "MpiDefault=none"
  # a lost node is noticed in seconds, not the default five minutes (the node-loss test kills one)
  echo "SlurmdTimeout=10"
  echo "KillWait=5"
  echo "MinJobAge=30"
  # a worker killed outright leaves its trial's boxes: the epilog removes what it made in the job that ended
  echo "Epilog=$(cd "$(dirname "$0")" && pwd)/epilog.sh"
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=n$i NodeAddr=127.0.0.1 NodeHostname=$host Port=$((NODE_PORT0 + i)) CPUs=1 RealMemory=1000"
  done
  echo "PartitionName=debug Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
} >"$SLURM_CONF.new"
mv "$SLURM_CONF.new" "$SLURM_CONF"

if ! alive "$SLURM_DIR/pids/slurmctld.pid"; then
  setsid slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$SLURM_DIR/log/slurmctld.out" 2>&1 &
  echo $! >"$SLURM_DIR/pids/slurmctld.pid"
fi
for i in $(seq 1 "$NODES"); do
  mkdir -p "$SLURM_DIR/spool/n$i"
  if ! alive "$SLURM_DIR/pids/slurmd-n$i.pid"; then
    setsid slurmd -D -N "n$i" -f "$SLURM_CONF" </dev/null >>"$SLURM_DIR/log/slurmd-n$i.out" 2>&1 &
    echo $! >"$SLURM_DIR/pids/slurmd-n$i.pid"
  fi
done

# up when every node is idle (or busy with a job): the controller answers and has heard from each slurmd
for _ in $(seq 150); do
  up="$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -Ec ' (idle|mix|alloc)' || true)"
  [ "$up" -ge "$NODES" ] && { echo "slurm up: $NODES nodes, SLURM_CONF=$SLURM_CONF"; exit 0; }
  sleep 0.2
done
echo "up.sh: the nodes did not come up within 30 s:" >&2
sinfo -N >&2 || true
tail -n 20 "$SLURM_DIR/log/slurmctld.log" >&2 || true
exit 1
