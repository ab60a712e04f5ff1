#!/usr/bin/env bash
# Runs every quick figure experiment of paper 000
# (configs/experiments/paper000-*-quick.yaml; the paper-scale files, 10,000
# jobs over 10 seeds, are run one by one: docs/results/paper000.md) and
# prints the wall time of each and of the whole set.
#
#   bash scripts/figures.sh                 # each file's own workload.jobs
#   bash scripts/figures.sh --jobs 10000    # the paper's 10,000 jobs per run, one seed (figures 8-9 take hours)
#   OUT=/tmp/figs bash scripts/figures.sh   # where the results go (default out/figures)
#   SET=paper001 bash scripts/figures.sh    # paper 001's (or 002's...) files: configs/experiments/paper001-*.yaml
#
# Traces come from $GRIDSUB_WORKLOADS or ../shared/workloads. The binary is
# built once first (its build time is not counted).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs_flag=()
if [[ $# -gt 0 ]]; then
	if [[ $1 != --jobs || $# -ne 2 ]]; then
		echo "usage: $0 [--jobs N]" >&2
		exit 2
	fi
	jobs_flag=(--jobs "$2")
fi
out=${OUT:-out/figures}
bin=$(mktemp -d)/gridsub
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/gridsub

mkdir -p "$out"
secs() { # seconds since $1 (date +%s%N), one decimal
	local ms=$((($(date +%s%N) - $1) / 1000000))
	printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}
total_start=$(date +%s%N)
printf '%-55s %8s\n' experiment seconds
pattern='paper000-*-quick' # paper 000's quick CI variants; the paper-scale files (10,000 jobs, 10 seeds) are run one by one
[[ ${SET:-} =~ ^paper00[1-9]$ ]] && pattern="$SET-*"
for f in configs/experiments/$pattern.yaml; do
	name=$(basename "$f" .yaml)
	t0=$(date +%s%N)
	"$bin" sim "$f" "${jobs_flag[@]}" --out "$out/$name" >/dev/null 2>"$out/$name.log" || {
		echo "$name failed; see $out/$name.log" >&2
		exit 1
	}
	rm -f "$out/$name.log"
	printf '%-55s %8s\n' "$name" "$(secs "$t0")"
done
printf '%-55s %8s\n' TOTAL "$(secs "$total_start")"
