#!/usr/bin/env bash
# Holds every experiment's results to an earlier commit's, byte for byte:
# builds gridsub at BASE (a git worktree in a temporary directory) and here,
# runs every experiment file with both (paper 000's quick set, papers
# 001-004's whole sets, the CTC EASY reference), one after the other, and
# compares each run's CSV files. It prints each file's two wall times and
# their ratio, and exits 1 when any CSV differs (the diff's first lines are
# printed).
#
#   bash scripts/same-results.sh BASE            # e.g. bash scripts/same-results.sh HEAD~5
#   ONLY='paper001-*' bash scripts/same-results.sh BASE
#
# Traces come from $GRIDSUB_WORKLOADS or ../shared/workloads.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -ne 1 ]]; then
	echo "usage: $0 BASE-COMMIT" >&2
	exit 2
fi
base=$(git rev-parse --verify "$1^{commit}")
export GRIDSUB_WORKLOADS="${GRIDSUB_WORKLOADS:-$(cd .. && pwd)/shared/workloads}"
tmp=$(mktemp -d)
cleanup() {
	git worktree remove --force "$tmp/base-tree" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --detach "$tmp/base-tree" "$base" >/dev/null 2>&1
(cd "$tmp/base-tree" && go build -o "$tmp/base" ./cmd/gridsub)
go build -o "$tmp/head" ./cmd/gridsub

secs() { # seconds since $1 (date +%s%N), two decimals
	local ms=$((($(date +%s%N) - $1) / 1000000))
	printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10))
}
differ=0
printf '%-55s %8s %8s %6s %s\n' experiment base head ratio csv
for f in configs/experiments/${ONLY:-*}.yaml; do
	name=$(basename "$f" .yaml)
	# paper 000's paper-scale files (10,000 jobs, 10 seeds) take CPU-hours:
	# their quick variants stand for them.
	if [[ $name == paper000-* && $name != *-quick ]]; then
		continue
	fi
	times=()
	for who in base head; do
		t0=$(date +%s%N)
		"$tmp/$who" sim "$f" --out "$tmp/out-$who/$name" >/dev/null 2>"$tmp/$who-$name.log" || {
			echo "$name failed under $who; see its log:" >&2
			tail -n 20 "$tmp/$who-$name.log" >&2
			exit 1
		}
		times+=("$(secs "$t0")")
	done
	verdict=same
	while IFS= read -r csv; do
		rel=${csv#"$tmp/out-base/$name/"}
		if ! cmp -s "$csv" "$tmp/out-head/$name/$rel"; then
			verdict="DIFFERS: $rel"
			diff "$csv" "$tmp/out-head/$name/$rel" | head -n 5 >&2 || true
			differ=1
		fi
	done < <(find "$tmp/out-base/$name" -name '*.csv' | sort)
	n=$(find "$tmp/out-base/$name" -name '*.csv' | wc -l)
	[[ $n -gt 0 ]] || { verdict="no CSV written"; differ=1; }
	ratio=$(awk -v a="${times[0]}" -v b="${times[1]}" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')
	printf '%-55s %8s %8s %6s %s (%d files)\n' "$name" "${times[0]}" "${times[1]}" "$ratio" "$verdict" "$n"
done
exit "$differ"
