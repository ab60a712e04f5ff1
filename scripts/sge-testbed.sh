#!/usr/bin/env bash
# sge-testbed.sh -- a real Grid Engine site on this machine for gridsub's
# tests: Debian's gridengine 8.1.9 (qmaster + one execd on loopback), a
# queue, a parallel environment, a project, advance reservations allowed,
# and an sshd login node on 127.0.0.1 with its own host key, client key and
# known_hosts. Debian 12, run as root, no systemd.
#
#   bash scripts/sge-testbed.sh install  install the packages (debconf preseeded) if missing
#   bash scripts/sge-testbed.sh start    install, start the daemons, configure, write testbed.env (idempotent)
#   bash scripts/sge-testbed.sh check    exit 0 when qmaster, execd and sshd answer
#   bash scripts/sge-testbed.sh stop     delete the test user's jobs and reservations, stop what start started (pid files only)
#
# Afterwards: source "${GRIDSUB_GE_DIR:-/var/tmp/gridsub-ge}/testbed.env".
# Knobs (read by start): GRIDSUB_GE_DIR, GRIDSUB_GE_USER (the login user, not
# root; default geuser), GRIDSUB_GE_SSH_PORT (default 2460), GRIDSUB_GE_SLOTS
# (the queue's slots, default 8).
#
# Grid Engine has one qmaster per machine (its ports 6444/6445 come from
# /etc/services), so there is one such testbed at a time. What makes it work
# here (issue #28): the packaged init scripts are refused in this container,
# so sge_qmaster and sge_execd are started directly with SGE_ROOT and
# SGE_CELL; 127.0.0.1 resolves to "localhost" while the host is named
# otherwise, so common/act_qmaster names the host and common/host_aliases maps
# the two names (else commlib refuses every client: "client IP resolved to
# host name localhost ..."); the exec host is made a submit host; the queue
# and PE come from qconf -Aq/-Ap files; qrsub needs max_advance_reservations
# > 0 and the user in the arusers list.
set -euo pipefail
umask 022

TB=${GRIDSUB_GE_DIR:-/var/tmp/gridsub-ge}
LOGIN=${GRIDSUB_GE_USER:-geuser}
SSH_PORT=${GRIDSUB_GE_SSH_PORT:-2460}
SLOTS=${GRIDSUB_GE_SLOTS:-8}
QUEUE=gridsub.q
PE=gridsub
PROJECT=grid
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
COMMON=$SGE_ROOT/$SGE_CELL/common
HOST=$(hostname)
QMASTER_PID=/var/spool/gridengine/qmaster/qmaster.pid
BIN_QMASTER=/usr/lib/gridengine/sge_qmaster
BIN_EXECD=/usr/lib/gridengine/sge_execd
BIN_SSHD=/usr/sbin/sshd

