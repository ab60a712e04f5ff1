#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the real-daemon tests need,
# starts the local SLURM testbed, runs every Go test with the race detector, and
# stops what it started. Usage: bash scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
export GRIDSUB_WORKLOADS="${GRIDSUB_WORKLOADS:-$(cd .. && pwd)/shared/workloads}"
# GRIDSUB_NO_SLURM=1 skips the real-daemon tests (they then say why they skip).
started_testbed=0
if [ "${GRIDSUB_NO_SLURM:-0}" != 1 ]; then
  # A testbed that is already up is used as it is and left running. Otherwise
  # this run starts one from a clean state (no jobs or reservations left over
  # from an earlier run that died) and stops it at the end.
  if ! bash scripts/slurm-testbed.sh status >/dev/null 2>&1; then
    started_testbed=1
    bash scripts/slurm-testbed.sh clean >/dev/null 2>&1 || true
  fi
  bash scripts/slurm-testbed.sh start
  # shellcheck disable=SC1091
  source "${GRIDSUB_TESTBED_DIR:-/var/tmp/gridsub-local-testbed}/testbed.env"
fi
cleanup() { if [ "$started_testbed" = 1 ]; then bash scripts/slurm-testbed.sh stop || true; fi; }
trap cleanup EXIT
go vet ./...
go test -race -count=1 -timeout 20m "$@" ./...
bash scripts/fuzz.sh # every fuzz target, ${GRIDSUB_FUZZ_TIME:-3s} each
