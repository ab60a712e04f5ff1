#!/usr/bin/env bash
# Start, stop or check the 50-site simulated grid of configs/grid50.yaml:
# one `gridsub simsite up` process serving every site over SSH on loopback
# (ports 24001-24050), stopped by its pid.
#   scripts/grid50.sh start|stop|status
# GRIDSUB_GRID50_DIR (default /tmp/gridsub-grid50) holds the sites, the
# generated client key, known_hosts, the pid file and the log; GRIDSUB_BIN
# is the gridsub binary (default: built into that directory from this tree);
# GRIDSUB_GRID50_SCALE is site seconds per wall second (default 1).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${GRIDSUB_GRID50_DIR:-/tmp/gridsub-grid50}
export GRIDSUB_GRID50_DIR=$dir
cfg=${GRIDSUB_GRID50_CONFIG:-$here/configs/grid50.yaml}
pidf=$dir/simsite.pid
log=$dir/simsite.log

running() { [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; }

case "${1:-}" in
start)
	if running; then echo "grid50: already running (pid $(cat "$pidf"))"; exit 0; fi
	mkdir -p "$dir" && chmod 0700 "$dir"
	bin=${GRIDSUB_BIN:-}
	if [ -z "$bin" ]; then
		bin=$dir/gridsub
		(cd "$here" && go build -o "$bin" ./cmd/gridsub)
	fi
	"$bin" --config "$cfg" simsite up --dir "$dir" --scale "${GRIDSUB_GRID50_SCALE:-1}" >"$log" 2>&1 &
	echo $! >"$pidf"
	for _ in $(seq 1 300); do
		if grep -q '^ready' "$log"; then
			echo "grid50: $(grep -c '^simsite ' "$log") sites up (pid $(cat "$pidf")); log $log"
			exit 0
		fi
		if ! running; then echo "grid50: failed to start:" >&2; cat "$log" >&2; rm -f "$pidf"; exit 1; fi
		sleep 0.1
	done
	echo "grid50: not ready after 30 s; log $log" >&2
	exit 1
	;;
stop)
	if ! running; then echo "grid50: not running"; rm -f "$pidf"; exit 0; fi
	pid=$(cat "$pidf")
	kill -TERM "$pid"
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$pidf"; echo "grid50: stopped"; exit 0; }
		sleep 0.1
	done
	echo "grid50: pid $pid still alive after 10 s; killing it" >&2
	kill -KILL "$pid"; rm -f "$pidf"
	;;
status)
	if running; then
		echo "grid50: running (pid $(cat "$pidf")), $(grep -c '^simsite ' "$log") sites; log $log"
	else
		echo "grid50: not running"; exit 3
	fi
	;;
*)
	echo "usage: $0 start|stop|status" >&2; exit 2
	;;
esac
