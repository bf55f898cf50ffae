#!/usr/bin/env bash
# One command to get a working evolve on Debian/Ubuntu: npm deps (bun, deno, vitest come with them), podman +
# runc with the containers.conf drop-in, the agent CLIs vendored from npm (evolve agent pull), local base images,
# dist/evolve, Debian's chromium (the dashboard's browser tests), Debian's Slurm and munge (the Slurm executor's
# tests start a cluster with scripts/slurm/up.sh); then runs the example. Needs root or password-less sudo for apt. Safe to rerun: finished steps are
# skipped or quick.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/ci/lib.sh
summary_on_exit

step "npm ci" npm_deps
step "vendored agents" vendored_agents
step "podman + runc" container_engine
step "base images" base_images
step "build dist/evolve" build_binary
step "chromium" browser
step "slurm" slurm_packages
step "example" example
