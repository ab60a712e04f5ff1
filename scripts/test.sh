#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the real-daemon tests need,
# starts the local SLURM and OpenPBS testbeds, runs every Go test with the race detector, and
# stops what it started. Usage: bash scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
export GRIDSUB_WORKLOADS="${GRIDSUB_WORKLOADS:-$(cd .. && pwd)/shared/workloads}"
# GRIDSUB_NO_SLURM=1 skips the real-daemon tests (they then say why they skip).
started_testbed=0
started_pbs=0
started_ge=0
cleanup() {
  if [ "$started_testbed" = 1 ]; then bash scripts/slurm-testbed.sh stop || true; fi
  if [ "$started_pbs" = 1 ]; then bash scripts/pbs-testbed.sh stop || true; fi
  if [ "$started_ge" = 1 ]; then bash scripts/sge-testbed.sh stop || true; fi
}
trap cleanup EXIT
if [ "${GRIDSUB_NO_SLURM:-0}" != 1 ]; then
  # Real accounting (slurmdbd + MariaDB) on the testbed's first site, for the
  # sacct rung of the ending ladder (backends/slurm TestEndingLadderReal).
  export GRIDSUB_SLURMDBD="${GRIDSUB_SLURMDBD:-1}"
  # Enforced associations there (the login user may charge account gridsub
  # only): a wrong account is named before submission (cmd/gridsub
  # TestRealSlurmWrongAccountNamed, bridge TestRealSlurmAccountInReason).
  export GRIDSUB_ACCOUNTING_ENFORCE="${GRIDSUB_ACCOUNTING_ENFORCE:-associations}"
  # siteC (2 nodes) is the budget test's own site: slurmctld's sdiag then
  # counts only that test's RPCs (backends/slurm TestBudgetHeldAtSlurmctld).
  export GRIDSUB_SITES="${GRIDSUB_SITES:-siteA siteB siteC}"
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
# The generated-code staleness test (bridge/plugins/proto/v1) needs protoc and
# the generators at the versions bridge/plugins/proto/v1/generate.go names.
if ! command -v protoc >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q protobuf-compiler >/dev/null || echo "test.sh: could not install protoc; the staleness test will skip" >&2
fi
# The status page's browser test (bridge/daemon TestStatusPageInBrowser)
# drives Debian's Chromium headless; it skips with a message without it.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q chromium >/dev/null || echo "test.sh: could not install chromium; the status page's browser test will skip" >&2
fi
# The login tests (backends/transport, cmd/gridsub: one-time passwords) run
# an sshd whose PAM asks a TOTP code: Debian's libpam-oath, codes from
# oathtool. They skip with a message without them.
if ! command -v oathtool >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q libpam-oath oathtool >/dev/null || echo "test.sh: could not install libpam-oath/oathtool; the TOTP login tests will skip" >&2
fi
# The workflow-engine tests (cmd/gridsub/engines_test.go) drive Debian 12's
# Snakemake 7.21 and Toil 5.9 through gridsub's front-ends; they skip with a
# message without them.
if { ! command -v snakemake >/dev/null 2>&1 || ! command -v toil-cwl-runner >/dev/null 2>&1; } && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q snakemake toil >/dev/null || echo "test.sh: could not install snakemake and toil; the workflow-engine tests will skip" >&2
fi
export GOBIN="${GOBIN:-$(go env GOPATH)/bin}"
export PATH="$GOBIN:$PATH"
go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.3.0
# The OpenPBS testbed (from ../shared/testbed/openpbs; skipped with a message
# when absent). GRIDSUB_NO_PBS=1 skips it; one already up is left running.
if [ "${GRIDSUB_NO_PBS:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
  if ! bash scripts/pbs-testbed.sh status >/dev/null 2>&1; then
    bash scripts/pbs-testbed.sh start && started_pbs=1 || echo "pbs testbed not started; the real-PBS tests will skip" >&2
  fi
  # shellcheck disable=SC1091
  [ -f /var/tmp/gridsub-pbs/testbed.env ] && bash scripts/pbs-testbed.sh status >/dev/null 2>&1 && source /var/tmp/gridsub-pbs/testbed.env
fi
# The Grid Engine testbed (scripts/sge-testbed.sh: Debian's gridengine, installed
# when missing, qmaster and execd on loopback, an sshd login node): started once
# per run and stopped by its pid files at the end; one already up is used and
# left running. GRIDSUB_NO_GE=1 skips it (the real Grid Engine tests then skip).
if [ "${GRIDSUB_NO_GE:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
  if ! bash scripts/sge-testbed.sh check >/dev/null 2>&1; then
    bash scripts/sge-testbed.sh start && started_ge=1 || echo "test.sh: Grid Engine testbed not started; the real Grid Engine tests will skip" >&2
  fi
  # shellcheck disable=SC1091
  bash scripts/sge-testbed.sh check >/dev/null 2>&1 && source "$(bash scripts/sge-testbed.sh env)"
fi
phase() { echo "test.sh: $1 done at ${SECONDS}s" >&2; }
phase "set-up"
go vet ./...
phase "go vet"
go test -race -count=1 -timeout 35m "$@" ./...
phase "go test"
bash scripts/fuzz.sh # every fuzz target, ${GRIDSUB_FUZZ_TIME:-2s} each
phase "fuzzing"
