#!/usr/bin/env bash
# Regenerates the data beside the results pages: every experiment listed in
# scripts/figures.txt is run with `gridsub sim`, and its results.csv,
# compare.csv and compare.md (when it compares) and its plots (SVG) replace
# the committed ones under docs/results/DIR/, with RUN.md saying which
# command, commit and config produced them. The same commit gives the same
# bytes (TestResultsDataCurrent checks the configs; --check the bytes).
#
#   bash scripts/figures.sh                  # SET=paper000: paper 000's -quick files
#   SET=paper001 bash scripts/figures.sh     # one paper's set: paper000, paper000-full, paper001 ... paper004
#   SET=all bash scripts/figures.sh          # every set (paper000-full: about half an hour of CPU)
#   ONLY=paper000/fig2 bash scripts/figures.sh   # one directory of the list
#   bash scripts/figures.sh --check          # rerun into a scratch copy and compare, byte for byte; exit 1 on a difference
#
# It prints the wall time of each experiment and of the whole set. Traces
# come from $GRIDSUB_WORKLOADS or ../shared/workloads. The binary is built
# once first (its build time is not counted).
set -euo pipefail
cd "$(dirname "$0")/.."

check=
case "${1:-}" in
'') ;;
--check) check=1 ;;
*)
	echo "usage: [SET=paper000|paper000-full|paper001|...|paper004|all] [ONLY=DIR] $0 [--check]" >&2
	exit 2
	;;
esac
set_name=${SET:-paper000}
sets=(paper000 paper000-full paper001 paper002 paper003 paper004)
if [[ $set_name != all && ! " ${sets[*]} " =~ " $set_name " ]]; then
	echo "SET=$set_name: valid are ${sets[*]} all" >&2
	exit 2
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
bin=$scratch/gridsub
go build -o "$bin" ./cmd/gridsub

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain -- . ':!docs/results' 2>/dev/null) ]]; then
	commit="$commit with uncommitted changes"
fi

secs() { # seconds since $1 (date +%s%N), one decimal
	local ms=$((($(date +%s%N) - $1) / 1000000))
	printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

differ=0
total_start=$(date +%s%N)
printf '%-40s %8s\n' experiment seconds
while read -r set dir config flags; do
	[[ -z $set || $set == \#* ]] && continue
	if [[ $set == pending ]]; then # listed, its data not committed yet: run like the others
		set=$dir dir=$config
		read -r config flags <<<"$flags"
	fi
	[[ $set_name == all || $set == "$set_name" ]] || continue
	[[ -z ${ONLY:-} || $dir == "$ONLY" ]] || continue
	read -ra fl <<<"$flags"
	out=$scratch/run/$dir
	t0=$(date +%s%N)
	"$bin" sim "configs/experiments/$config" "${fl[@]}" --out "$out" >/dev/null 2>"$scratch/log" || {
		cat "$scratch/log" >&2
		echo "$dir: gridsub sim configs/experiments/$config $flags failed" >&2
		exit 1
	}
	printf '%-40s %8s\n' "$dir" "$(secs "$t0")"
	dest=docs/results/$dir
	new=$scratch/new/$dir
	mkdir -p "$new"
	for f in results.csv compare.csv compare.md; do
		[[ -f $out/$f ]] && cp "$out/$f" "$new/"
	done
	cp "$out"/*.svg "$new/" 2>/dev/null || true
	if [[ -n $check ]]; then
		if ! diff -r -q -x RUN.md "$dest" "$new" >&2; then
			echo "$dir: the committed data differ from a rerun of configs/experiments/$config $flags" >&2
			differ=1
		fi
		continue
	fi
	cmd="gridsub sim configs/experiments/$config${flags:+ $flags}"
	cat >"$new/RUN.md" <<RUN
# $dir

Written by \`scripts/figures.sh\` (\`SET=$set ONLY=$dir bash scripts/figures.sh\`), which ran

    $cmd

at commit $commit.

- config: configs/experiments/$config
- config sha256: $(sha256sum "configs/experiments/$config" | cut -d' ' -f1)
- files: $(cd "$new" && ls | grep -v '^RUN.md$' | tr '\n' ' ')
RUN
	rm -rf "$dest"
	mkdir -p "$(dirname "$dest")"
	cp -r "$new" "$dest"
done <scripts/figures.txt
printf '%-40s %8s\n' TOTAL "$(secs "$total_start")"
exit $differ
