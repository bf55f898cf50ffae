#!/usr/bin/env bash
# Smoke tests of what a user runs: dist/evolve from a directory with no repository or node_modules near it, on
# copies of the valid fixture tasks, and the same validation from source under Deno. Exits non-zero on the first
# failure, printing the command and its output.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin="$EVOLVE_ROOT/dist/evolve"
[ -x "$bin" ] || { echo "error[binary_missing]: $bin not built"; echo "hint: npm run build"; exit 2; }

scratch="$(mktemp -d "${TMPDIR:-/tmp}/evolve-smoke.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
cp "$bin" "$scratch/evolve"
mkdir -p "$scratch/tasks"
shopt -s nullglob
tasks=("$EVOLVE_ROOT"/fixtures/tasks/valid/*/)
shopt -u nullglob
for t in "${tasks[@]}"; do cp -r "$t" "$scratch/tasks/"; done
export EVOLVE_HOME="$scratch/home" NO_COLOR=1

# Runs a command, shows it, and fails loudly with its output if the exit code is not the one expected.
expect() {
  local want="$1"; shift
  local out rc=0
  out="$("$@" 2>&1)" || rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL (exit $rc, want $want): $*"
    printf '%s\n' "$out" | tail -n 40
    exit 1
  fi
  local cmd="$*"
  [ ${#cmd} -le 120 ] || cmd="${cmd:0:117}..."
  echo "ok (exit $rc): $cmd"
}

cd "$scratch"
expect 0 ./evolve --version
expect 0 ./evolve --help
expect 0 ./evolve dataset list --json
if [ ${#tasks[@]} -eq 0 ]; then
  echo "no fixtures under fixtures/tasks/valid: skipping task validate"
else
  expect 0 ./evolve task validate tasks/*
  cd "$EVOLVE_ROOT"
  expect 0 node_modules/.bin/deno run -A --node-modules-dir=manual main.ts task validate fixtures/tasks/valid/*
fi
