#!/usr/bin/env bash
# ge-acct-bench.sh -- how long the Grid Engine status command's accounting
# pass takes, the whole-file way (qacct -j '*' filtered by awk) against the
# bounded way the plugin uses (the file read backwards, qacct given only the
# newest line of each id asked for; examples/plugins/gridengine/argv.go,
# statusScript), over the testbed's real accounting file and over a larger
# one made of COPIES copies of its records (a site with a longer history).
# The ids asked for are the last IDS records' (jobs that just ended), then
# one id without a record (the bounded way's worst case: a whole pass).
#
#   bash scripts/ge-acct-bench.sh [COPIES (default 100)] [IDS (default 500)]
#
# Needs the Grid Engine testbed's qacct (scripts/sge-testbed.sh start).
set -euo pipefail
COPIES=${1:-100}
IDS=${2:-500}
export SGE_ROOT=${SGE_ROOT:-/var/lib/gridengine} SGE_CELL=${SGE_CELL:-default}
AF=$SGE_ROOT/$SGE_CELL/common/accounting
[[ -r $AF ]] || { echo "ge-acct-bench: no readable $AF (start scripts/sge-testbed.sh)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
grep -v '^#' "$AF" > "$tmp/one"
for ((i = 0; i < COPIES; i++)); do cat "$tmp/one"; done > "$tmp/big"
ids=$(tail -n "$IDS" "$tmp/one" | awk -F: '{ print ($36 == 0 ? $6 : $6 "." $36) }' | tr '\n' ' ')
keep='BEGIN { n = split(ENVIRON["W"], a); for (i = 1; i <= n; i++) w[a[i]] = 1 }
function out() { if (b != "" && (t == "undefined" ? (j in w) : ((j "." t) in w))) printf "%s", b }
/^=+$/ { out(); b = $0 "\n"; j = ""; t = ""; next } { b = b $0 "\n" } $1 == "jobnumber" { j = $2 } $1 == "taskid" { t = $2 } END { out() }'
newest='BEGIN { n = split(ENVIRON["W"], a, " "); for (i = 1; i <= n; i++) w[a[i]] = 1; left = n }
{ k = ($36 == 0 ? $6 : $6 "." $36) } (k in w) { print; delete w[k]; if (--left == 0) exit }'
t() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo "$(( (e - s) / 1000000 )) ms"; }
whole() { qacct -f "$1" -j '*' | W="$2" awk "$keep"; }
bounded() { qacct -f <(tac -- "$1" | W="$2" awk -F: "$newest") -j '*' | W="$2" awk "$keep"; }
for f in one big; do
  n=$(wc -l < "$tmp/$f")
  echo "accounting file of $n records, $IDS ids that just ended:"
  echo "  whole file (qacct -j '*'):   $(t whole "$tmp/$f" "$ids")"
  echo "  bounded (tac, newest lines): $(t bounded "$tmp/$f" "$ids")"
  echo "  bounded, one id without a record (a whole pass): $(t bounded "$tmp/$f" "1.999999")"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