say() { printf 'sge-testbed: %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

[[ $SLOTS =~ ^[1-9][0-9]*$ ]] || fail "GRIDSUB_GE_SLOTS must be a positive whole number"
[[ $SSH_PORT =~ ^[1-9][0-9]*$ ]] || fail "GRIDSUB_GE_SSH_PORT must be a port number"
[[ $LOGIN =~ ^[a-z_][a-z0-9_-]*$ && $LOGIN != root ]] || fail "GRIDSUB_GE_USER must be a plain user name other than root"

# live PID: the process exists and is not a zombie.
live() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; [[ ${s:0:1} != Z ]]; }
# pidfile_pid FILE BINARY: the pid in FILE if that process is alive and runs BINARY.
# execd_pidfile: the execd spools under the name it resolves itself to (here
# often "localhost", whatever the host is called).
execd_pidfile() { local f; for f in /var/spool/gridengine/execd/*/execd.pid; do [[ -s $f ]] && { echo "$f"; return 0; }; done; echo /var/spool/gridengine/execd/$HOST/execd.pid; }
pidfile_pid() {
  local pid exe
  [[ -s $1 ]] || return 1
  pid=$(tr -cd '0-9' <"$1"); [[ -n $pid ]] && live "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ ${exe% (deleted)} == "$(readlink -f "$2")" ]] || return 1
  echo "$pid"
}
# stop_pid FILE BINARY GRACE: SIGTERM the pid file's process, SIGKILL after GRACE s.
stop_pid() {
  local p i
  p=$(pidfile_pid "$1" "$2") || return 0
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < $3 * 10; i++)); do live "$p" || return 0; sleep 0.1; done
  say "pid $p ($2) survived SIGTERM; SIGKILL"; kill -KILL "$p" 2>/dev/null || true
}
until_ok() { local n=$1 i; shift; for ((i = 0; i < n * 10; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

install_pkgs() {
  if [[ -x $BIN_QMASTER && -x $BIN_EXECD && -x /usr/bin/qsub && -x $BIN_SSHD && -x /usr/bin/ssh-keygen ]]; then return 0; fi
  command -v apt-get >/dev/null || fail "no apt-get: install Debian's gridengine-master, gridengine-exec, gridengine-client by hand"
  say "installing gridengine-master gridengine-exec gridengine-client openssh-server"
  local p
  for p in gridengine-common gridengine-master gridengine-client gridengine-exec; do
    printf '%s shared/gridenginemaster string %s\n%s shared/gridenginecell string default\n%s shared/gridengineconfig boolean true\n' "$p" "$HOST" "$p" "$p"
  done | debconf-set-selections
  # policy-rc.d keeps the postinst scripts from starting an sshd on :22.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q gridengine-master gridengine-exec gridengine-client openssh-server >"${TMPDIR:-/tmp}/sge-testbed-apt.log" 2>&1 ||
    fail "apt-get install failed (see ${TMPDIR:-/tmp}/sge-testbed-apt.log)"
  [[ -x $BIN_QMASTER ]] || fail "gridengine-master installed no $BIN_QMASTER"
}

# qc ARGS...: qconf as root, failing loudly.
qc() { qconf "$@" || fail "qconf $* failed"; }

fix_names() {
  # The cell as the installer wrote it may name "localhost"; clients then
  # fail commlib's host check. The master is the host by its name, and the
  # name 127.0.0.1 resolves to is an alias of it.
  [[ -d $COMMON ]] || fail "$COMMON missing: the gridengine-master package did not create the cell (reinstall with debconf preseeded)"
  echo "$HOST" >"$COMMON/act_qmaster"
  local back
  back=$(/usr/lib/gridengine/gethostbyaddr -name 127.0.0.1 2>/dev/null || echo localhost)
  if [[ $back != "$HOST" ]]; then echo "$HOST $back" >"$COMMON/host_aliases"; else rm -f "$COMMON/host_aliases"; fi
}

configure() {
  local d=$TB/conf
  install -d -m 0755 "$d"
  # Global configuration: advance reservations allowed, accounting flushed at
  # once (qacct sees a job as soon as it ends), finished jobs kept briefly.
  qconf -sconf global | sed -e '/^max_advance_reservations/d' -e '/^reporting_params/,/sharelog/d' >"$d/global"
  printf 'max_advance_reservations 100\nreporting_params accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00\n' >>"$d/global"
  qc -Mconf "$d/global" >/dev/null
  # The scheduler every second; a job is scheduled as soon as it is submitted.
  qconf -ssconf | sed -e 's/^schedule_interval .*/schedule_interval 0:0:1/' -e 's/^flush_submit_sec .*/flush_submit_sec 1/' \
    -e 's/^flush_finish_sec .*/flush_finish_sec 1/' -e 's/^schedd_job_info .*/schedd_job_info false/' >"$d/sched"
  qc -Msconf "$d/sched" >/dev/null
  qconf -ss 2>/dev/null | grep -qx "$HOST" || qc -as "$HOST" >/dev/null
  qconf -su arusers 2>/dev/null | grep -qw "$LOGIN" || qc -au "$LOGIN" arusers >/dev/null
  if ! qconf -sprj "$PROJECT" >/dev/null 2>&1; then
    printf 'name %s\noticket 0\nfshare 0\nacl NONE\nxacl NONE\n' "$PROJECT" >"$d/project"
    qc -Aprj "$d/project" >/dev/null
  fi
  cat >"$d/pe" <<EOF
pe_name            $PE
slots              9999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    \$fill_up
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
EOF
  if qconf -sp "$PE" >/dev/null 2>&1; then qc -Mp "$d/pe" >/dev/null; else qc -Ap "$d/pe" >/dev/null; fi
  cat >"$d/queue" <<EOF
qname                 $QUEUE
hostlist              $HOST
seq_no                0
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               $PE
rerun                 FALSE
slots                 $SLOTS
tmpdir                /tmp
shell                 /bin/bash
prolog                NONE
epilog                NONE
shell_start_mode      posix_compliant
starter_method        NONE
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:60
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
s_rt                  INFINITY
h_rt                  INFINITY
s_cpu                 INFINITY
h_cpu                 INFINITY
s_fsize               INFINITY
h_fsize               INFINITY
s_data                INFINITY
h_data                INFINITY
s_stack               INFINITY
h_stack               INFINITY
s_core                INFINITY
h_core                INFINITY
s_rss                 INFINITY
h_rss                 INFINITY
s_vmem                INFINITY
h_vmem                INFINITY
EOF
  if qconf -sq "$QUEUE" >/dev/null 2>&1; then qc -Mq "$d/queue" >/dev/null; else qc -Aq "$d/queue" >/dev/null; fi
}

