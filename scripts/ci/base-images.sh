#!/usr/bin/env bash
# Builds the local base images that task Dockerfiles name, since no container registry is reachable:
#   debian:bookworm-slim, debian:bookworm  - debootstrap minbase of bookworm (+ git, python3, ca-certificates)
#   busybox:latest                         - busybox-static in an empty rootfs, for tests that need a box fast
# Each is tagged under its short name and its docker.io/library/ name, so `FROM debian:bookworm-slim` and
# `FROM docker.io/library/debian:bookworm-slim` both resolve locally. Images that already exist are kept, so
# reruns take a second. Set EVOLVE_REBUILD_IMAGES=1 to rebuild. Needs podman (scripts/ci/podman.sh) and root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The archive apt on this host already uses (deb822 or one-line sources), else debootstrap's own default.
host_mirror() {
  { grep -hm1 '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
    grep -hm1 '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } | grep -v security | head -n 1
}
MIRROR="${EVOLVE_DEBIAN_MIRROR:-$(host_mirror || true)}"
rebuild="${EVOLVE_REBUILD_IMAGES:-0}"

# Exists under every name given?
have_all() {
  local n
  [ "$rebuild" = 1 ] && return 1
  for n in "$@"; do podman image exists "$n" || return 1; done
}

# Tags image $1 under each further name.
tag_all() {
  local src="$1"; shift
  local n
  for n in "$@"; do podman tag "$src" "$n"; done
}

debian_names=(debian:bookworm-slim debian:bookworm docker.io/library/debian:bookworm-slim docker.io/library/debian:bookworm)
if have_all "${debian_names[@]}"; then
  echo "debian:bookworm-slim present"
else
  apt_ensure debootstrap
  work="$(mktemp -d /var/tmp/evolve-rootfs.XXXXXX)"
  trap 'rm -rf "$work"' EXIT
  t0=$SECONDS
  debootstrap --variant=minbase --include=git,python3,ca-certificates bookworm "$work/root" ${MIRROR:+"$MIRROR"} \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log"; exit 1; }
  # Leave apt pointed at the archive (tasks may apt-get install) but drop caches: they only make the image big.
  rm -rf "$work"/root/var/cache/apt/archives/*.deb "$work"/root/var/lib/apt/lists/* "$work"/root/var/log/*.log
  echo "debootstrap: $((SECONDS - t0)) s"
  tar -C "$work/root" --numeric-owner -cf - . \
    | podman import -q --change 'CMD ["/bin/bash"]' - debian:bookworm-slim >/dev/null
  tag_all debian:bookworm-slim "${debian_names[@]:1}"
  rm -rf "$work"; trap - EXIT
  echo "built debian:bookworm-slim ($((SECONDS - t0)) s)"
fi

busybox_names=(busybox:latest docker.io/library/busybox:latest)
if have_all "${busybox_names[@]}"; then
  echo "busybox:latest present"
else
  apt_ensure busybox-static
  work="$(mktemp -d /var/tmp/evolve-busybox.XXXXXX)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/root/bin" "$work/root/tmp" "$work/root/etc" "$work/root/root"
  chmod 1777 "$work/root/tmp"
  cp /bin/busybox "$work/root/bin/busybox"
  for app in $(/bin/busybox --list); do
    [ -e "$work/root/bin/$app" ] || ln -s busybox "$work/root/bin/$app"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$work/root/etc/passwd"
  printf 'root:x:0:\n' >"$work/root/etc/group"
  tar -C "$work/root" --numeric-owner -cf - . \
    | podman import -q --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' - busybox:latest >/dev/null
  tag_all busybox:latest "${busybox_names[@]:1}"
  rm -rf "$work"; trap - EXIT
  echo "built busybox:latest"
fi
