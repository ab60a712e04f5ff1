#!/usr/bin/env bash
# Submission throughput over SSH, one remote command per job against
# batched (sshbatch), side by side in each run, on the real testbeds:
#
#   source /var/tmp/gridsub-local-testbed/testbed.env   # SLURM
#   source /var/tmp/gridsub-pbs/testbed.env             # PBS (takes the test lock)
#   source /var/tmp/gridsub-ge/testbed.env              # Grid Engine (the plugin, in process)
#   bash scripts/bench-submit.sh [runs] [slurm|pbs|ge|both|all]
#
# Each run prints one line per backend: jobs, time and jobs/s of each side,
# the remote commands each needed, and the ratio, with the machine's load
# average before it. GRIDSUB_BENCH_JOBS (500 SLURM, 200 PBS) and
# GRIDSUB_BENCH_SESSIONS (the backends' DefaultBatchSessions) are passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
which="${2:-both}"
bench() { # package
  go test -run '^$' -bench '^BenchmarkSubmitBatch$' -benchtime 1x -timeout 30m "$1" 2>&1 |
    grep -E 'batch_bench_test|SKIP|FAIL|skip' || true
}
for i in $(seq "$runs"); do
  echo "run $i: load $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ "$which" != pbs ] && [ "$which" != ge ]; then
    if [ -n "${GRIDSUB_SSH_KEY:-}" ]; then bench ./backends/slurm/; else echo "  slurm: no testbed.env"; fi
  fi
  if [ "$which" != slurm ] && [ "$which" != ge ]; then
    if [ -n "${GRIDSUB_PBS_SSH_KEY:-}" ]; then bench ./backends/pbs/; else echo "  pbs: no testbed.env"; fi
  fi
  if [ "$which" = ge ] || [ "$which" = all ]; then
    if [ -n "${GRIDSUB_GE_SSH_KEY:-}" ]; then bench ./examples/plugins/gridengine/; else echo "  ge: no testbed.env"; fi
  fi
done
