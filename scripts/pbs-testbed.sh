#!/usr/bin/env bash
# The local OpenPBS testbed: a real OpenPBS 23.06.06 server on loopback with an
# sshd login node, from the team's ../shared/testbed/openpbs (its README says
# everything). This script only finds it and passes the command on.
#
#   bash scripts/pbs-testbed.sh start    # install if needed, start (~20 s), write testbed.env
#   bash scripts/pbs-testbed.sh status   # exit 0 when every daemon is up
#   bash scripts/pbs-testbed.sh stop     # stop sshd and the PBS daemons by their pid files
#   bash scripts/pbs-testbed.sh env      # print the testbed.env path
#
# Then `source /var/tmp/gridsub-pbs/testbed.env` for the real-server tests
# (backends/pbs, cmd/gridsub TestRealPBS*) and configs/local-pbs.yaml.
# GRIDSUB_PBS_VARIANT=master selects the post-release build (see its README).
# Without ../shared/testbed/openpbs it says so and exits 0 (the tests skip).
set -euo pipefail
cd "$(dirname "$0")/.."
site="${GRIDSUB_PBS_TESTBED:-$(cd .. && pwd)/shared/testbed/openpbs}/pbs-site.sh"
cmd="${1:-}"
case "$cmd" in
  start|stop|status|check|env|install|restart|clean) ;;
  *) echo "usage: $0 start|stop|status|check|env|install|restart|clean" >&2; exit 2 ;;
esac
if [ ! -f "$site" ]; then
  echo "pbs-testbed: $site not found: no OpenPBS testbed here (the real-PBS tests will skip)" >&2
  [ "$cmd" = status ] && exit 1
  exit 0
fi
if [ "$(id -u)" != 0 ] && [ "$cmd" != env ] && [ "$cmd" != status ]; then
  echo "pbs-testbed: '$cmd' needs root (it installs /opt/pbs and runs the PBS daemons)" >&2
  exit 1
fi
bash "$site" "$cmd"
# The server outlives test runs on one machine, and OpenPBS keeps finished
# jobs for two weeks by default: after a few suite runs every find by tag
# (qstat -x -t -f over the whole history) reads megabytes, and a loaded
# machine ran past its 30 s deadline. The tests need minutes of history.
if [ "$cmd" = start ] || [ "$cmd" = restart ]; then
  /opt/pbs/bin/qmgr -c "set server job_history_duration = 01:00:00" >/dev/null ||
    echo "pbs-testbed: could not shorten the job history (finds by tag read all of it)" >&2
fi