start_qmaster() {
  if ! pidfile_pid "$QMASTER_PID" $BIN_QMASTER >/dev/null; then
    say "starting sge_qmaster"
    /usr/sbin/sge_qmaster || fail "sge_qmaster did not start (see /var/spool/gridengine/qmaster/messages)"
  fi
  until_ok 30 qconf -sh
}

start_daemons() {
  fix_names
  if ! start_qmaster; then
    # A qmaster still shutting down when it was looked at: start it once more.
    pidfile_pid "$QMASTER_PID" $BIN_QMASTER >/dev/null && fail "qmaster runs but does not answer qconf -sh (see /var/spool/gridengine/qmaster/messages)"
    start_qmaster || fail "qmaster does not answer qconf -sh (see /var/spool/gridengine/qmaster/messages)"
  fi
  if ! pidfile_pid "$(execd_pidfile)" $BIN_EXECD >/dev/null; then
    say "starting sge_execd"
    /usr/sbin/sge_execd || fail "sge_execd did not start (see /var/spool/gridengine/execd/$HOST/messages)"
  fi
  until_ok 30 pidfile_pid "$(execd_pidfile)" $BIN_EXECD || fail "sge_execd wrote no pid file"
}

setup_user() {
  id "$LOGIN" >/dev/null 2>&1 || useradd -m -s /bin/bash "$LOGIN"
  # sshd without PAM refuses locked accounts ('!' in shadow): '*' means no
  # password but not locked.
  sed -i "s/^$LOGIN:!:/$LOGIN:*:/" /etc/shadow
  local home; home=$(getent passwd "$LOGIN" | cut -d: -f6)
  install -d -m 0700 -o "$LOGIN" -g "$(id -gn "$LOGIN")" "$home/.ssh"
  install -d -m 0755 "$TB/client" "$TB/ssh" /run/sshd
  [[ -s $TB/client/id_ed25519 ]] || { rm -f "$TB/client/id_ed25519"*; ssh-keygen -q -t ed25519 -N '' -C gridsub-ge-testbed -f "$TB/client/id_ed25519"; }
  install -m 0600 -o "$LOGIN" "$TB/client/id_ed25519.pub" "$home/.ssh/authorized_keys"
}

start_sshd() {
  local d=$TB/ssh
  [[ -s $d/host_ed25519 ]] || { rm -f "$d/host_ed25519"*; ssh-keygen -q -t ed25519 -N '' -C ge-login -f "$d/host_ed25519"; }
  cat >"$d/sshd_config.next" <<EOF
# login node of the Grid Engine testbed; written by scripts/sge-testbed.sh
ListenAddress 127.0.0.1:$SSH_PORT
HostKey $d/host_ed25519
PidFile $d/sshd.pid
AllowUsers $LOGIN
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
UseDNS no
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
MaxSessions 64
MaxStartups 100:30:200
SetEnv SGE_ROOT=$SGE_ROOT SGE_CELL=$SGE_CELL
Subsystem sftp internal-sftp
EOF
  $BIN_SSHD -t -f "$d/sshd_config.next" || fail "generated sshd_config is invalid"
  if [[ -e $d/sshd_config ]] && ! cmp -s "$d/sshd_config" "$d/sshd_config.next"; then stop_pid "$d/sshd.pid" $BIN_SSHD 5; fi
  mv -f "$d/sshd_config.next" "$d/sshd_config"
  pidfile_pid "$d/sshd.pid" $BIN_SSHD >/dev/null && return 0
  port_open "$SSH_PORT" && fail "ssh port $SSH_PORT is taken by another program"
  $BIN_SSHD -f "$d/sshd_config" -E "$d/sshd.log"
  until_ok 10 port_open "$SSH_PORT" || fail "sshd did not start (see $d/sshd.log)"
}

