#!/usr/bin/env bash
# Installs podman + runc from Debian and writes the containers.conf drop-in that makes plain `podman run` and
# `podman build` work on these hosts: crun refuses their hybrid cgroups, and podman's default ulimits exceed what
# the machine allows (no CAP_SYS_RESOURCE). Idempotent.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# dnsname: with podman's CNI networks, containers find each other by name (compose sidecars, network aliases)
# only through this plugin.
apt_ensure podman runc golang-github-containernetworking-plugin-dnsname

conf_dir=/etc/containers/containers.conf.d
conf="$conf_dir/50-local.conf"
want='[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]
[engine]
runtime = "runc"'
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$want" ]; then
  _as_root mkdir -p "$conf_dir"
  printf '%s\n' "$want" | _as_root tee "$conf" >/dev/null
  echo "wrote $conf"
fi
podman --version
