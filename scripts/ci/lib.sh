# Shared steps for .ci/run and scripts/setup.sh. Source it; every function is idempotent so reruns are fast.
# shellcheck shell=bash

# Repository root, whatever directory the caller started in.
EVOLVE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export EVOLVE_ROOT

_STEP_NAMES=()
_STEP_SECS=()
_STEPS_T0=$SECONDS
_CURRENT_STEP=""
# Runs one named step and prints how long it took, so slow steps show up in CI logs.
step() {
  local name="$1"; shift
  local t0=$SECONDS
  _CURRENT_STEP="$name"
  echo "==> ${name}"
  "$@"
  _CURRENT_STEP=""
  _STEP_NAMES+=("$name")
  _STEP_SECS+=("$((SECONDS - t0))")
  echo "<== ${name} ($((SECONDS - t0)) s)"
}

# Prints every finished step's time and the total, and which step failed if one did.
_step_summary() {
  local rc=$? i
  echo "---- timings ----"
  for i in "${!_STEP_NAMES[@]}"; do printf '%6s s  %s\n' "${_STEP_SECS[$i]}" "${_STEP_NAMES[$i]}"; done
  printf '%6s s  total\n' "$((SECONDS - _STEPS_T0))"
  if [ "$rc" -ne 0 ]; then echo "FAILED (exit $rc) in step: ${_CURRENT_STEP:-?}"; fi
}

# Call once at the top of a script made of steps: the summary then prints on success and on failure alike.
summary_on_exit() {
  trap _step_summary EXIT
}

# True when we may install system packages (root, or sudo without a password).
_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

# Installs Debian packages that are not installed yet. `apt-get update` runs at most once an hour (a stamp file
# records it; apt's own list files keep the archive's dates), so the scripts that call this in turn update once.
apt_ensure() {
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local stamp=/tmp/.evolve-apt-updated
  if [ -z "$(find "$stamp" -mmin -60 2>/dev/null)" ]; then
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    touch "$stamp"
  fi
  echo "installing: ${missing[*]}"
  _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# npm ci brings the pinned toolchain (bun, deno, vitest, tsc) with the runtime deps.
npm_deps() {
  # playwright-core (the dashboard's browser tests) drives Debian's chromium (see browser): never a downloaded one
  (cd "$EVOLVE_ROOT" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
}

# Podman with runc and the containers.conf drop-in this machine needs (see reference/toolchain.md).
container_engine() {
  bash "$EVOLVE_ROOT/scripts/ci/podman.sh"
}

# Docker for the test suite's Docker leg: dockerd on its own socket with the base images loaded (~27 s on a fresh
# host, mostly the docker.io download; a second run reuses the daemon). Exports nothing: callers set DOCKER_HOST.
docker_engine() {
  bash "$EVOLVE_ROOT/scripts/ci/docker.sh"
}

# Locally built base images under the names task Dockerfiles use; no registry is reachable.
base_images() {
  bash "$EVOLVE_ROOT/scripts/ci/base-images.sh"
}

# Debian's chromium for the dashboard's browser tests (tests/dashboard-browser.engine.test.ts drives it with playwright-core,
# which downloads no browser). apt_ensure skips it once installed.
browser() {
  apt_ensure chromium
}

# Debian's Slurm and munge for the Slurm executor's tests (issue 24 §2): tests/slurm.engine.test.ts starts a
# three-node cluster on this host with scripts/slurm/up.sh and stops it with down.sh. apt_ensure skips them once installed.
slurm_packages() {
  apt_ensure slurmctld slurmd slurm-client munge
}

# The single binary at dist/evolve.
build_binary() {
  (cd "$EVOLVE_ROOT" && npm run --silent build)
}

# Vendors every installed agent CLI this build has (`evolve agent list --json`: kind cli, available) into
# $EVOLVE_AGENTS_DIR (default $EVOLVE_HOME/agents), so trials mount them and no box runs `npm install`. A version
# already vendored there is skipped in well under a second; each pull's time is printed.
vendored_agents() {
  local evolve=("$EVOLVE_ROOT/node_modules/.bin/bun" "$EVOLVE_ROOT/main.ts")
  local names n t0
  names="$("${evolve[@]}" agent list --json | node -e '
    let s = ""; process.stdin.on("data", (c) => (s += c)).on("end", () => {
      for (const a of JSON.parse(s).agents) if (a.kind === "cli" && a.available) console.log(a.name);
    });')"
  for n in $names; do
    t0=$SECONDS
    "${evolve[@]}" agent pull "$n"
    echo "    agent pull $n: $((SECONDS - t0)) s"
  done
}

# The README's example: validate every fixture task, publish the runnable example dataset, and run a real job of
# the oracle agent on it in podman (each task's reference solution, verified in its container).
example() {
  local tasks=("$EVOLVE_ROOT"/fixtures/tasks/valid/*/)
  (cd "$EVOLVE_ROOT" && dist/evolve task validate "${tasks[@]}" >/dev/null && echo "validated ${#tasks[@]} fixture tasks")
  # fixtures/datasets/example links to fixture tasks; a dataset holds its task folders themselves (a linked entry is
  # refused as task_symlink), so the example publishes a copy with the links resolved
  local ds
  ds="$(mktemp -d)/example"
  cp -rL "$EVOLVE_ROOT/fixtures/datasets/example" "$ds"
  (cd "$EVOLVE_ROOT" && dist/evolve dataset publish "$ds" --name example --version 1.0)
  rm -rf "$(dirname "$ds")"
  (cd "$EVOLVE_ROOT" && dist/evolve run -d example@1.0 -a oracle)
}
