#!/usr/bin/env bash
# Runs every native Go fuzz target (func FuzzXxx(f *testing.F) in a _test.go
# file) for a bounded time each, one target at a time, and stops at the first
# crash with the path of its reproducer (testdata/fuzz/FuzzXxx/<file> of the
# package: commit it with the fix, it then runs as a regression test).
#
#   bash scripts/fuzz.sh                        # CI: 2s per target
#   GRIDSUB_FUZZ_TIME=60s bash scripts/fuzz.sh  # long mode: a minute per target
#
# Environment:
#   GRIDSUB_FUZZ_TIME      -fuzztime per target (default 2s; also "5000x")
#   GRIDSUB_FUZZ_PARALLEL  fuzzing workers per target (default 2)
#   GRIDSUB_FUZZ_MINIMIZE  -fuzzminimizetime (default 1s: a new input is not
#                          minimized for the default minute)
#   GRIDSUB_FUZZ_PKGS      packages to fuzz (default: every package with a
#                          fuzz target), e.g. "./backends/slurm ./bridge/api"
#   GRIDSUB_FUZZ_MATCH     only targets matching this regexp (default: all)
# Targets are found with `go test -list`, so a new one is picked up without
# editing this script. Prints one line per target: its time and executions.
set -euo pipefail
cd "$(dirname "$0")/.."
export GRIDSUB_WORKLOADS="${GRIDSUB_WORKLOADS:-$(cd .. && pwd)/shared/workloads}"
fuzztime="${GRIDSUB_FUZZ_TIME:-2s}"
parallel="${GRIDSUB_FUZZ_PARALLEL:-2}"
minimize="${GRIDSUB_FUZZ_MINIMIZE:-1s}"
match="${GRIDSUB_FUZZ_MATCH:-.}"

if [ -n "${GRIDSUB_FUZZ_PKGS:-}" ]; then
  read -r -a pkgs <<<"$GRIDSUB_FUZZ_PKGS"
else
  # Only packages whose tests define a fuzz target: listing every package
  # would build every test binary of the repository.
  mapfile -t pkgs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
    xargs -r -n1 dirname | sort -u | sed 's|^\./||; s|^|./|')
fi
if [ "${#pkgs[@]}" = 0 ]; then
  echo "fuzz.sh: no fuzz targets found" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
n=0
for pkg in "${pkgs[@]}"; do
  if ! list=$(go test -list '^Fuzz' "$pkg" 2>&1); then
    echo "$list"
    echo "fuzz.sh: cannot list the fuzz targets of $pkg" >&2
    exit 1
  fi
  mapfile -t targets < <(grep -E '^Fuzz' <<<"$list" | grep -E -- "$match" || true)
  for t in "${targets[@]}"; do
    t0=$SECONDS
    ok=0
    for attempt in 1 2 3; do
      if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" \
        -parallel "$parallel" "$pkg" >"$log" 2>&1; then
        ok=1
        break
      fi
      # Go 1.26's fuzzing coordinator can fail a run with a bare "context
      # deadline exceeded" as -fuzztime ends, with no input written
      # (golang/go#75804, fixed in Go 1.27): not a crash, so run it again.
      if grep -q 'Failing input written to' "$log" || ! grep -q '^    context deadline exceeded$' "$log"; then
        break
      fi
      echo "fuzz.sh: $t: the -fuzztime race of golang/go#75804 (no input written); running it again" >&2
    done
    if [ "$ok" != 1 ]; then
      cat "$log"
      repro=$(sed -n 's/^ *Failing input written to //p' "$log" | tail -n1)
      echo
      if [ -n "$repro" ]; then
        echo "fuzz.sh: $t ($pkg) crashed; reproducer: ${pkg#./}/$repro" >&2
        echo "fuzz.sh: re-run it with: go test -run '^$t/$(basename "$repro")\$' $pkg" >&2
      else
        echo "fuzz.sh: $t ($pkg) failed (no reproducer written: see the output above)" >&2
      fi
      exit 1
    fi
    execs=$(sed -n 's/.*execs: \([0-9]*\).*/\1/p' "$log" | tail -n1)
    printf '%-24s %-24s %4ds %12s execs\n' "$t" "$pkg" $((SECONDS - t0)) "${execs:-?}"
    n=$((n + 1))
  done
done
echo "fuzz.sh: $n targets, ${fuzztime} each, no crash, $((SECONDS - start))s in all"