write_env() {
  local c=$TB/client home
  home=$(getent passwd "$LOGIN" | cut -d: -f6)
  echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$TB/ssh/host_ed25519.pub")" >"$c/known_hosts"
  chmod 0644 "$c/known_hosts"
  {
    echo "# gridsub Grid Engine testbed (scripts/sge-testbed.sh); source this file"
    echo "export GRIDSUB_GE_DIR=$TB"
    echo "export GRIDSUB_GE_SSH_HOST=127.0.0.1"
    echo "export GRIDSUB_GE_SSH_PORT=$SSH_PORT"
    echo "export GRIDSUB_GE_SSH_USER=$LOGIN"
    echo "export GRIDSUB_GE_SSH_KEY=$c/id_ed25519"
    echo "export GRIDSUB_GE_SSH_KNOWN_HOSTS=$c/known_hosts"
    echo "export GRIDSUB_GE_HOME_DIR=$home"
    echo "export GRIDSUB_GE_QUEUE=$QUEUE"
    echo "export GRIDSUB_GE_PE=$PE"
    echo "export GRIDSUB_GE_PROJECT=$PROJECT"
    echo "export GRIDSUB_GE_SLOTS=$SLOTS"
    echo "export GRIDSUB_GE_HOST=$HOST"
  } >"$TB/testbed.env.next"
  mv -f "$TB/testbed.env.next" "$TB/testbed.env"; chmod 0644 "$TB/testbed.env"
}

check() {
  local bad=0 p
  if p=$(pidfile_pid "$QMASTER_PID" $BIN_QMASTER); then echo "sge_qmaster running (pid $p)"; else echo "sge_qmaster STOPPED"; bad=1; fi
  if p=$(pidfile_pid "$(execd_pidfile)" $BIN_EXECD); then echo "sge_execd   running (pid $p)"; else echo "sge_execd   STOPPED"; bad=1; fi
  if p=$(pidfile_pid "$TB/ssh/sshd.pid" $BIN_SSHD); then echo "sshd        running (pid $p, 127.0.0.1:$SSH_PORT)"; else echo "sshd        STOPPED"; bad=1; fi
  if ((bad == 0)); then
    timeout 10 qstat -g c >/dev/null 2>&1 || { echo "qmaster does not answer qstat"; bad=1; }
    timeout 10 qhost -h "$HOST" 2>/dev/null | grep -q "^$HOST .*lx-amd64" || { echo "exec host $HOST not reporting"; bad=1; }
  fi
  return $bad
}

start() {
  local t0; t0=$(date +%s%N)
  install_pkgs
  start_daemons
  setup_user
  configure
  start_sshd
  write_env
  # The exec host reports its load within a few seconds; a job can run then.
  until_ok 30 bash -c "qhost -h '$HOST' | grep -q '^$HOST .*lx-amd64 .*[0-9]'" || fail "exec host $HOST does not report"
  until_ok 30 su -s /bin/sh "$LOGIN" -c 'SGE_ROOT=/var/lib/gridengine SGE_CELL=default qstat' || fail "$LOGIN cannot run qstat"
  local ssh_ok="ssh -F /dev/null -i $TB/client/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=$TB/client/known_hosts -o StrictHostKeyChecking=yes -p $SSH_PORT $LOGIN@127.0.0.1 qstat -g c"
  $ssh_ok >/dev/null || fail "ssh login as $LOGIN with qstat failed (see $TB/ssh/sshd.log)"
  say "up in $((($(date +%s%N) - t0) / 1000000)) ms; source $TB/testbed.env"
}

stop() {
  stop_pid "$TB/ssh/sshd.pid" $BIN_SSHD 5
  if pidfile_pid "$QMASTER_PID" $BIN_QMASTER >/dev/null; then
    # Nothing of the test user's is left behind: jobs, then reservations.
    qdel -u "$LOGIN" >/dev/null 2>&1 || true
    local ar
    for ar in $(qrstat -u "$LOGIN" 2>/dev/null | awk 'NR > 2 {print $1}'); do qrdel "$ar" >/dev/null 2>&1 || true; done
  fi
  stop_pid "$(execd_pidfile)" $BIN_EXECD 10
  stop_pid "$QMASTER_PID" $BIN_QMASTER 20
  say "stopped"
}

case ${1:-} in
  install) [[ $EUID == 0 ]] || fail "run as root"; install_pkgs ;;
  start) [[ $EUID == 0 ]] || fail "run as root"; start ;;
  check|status) check ;;
  stop) [[ $EUID == 0 ]] || fail "run as root"; stop ;;
  env) echo "$TB/testbed.env" ;;
  *) echo "usage: $0 install|start|check|stop|env" >&2; exit 2 ;;
esac
