#!/usr/bin/env bash
# slurm-testbed.sh -- gridsub's own local SLURM testbed: several independent
# SLURM clusters ("sites") on this one machine, each behind its own sshd login
# node on 127.0.0.1. Debian 12, run as root, no systemd, no containers.
#
#   bash scripts/slurm-testbed.sh start    install packages if missing, start everything (idempotent)
#   bash scripts/slurm-testbed.sh status   daemons and node states (exit 1 if something is down)
#   bash scripts/slurm-testbed.sh stop     cancel jobs, stop what start started (pid files only)
#   bash scripts/slurm-testbed.sh clean    stop, then delete the testbed directory
#
# Afterwards: source "${GRIDSUB_TESTBED_DIR:-/var/tmp/gridsub-local-testbed}/testbed.env".
# Knobs (environment, read by start): GRIDSUB_TESTBED_DIR, GRIDSUB_SITES,
# GRIDSUB_<SITE>_NODES/_CPUS/_MEM, GRIDSUB_TEST_USER (and GRIDSUB_TEST_USER2,
# a second login user with its own key), GRIDSUB_SLURM_USER,
# GRIDSUB_MIN_JOB_AGE, GRIDSUB_SLURM_PORT_BASE, GRIDSUB_SSH_PORT_BASE,
# GRIDSUB_CLIENT_MESSAGE_TIMEOUT (seconds; set: the login nodes' SLURM commands
# use a copy of slurm.conf with this MessageTimeout, so squeue/sinfo/scancel
# against a stopped slurmctld fail after about N-1 s instead of ~9 s; the
# daemons keep SLURM's default. For tests that stop a controller),
# GRIDSUB_SLURMDBD (1: real accounting — a private MariaDB and one slurmdbd
# serve the sites named by GRIDSUB_ACCOUNTING_SITES, default the first site;
# the others keep accounting off. The DBD listens on GRIDSUB_SLURM_PORT_BASE-2,
# MariaDB on GRIDSUB_SLURM_PORT_BASE-1, both on 127.0.0.1),
# GRIDSUB_ACCOUNTING_ENFORCE (with GRIDSUB_SLURMDBD=1: the accounting sites'
# AccountingStorageEnforce, e.g. "associations"; set, the login user gets an
# association with account "gridsub" there, so only that account is accepted;
# default unset: nothing enforced, no account made).
# docs/slurm.md describes the layout, the ports and the measured costs.
set -euo pipefail
umask 022

TB=${GRIDSUB_TESTBED_DIR:-/var/tmp/gridsub-local-testbed}
LOGIN=${GRIDSUB_TEST_USER:-griduser}
# A second login user with a key of its own (and, with enforced accounting,
# its own account "gridsub2"): another person's identity at the same sites,
# for gridsub's per-user site credentials (docs/users.md).
LOGIN2=${GRIDSUB_TEST_USER2:-griduser2}
# Without slurmdbd only root and SlurmUser are SLURM operators; making the test
# user SlurmUser lets it create and delete reservations over ssh.
SUSER=${GRIDSUB_SLURM_USER:-$LOGIN}
SITES=${GRIDSUB_SITES:-siteA siteB}
SLURM_BASE=${GRIDSUB_SLURM_PORT_BASE:-18000}
SSH_BASE=${GRIDSUB_SSH_PORT_BASE:-2322}
MIN_JOB_AGE=${GRIDSUB_MIN_JOB_AGE:-300}
CLIENT_MSG_TIMEOUT=${GRIDSUB_CLIENT_MESSAGE_TIMEOUT:-}
WITH_DBD=${GRIDSUB_SLURMDBD:-0}
ENFORCE=${GRIDSUB_ACCOUNTING_ENFORCE:-}
[[ -z $ENFORCE || $ENFORCE =~ ^[a-z,]+$ ]] || { echo "slurm-testbed: GRIDSUB_ACCOUNTING_ENFORCE must be SLURM's words, e.g. associations" >&2; exit 1; }
[[ $WITH_DBD == 0 || $WITH_DBD == 1 ]] || { echo "slurm-testbed: GRIDSUB_SLURMDBD must be 0 or 1" >&2; exit 1; }
DBD_PORT=$((SLURM_BASE - 2))
DB_PORT=$((SLURM_BASE - 1))
BIN_DBD=/usr/sbin/slurmdbd
BIN_MARIADB=/usr/sbin/mariadbd
[[ -z $CLIENT_MSG_TIMEOUT || $CLIENT_MSG_TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "slurm-testbed: GRIDSUB_CLIENT_MESSAGE_TIMEOUT must be a whole number of seconds" >&2; exit 1; }
PKGS="slurm-wlm munge openssh-server"
[[ $WITH_DBD == 1 ]] && PKGS="$PKGS slurmdbd mariadb-server"
BIN_CTLD=/usr/sbin/slurmctld
BIN_SLURMD=/usr/sbin/slurmd
BIN_STEPD=/usr/sbin/slurmstepd
BIN_SSHD=/usr/sbin/sshd
BIN_MUNGED=/usr/sbin/munged

say() { printf 'slurm-testbed: %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }
[[ ${1:-} == status ]] || [[ $EUID == 0 ]] || fail "run as root (it installs packages and starts daemons)"

# ------------------------------------------------------------ site layout --
upper() { tr '[:lower:]' '[:upper:]' <<<"$1"; }
lower() { tr '[:upper:]' '[:lower:]' <<<"$1"; }

# knob SITE KEY DEFAULT: GRIDSUB_<SITE>_<KEY> or the default.
knob() { local v="GRIDSUB_$(upper "$1")_$2"; echo "${!v:-$3}"; }
# GRIDSUB_<SITE>_NODES is a count; testbed.env exports the same name as the
# list of node names, so a sourced env file counts as its number of names.
nodes_of() {
  local v
  case $1 in siteA) v=$(knob "$1" NODES 8) ;; siteB) v=$(knob "$1" NODES 4) ;; *) v=$(knob "$1" NODES 2) ;; esac
  [[ $v =~ ^[0-9]+$ ]] || v=$(wc -w <<<"$v")
  echo "$v"
}
cpus_of()  { case $1 in siteB) knob "$1" CPUS 4 ;; *) knob "$1" CPUS 2 ;; esac; }
mem_of()   { case $1 in siteB) knob "$1" MEM 4000 ;; *) knob "$1" MEM 2000 ;; esac; }
cluster_of() { lower "$1"; }                       # ClusterName must be lower case
prefix_of() { local c; c=$(cluster_of "$1"); echo "${c#site}node"; }   # siteA -> anode
index_of() { local i=0 s; for s in $SITES; do [[ $s == "$1" ]] && { echo $i; return 0; }; i=$((i + 1)); done; return 1; }
ctld_port() { echo $((SLURM_BASE + 100 * $(index_of "$1") + 1)); }
node_port0() { echo $((SLURM_BASE + 100 * $(index_of "$1") + 11)); }
ssh_port() { echo $((SSH_BASE + $(index_of "$1"))); }
node_names() { local p n i; p=$(prefix_of "$1"); n=$(nodes_of "$1"); for ((i = 1; i <= n; i++)); do printf '%s%d\n' "$p" "$i"; done; }
conf_of() { echo "$TB/$1/etc/slurm.conf"; }
# client_conf_of: the slurm.conf of the login node's commands.
client_conf_of() { if [[ -n $CLIENT_MSG_TIMEOUT ]]; then echo "$TB/$1/etc/slurm-client.conf"; else conf_of "$1"; fi; }
scratch_of() { echo "$TB/$1/scratch/$LOGIN"; }
# Site directories present on disk (stop/clean must find sites dropped from GRIDSUB_SITES).
sites_on_disk() { local d; for d in "$TB"/*/etc/slurm.conf; do [[ -e $d ]] || continue; d=${d%/etc/slurm.conf}; echo "${d##*/}"; done; }

# ------------------------------------------------------- process handling --
# live PID: the process exists and is not a zombie (PID 1 here reaps lazily).
live() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; [[ ${s:0:1} != Z ]]; }
started_at() { local s f; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; read -r -a f <<<"$s"; echo "${f[19]}"; }
# pidfile_pid FILE BINARY: the pid in FILE if that process is alive and runs
# BINARY (resolved: Debian's slurm daemons are alternatives symlinks; a
# package upgrade leaves "(deleted)" on the link).
pidfile_pid() {
  local pid exe
  [[ -s $1 ]] || return 1
  pid=$(tr -cd '0-9' <"$1"); [[ -n $pid ]] && live "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ ${exe% (deleted)} == "$(readlink -f "$2")" ]] || return 1
  echo "$pid"
}
# descendants PID...: "pid:starttime" of every descendant, from one /proc scan.
descendants() {
  local -A children=(); local p st rest; local -a f
  for p in /proc/[0-9]*; do
    p=${p#/proc/}; st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    rest=${st##*) }; read -r -a f <<<"$rest"; children[${f[1]}]+=" $p"
  done
  local -a todo=("$@"); local c
  while ((${#todo[@]})); do
    for c in ${children[${todo[0]}]:-}; do
      [[ $c == "$$" || $c == "$BASHPID" ]] && continue
      echo "$c:$(started_at "$c" || echo gone)"; todo+=("$c")
    done
    todo=("${todo[@]:1}")
  done
}
# terminate GRACE PID...: SIGTERM, wait up to GRACE seconds, then SIGKILL.
terminate() {
  local grace=$1 p i any; shift
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    any=0; for p in "$@"; do live "$p" && any=1; done
    ((any)) || return 0
    sleep 0.1
  done
  for p in "$@"; do live "$p" && { say "pid $p survived SIGTERM; SIGKILL"; kill -KILL "$p" 2>/dev/null || true; }; done
  return 0
}
# finish_recorded ENTRY...: terminate the recorded "pid:start" entries that
# are still the same processes (a recycled pid has another start time).
finish_recorded() {
  local e p live_ones=()
  for e in "$@"; do p=${e%%:*}; live "$p" && [[ $(started_at "$p") == "${e#*:}" ]] && live_ones+=("$p"); done
  ((${#live_ones[@]})) || return 0
  say "stopping ${#live_ones[@]} leftover child process(es)"
  terminate 3 "${live_ones[@]}"
}
# stop_pidfiles BINARY GRACE FILE...: stop the daemons named by the pid files
# (only if they run BINARY) together with their descendants.
stop_pidfiles() {
  local bin=$1 grace=$2 f p; shift 2
  local -a pids=() kids=()
  for f in "$@"; do p=$(pidfile_pid "$f" "$bin") && pids+=("$p"); done
  if ((${#pids[@]})); then
    mapfile -t kids < <(descendants "${pids[@]}")
    terminate "$grace" "${pids[@]}"
    finish_recorded "${kids[@]}"
  fi
  rm -f "$@"
}
# Job steps double-fork away from slurmd, so they are nobody's descendants.
# After a stop, catch testbed processes still running a testbed binary whose
# cwd or an open file lies inside $TB (slurmstepd keeps its log open), and
# batch scripts whose argv names a file under $TB.
sweep_strays() {
  local -a bins=() hits=() argv=(); local b p exe a l
  for b in $BIN_STEPD $BIN_SLURMD $BIN_CTLD $BIN_SSHD; do [[ -e $b ]] && bins+=("$(readlink -f "$b")"); done
  for p in /proc/[0-9]*; do
    p=${p#/proc/}; [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    argv=(); { mapfile -d '' -n 4 argv <"/proc/$p/cmdline"; } 2>/dev/null || true
    for a in "${argv[@]}"; do [[ $a == "$TB"/*/spool/* ]] && { hits+=("$p"); continue 2; }; done
    exe=$(readlink "/proc/$p/exe" 2>/dev/null) || continue; exe=${exe% (deleted)}
    for b in "${bins[@]}"; do
      [[ $exe == "$b" ]] || continue
      l=$(readlink "/proc/$p/cwd" 2>/dev/null || true)
      if [[ $l == "$TB" || $l == "$TB"/* ]]; then hits+=("$p"); break; fi
      for l in /proc/"$p"/fd/*; do
        l=$(readlink "$l" 2>/dev/null || true)
        [[ $l == "$TB"/* ]] && { hits+=("$p"); break 2; }
      done
    done
  done
  ((${#hits[@]})) || return 0
  local -a kids=(); mapfile -t kids < <(descendants "${hits[@]}")
  say "stopping ${#hits[@]} stray testbed process(es): ${hits[*]}"
  terminate 3 "${hits[@]}"
  finish_recorded "${kids[@]}"
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# until_ok SECONDS WHAT CMD...: poll CMD every 0.2 s.
until_ok() {
  local end=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do ((SECONDS < end)) || { say "gave up waiting for $what after ${1}s"; return 1; }; sleep 0.2; done
}
# daemon CMD...: start a daemon with a scrubbed environment, without our lock fd.
daemon() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@" 8>&-; }

# ------------------------------------------------------------- packages --
install_packages() {
  local p need=0
  for p in $PKGS; do [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == ii* ]] || need=1; done
  for p in $BIN_CTLD $BIN_SLURMD $BIN_SSHD $BIN_MUNGED /usr/bin/sbatch /usr/bin/ssh-keygen; do [[ -x $p ]] || need=1; done
  ((need)) || return 0
  say "installing $PKGS"
  # Keep package postinst scripts from starting a system munged or an sshd on :22.
  local policy=/usr/sbin/policy-rc.d ours=0 rc=0
  if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 0755 "$policy"; ours=1; fi
  export DEBIAN_FRONTEND=noninteractive
  { apt-get -q -o DPkg::Lock::Timeout=300 update &&
    apt-get -q -y -o DPkg::Lock::Timeout=300 install --no-install-recommends $PKGS; } >&2 || rc=$?
  ((ours)) && rm -f "$policy"
  ((rc == 0)) || fail "apt-get failed with status $rc"
}

# ------------------------------------------------------------ user, keys --
setup_user() { setup_login "$LOGIN" "$TB/client"; setup_login "$LOGIN2" "$TB/client2"; }

# setup_login USER DIR: the local account USER (the sites' login and compute
# nodes are this machine) and a client key in DIR that logs in as it.
setup_login() {
  local u=$1 c=$2
  id "$u" >/dev/null 2>&1 || useradd --create-home --user-group --shell /bin/bash "$u"
  # sshd without PAM refuses locked accounts ('!' in shadow): '*' means no password but not locked.
  case $(getent shadow "$u" | cut -d: -f2) in '' | '!'*) usermod -p '*' "$u" ;; esac
  local home; home=$(getent passwd "$u" | cut -d: -f6)
  install -d -m 0755 -o "$u" -g "$(id -gn "$u")" "$home"
  install -d -m 0700 -o "$u" -g "$(id -gn "$u")" "$home/.ssh"
  install -d -m 0700 "$c"
  [[ -s $c/id_ed25519 && -s $c/id_ed25519.pub ]] ||
    { rm -f "$c/id_ed25519"*; ssh-keygen -q -t ed25519 -N '' -C "gridsub-local-testbed-$u" -f "$c/id_ed25519"; }
  local pub keys=$home/.ssh/authorized_keys; pub=$(<"$c/id_ed25519.pub")
  grep -qxF "$pub" "$keys" 2>/dev/null || echo "$pub" >>"$keys"
  chown "$u:" "$keys"; chmod 0600 "$keys"
}

# ----------------------------------------------------------------- munge --
start_munge() {
  local m=$TB/munge
  install -d -m 0755 -o munge -g munge "$m"
  [[ -s $m/munge.key ]] || head -c 1024 /dev/urandom >"$m/munge.key"
  chown munge:munge "$m/munge.key"; chmod 0400 "$m/munge.key"
  pidfile_pid "$m/munged.pid" $BIN_MUNGED >/dev/null && return 0
  rm -f "$m/munged.pid" "$m/munge.socket" "$m/munge.socket.lock"
  daemon runuser -u munge -- $BIN_MUNGED --socket="$m/munge.socket" --key-file="$m/munge.key" \
    --pid-file="$m/munged.pid" --log-file="$m/munged.log" --seed-file="$m/munged.seed" --num-threads=4
  until_ok 10 munged bash -c "munge -n -S '$m/munge.socket' | unmunge -S '$m/munge.socket'" ||
    fail "munged did not start (see $m/munged.log)"
}

# ----------------------------------------------------------------- slurm --
bind_line() {
  # NoInAddrAny binds to what the hostname resolves to: only use it when that is loopback.
  local a; a=$(getent ahostsv4 "$(uname -n)" | awk '{print $1; exit}')
  if [[ $a == 127.* ]]; then echo CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
  else echo "# hostname resolves to ${a:-nothing}: daemons bind all addresses (clients still use 127.0.0.1)"; fi
}

partitions_of() {
  local p; p=$(prefix_of "$1")
  case $1 in
    siteA)
      local n; n=$(nodes_of "$1"); ((n > 2)) && n=2
      echo "PartitionName=batch Nodes=ALL Default=YES DefaultTime=01:00:00 MaxTime=1-00:00:00 State=UP"
      echo "PartitionName=debug Nodes=${p}[1-$n] DefaultTime=00:10:00 MaxTime=00:30:00 State=UP" ;;
    siteB) echo "PartitionName=compute Nodes=ALL Default=YES DefaultTime=01:00:00 MaxTime=12:00:00 State=UP" ;;
    *) echo "PartitionName=batch Nodes=ALL Default=YES DefaultTime=01:00:00 MaxTime=1-00:00:00 State=UP" ;;
  esac
}

# accounting_of SITE: 1 when the site's jobs go to slurmdbd.
accounting_of() {
  [[ $WITH_DBD == 1 ]] || { echo 0; return; }
  local first x; first=${SITES%% *}
  for x in ${GRIDSUB_ACCOUNTING_SITES:-$first}; do [[ $x == "$1" ]] && { echo 1; return; }; done
  echo 0
}
accounting_lines() {
  if [[ $(accounting_of "$1") == 1 ]]; then
    echo "AccountingStorageType=accounting_storage/slurmdbd"
    echo "AccountingStorageHost=localhost"
    echo "AccountingStoragePort=$DBD_PORT"
    # The MUNGE socket of connections to slurmdbd (AuthInfo covers the rest).
    echo "AccountingStoragePass=$TB/munge/munge.socket"
    # Comments (gridsub's tags) kept in accounting: sacct finds a forgotten job by its tag.
    echo "AccountingStoreFlags=job_comment"
    [[ -n $ENFORCE ]] && echo "AccountingStorageEnforce=$ENFORCE"
  else
    echo "AccountingStorageType=accounting_storage/none"
  fi
}

# ------------------------------------------------------------- accounting --
# One private MariaDB (its own data directory, socket and loopback port; a
# database user with a password made at the first start, kept in $TB/dbd
# mode 0600) and one slurmdbd for every site with accounting.
start_mariadb() {
  local m=$TB/dbd/mysql
  install -d -m 0755 "$TB/dbd"
  install -d -m 0755 -o mysql -g mysql "$m"
  if [[ ! -d $m/data/mysql ]]; then
    install -d -m 0750 -o mysql -g mysql "$m/data"
    mariadb-install-db --user=mysql --datadir="$m/data" --auth-root-authentication-method=socket >"$m/install.log" 2>&1 ||
      fail "mariadb-install-db failed (see $m/install.log)"
  fi
  if ! pidfile_pid "$m/mariadbd.pid" $BIN_MARIADB >/dev/null; then
    port_open "$DB_PORT" && fail "MariaDB port $DB_PORT is taken by another program"
    daemon $BIN_MARIADB --no-defaults --user=mysql --datadir="$m/data" --socket="$m/mysqld.sock" --pid-file="$m/mariadbd.pid" \
      --port="$DB_PORT" --bind-address=127.0.0.1 --log-error="$m/error.log" --innodb-buffer-pool-size=64M \
      --skip-name-resolve </dev/null >/dev/null 2>&1 8>&- &
    until_ok 60 mariadbd mariadb --no-defaults -S "$m/mysqld.sock" -u root -e 'select 1' ||
      fail "MariaDB did not start (see $m/error.log)"
  fi
  [[ -s $TB/dbd/storage_pass ]] || { (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$TB/dbd/storage_pass"); }
  local pw; pw=$(<"$TB/dbd/storage_pass")
  mariadb --no-defaults -S "$m/mysqld.sock" -u root <<SQL || fail "cannot create the slurm database user"
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pw';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pw';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL
}

start_slurmdbd() {
  local d=$TB/dbd conf=$TB/dbd/slurmdbd.conf
  install -d -m 0755 -o "$SUSER" "$d/log" "$d/run"
  (umask 077; cat >"$conf.next" <<EOF
# slurmdbd of the gridsub local testbed; written by scripts/slurm-testbed.sh at every start
AuthType=auth/munge
AuthInfo=socket=$TB/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=$SUSER
LogFile=$d/log/slurmdbd.log
PidFile=$d/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(<"$d/storage_pass")
StorageLoc=slurm_acct_db
EOF
)
  chown "$SUSER" "$conf.next"; chmod 0600 "$conf.next"
  if [[ -e $conf ]] && ! cmp -s "$conf" "$conf.next"; then stop_pidfiles $BIN_DBD 10 "$d/run/slurmdbd.pid"; fi
  mv -f "$conf.next" "$conf"
  if ! pidfile_pid "$d/run/slurmdbd.pid" $BIN_DBD >/dev/null; then
    port_open "$DBD_PORT" && fail "slurmdbd port $DBD_PORT is taken by another program"
    # slurmdbd reads slurmdbd.conf beside $SLURM_CONF.
    daemon SLURM_CONF="$d/slurm.conf" $BIN_DBD
    until_ok 60 slurmdbd port_open "$DBD_PORT" || fail "slurmdbd did not start (see $d/log/slurmdbd.log)"
  fi
}

# register_cluster SITE: the site's cluster in the accounting database
# (before its slurmctld first connects).
register_cluster() {
  local s=$1 conf; conf=$(conf_of "$s")
  render_slurm_conf "$s" >"$conf.acct"
  SLURM_CONF=$conf.acct sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$(cluster_of "$s")" ||
    SLURM_CONF=$conf.acct sacctmgr -i add cluster "$(cluster_of "$s")" >/dev/null ||
    fail "$s: cannot register cluster $(cluster_of "$s") with slurmdbd (see $TB/dbd/log/slurmdbd.log)"
  if [[ -n $ENFORCE ]]; then   # the login user's one association: account gridsub
    SLURM_CONF=$conf.acct sacctmgr -n -P show assoc cluster="$(cluster_of "$s")" user="$LOGIN" account=gridsub format=account 2>/dev/null | grep -qx gridsub || {
      SLURM_CONF=$conf.acct sacctmgr -i add account gridsub cluster="$(cluster_of "$s")" >/dev/null &&
        SLURM_CONF=$conf.acct sacctmgr -i add user "$LOGIN" account=gridsub cluster="$(cluster_of "$s")" >/dev/null
    } || fail "$s: cannot add the association of $LOGIN with account gridsub"
    SLURM_CONF=$conf.acct sacctmgr -n -P show assoc cluster="$(cluster_of "$s")" user="$LOGIN2" account=gridsub2 format=account 2>/dev/null | grep -qx gridsub2 || {
      SLURM_CONF=$conf.acct sacctmgr -i add account gridsub2 cluster="$(cluster_of "$s")" >/dev/null &&
        SLURM_CONF=$conf.acct sacctmgr -i add user "$LOGIN2" account=gridsub2 cluster="$(cluster_of "$s")" >/dev/null
    } || fail "$s: cannot add the association of $LOGIN2 with account gridsub2"
  fi
  rm -f "$conf.acct"
}

stop_accounting() {
  [[ -d $TB/dbd ]] || return 0
  stop_pidfiles $BIN_DBD 10 "$TB/dbd/run/slurmdbd.pid"
  stop_pidfiles $BIN_MARIADB 30 "$TB/dbd/mysql/mariadbd.pid"
}

render_slurm_conf() {
  local s=$1 d=$TB/$1 n p0 ports
  n=$(nodes_of "$s"); p0=$(node_port0 "$s")
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 89)) || fail "$s: nodes must be 1..89, got '$n'"
  ports=$p0; ((n > 1)) && ports="$p0-$((p0 + n - 1))"
  cat <<EOF
# $s of the gridsub local testbed; written by scripts/slurm-testbed.sh at every start
ClusterName=$(cluster_of "$s")
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(ctld_port "$s")
SlurmdPort=$p0
$(bind_line)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$TB/munge/munge.socket
SlurmUser=$SUSER
SlurmdUser=root
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
$(accounting_lines "$s")
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$d/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,batch_sched_delay=0
EnforcePartLimits=ALL
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=$MIN_JOB_AGE
MailProg=/bin/true
NodeName=$(prefix_of "$s")[1-$n] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$ports CPUs=$(cpus_of "$s") RealMemory=$(mem_of "$s") State=UNKNOWN
$(partitions_of "$s")
EOF
}

site_pidfiles() { local f; for f in "$TB/$1"/run/*.pid; do [[ -e $f ]] && echo "$f"; done; return 0; }
site_up_any() {
  local f; pidfile_pid "$TB/$1/run/slurmctld.pid" $BIN_CTLD >/dev/null && return 0
  for f in "$TB/$1"/run/slurmd-*.pid; do pidfile_pid "$f" $BIN_SLURMD >/dev/null && return 0; done
  return 1
}
sctl() { local s=$1; shift; SLURM_CONF=$(conf_of "$s") "$@"; }

nodes_usable() {
  local out; out=$(sctl "$1" sinfo -h -N -o '%t') && [[ -n $out ]] || return 1
  ! grep -qvE '^(idle|mix|alloc|resv|comp|plnd)$' <<<"$out"
}

start_slurm_site() {
  local s=$1 d=$TB/$1 conf node i=0 port
  conf=$(conf_of "$s")
  install -d -m 0755 "$d" "$d/etc" "$d/spool"
  render_slurm_conf "$s" >"$conf.next"
  if [[ -e $conf ]] && ! cmp -s "$conf" "$conf.next" && site_up_any "$s"; then
    say "$s: configuration changed; restarting it"; stop_slurm_site "$s"
  fi
  mv -f "$conf.next" "$conf"
  if [[ -n $CLIENT_MSG_TIMEOUT ]]; then
    { grep -v '^MessageTimeout=' "$conf"; echo "MessageTimeout=$CLIENT_MSG_TIMEOUT"; } >"$(client_conf_of "$s").next"
    chmod 0644 "$(client_conf_of "$s").next"; mv -f "$(client_conf_of "$s").next" "$(client_conf_of "$s")"
  fi
  install -d -m 0755 -o "$SUSER" "$d/log" "$d/run"
  install -d -m 0700 -o "$SUSER" "$d/state"
  install -d -m 1777 "$d/scratch"
  install -d -m 0755 -o "$LOGIN" "$(scratch_of "$s")"
  site_up_any "$s" || chown -R "$SUSER" "$d/state" "$d/log" "$d/run"
  if ! pidfile_pid "$d/run/slurmctld.pid" $BIN_CTLD >/dev/null; then
    port=$(ctld_port "$s"); port_open "$port" && fail "$s: port $port is taken by another program"
    # The job completion log must stay readable for the login user (the backend's fallback record).
    touch "$d/log/jobcomp.txt"; chown "$SUSER" "$d/log/jobcomp.txt"; chmod 0644 "$d/log/jobcomp.txt"
    daemon SLURM_CONF="$conf" $BIN_CTLD
  fi
  until_ok 30 "$s slurmctld" bash -c "SLURM_CONF='$conf' scontrol ping | grep -q UP" ||
    fail "$s: slurmctld does not answer (see $d/log/slurmctld.log)"
  for node in $(node_names "$s"); do
    port=$(($(node_port0 "$s") + i)); i=$((i + 1))
    pidfile_pid "$d/run/slurmd-$node.pid" $BIN_SLURMD >/dev/null && continue
    port_open "$port" && fail "$s: port $port (node $node) is taken by another program"
    install -d -m 0755 "$d/spool/$node"
    daemon SLURM_CONF="$conf" $BIN_SLURMD -N "$node"
  done
  # Node state is persisted: nodes left DOWN/DRAINED by an unclean stop are resumed once.
  local end=$((SECONDS + 60)) resumed=0 bad
  until nodes_usable "$s"; do
    ((SECONDS < end)) || { sctl "$s" sinfo -N >&2 || true; fail "$s: nodes not usable (see $d/log)"; }
    if ((!resumed)); then
      bad=$(sctl "$s" sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(down|drain|drng|fail|failg)/ {print $1}' | sort -u | paste -sd, -)
      [[ -n $bad ]] && { say "$s: resuming $bad"; sctl "$s" scontrol update NodeName="$bad" State=RESUME >/dev/null 2>&1 || true; resumed=1; }
    fi
    sleep 0.3
  done
}

stop_slurm_site() {
  local s=$1 d=$TB/$1 jobs
  if [[ -e $(conf_of "$s") ]] && pidfile_pid "$d/run/slurmctld.pid" $BIN_CTLD >/dev/null; then
    jobs=$(sctl "$s" squeue -h -o %A 2>/dev/null || true)
    if [[ -n $jobs ]]; then
      say "$s: cancelling $(wc -w <<<"$jobs") job(s)"
      # shellcheck disable=SC2086
      sctl "$s" scancel $jobs 2>/dev/null || true
      until_ok 10 "$s jobs to end" bash -c "[[ -z \$(SLURM_CONF='$(conf_of "$s")' squeue -h -o %A -t R,CG,PD 2>/dev/null) ]]" || true
    fi
  fi
  # The controller first (it saves state on SIGTERM), then every slurmd at once.
  stop_pidfiles $BIN_CTLD 20 "$d/run/slurmctld.pid"
  local -a f=(); mapfile -t f < <(site_pidfiles "$s")
  ((${#f[@]})) && stop_pidfiles $BIN_SLURMD 10 "${f[@]}"
  return 0
}

# ------------------------------------------------------------------- ssh --
start_sshd() {
  local s=$1 d=$TB/$1/ssh port
  port=$(ssh_port "$s")
  install -d -m 0755 "$d" /run/sshd
  [[ -s $d/host_ed25519 ]] || { rm -f "$d/host_ed25519"*; ssh-keygen -q -t ed25519 -N '' -C "$s-login" -f "$d/host_ed25519"; }
  cat >"$d/sshd_config.next" <<EOF
# login node of $s (gridsub local testbed); written by scripts/slurm-testbed.sh
ListenAddress 127.0.0.1:$port
HostKey $d/host_ed25519
PidFile $d/sshd.pid
AllowUsers $LOGIN $LOGIN2
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
SetEnv SLURM_CONF=$(client_conf_of "$s") GRIDSUB_SITE=$s SCRATCH=$(scratch_of "$s")
Subsystem sftp internal-sftp
EOF
  $BIN_SSHD -t -f "$d/sshd_config.next" || fail "$s: generated sshd_config is invalid"
  if [[ -e $d/sshd_config ]] && ! cmp -s "$d/sshd_config" "$d/sshd_config.next"; then stop_pidfiles $BIN_SSHD 5 "$d/sshd.pid"; fi
  mv -f "$d/sshd_config.next" "$d/sshd_config"
  pidfile_pid "$d/sshd.pid" $BIN_SSHD >/dev/null && return 0
  port_open "$port" && fail "$s: ssh port $port is taken by another program"
  daemon $BIN_SSHD -f "$d/sshd_config" -E "$d/sshd.log"
  until_ok 10 "$s sshd" port_open "$port" || fail "$s: sshd did not start (see $d/sshd.log)"
}

write_client_and_env() {
  local c=$TB/client s S port
  {
    for s in $SITES; do echo "[127.0.0.1]:$(ssh_port "$s") $(cut -d' ' -f1,2 "$TB/$s/ssh/host_ed25519.pub")"; done
  } >"$c/known_hosts.next"
  {
    for s in $SITES; do
      printf 'Host %s %s\n  HostName 127.0.0.1\n  Port %s\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n\n' \
        "$s" "$(cluster_of "$s")" "$(ssh_port "$s")" "$LOGIN" "$c/id_ed25519" "$c/known_hosts"
    done
  } >"$c/ssh_config.next"
  mv -f "$c/known_hosts.next" "$c/known_hosts"; mv -f "$c/ssh_config.next" "$c/ssh_config"
  chmod 0644 "$c/known_hosts" "$c/ssh_config"
  {
    echo "# gridsub local SLURM testbed (scripts/slurm-testbed.sh); source this file"
    echo "export GRIDSUB_TESTBED_DIR=$TB"
    echo "export GRIDSUB_SITES=\"$SITES\""
    echo "export GRIDSUB_SSH_HOST=127.0.0.1"
    echo "export GRIDSUB_SSH_USER=$LOGIN"
    echo "export GRIDSUB_SSH_KEY=$c/id_ed25519"
    echo "export GRIDSUB_SSH_USER2=$LOGIN2"
    echo "export GRIDSUB_SSH_KEY2=$TB/client2/id_ed25519"
    echo "export GRIDSUB_SSH_KNOWN_HOSTS=$c/known_hosts"
    echo "export GRIDSUB_SSH_CONFIG=$c/ssh_config"
    echo "export GRIDSUB_MUNGE_SOCKET=$TB/munge/munge.socket"
    echo "export GRIDSUB_WITH_SLURMDBD=$WITH_DBD"
    echo "export GRIDSUB_ACCOUNTING_ENFORCE=$ENFORCE"
    for s in $SITES; do
      S=$(upper "$s")
      echo "export GRIDSUB_${S}_SSH_PORT=$(ssh_port "$s")"
      echo "export GRIDSUB_${S}_SLURM_CONF=$(conf_of "$s")"
      echo "export GRIDSUB_${S}_CLUSTER=$(cluster_of "$s")"
      echo "export GRIDSUB_${S}_CTLD_PORT=$(ctld_port "$s")"
      echo "export GRIDSUB_${S}_NODES=\"$(node_names "$s" | paste -sd' ' -)\""
      echo "export GRIDSUB_${S}_CPUS_PER_NODE=$(cpus_of "$s")"
      echo "export GRIDSUB_${S}_JOBCOMP=$TB/$s/log/jobcomp.txt"
      echo "export GRIDSUB_${S}_ACCOUNTING=$(accounting_of "$s")"
      echo "export GRIDSUB_${S}_SCRATCH=$(scratch_of "$s")"
    done
  } >"$TB/testbed.env.next"
  mv -f "$TB/testbed.env.next" "$TB/testbed.env"; chmod 0644 "$TB/testbed.env"
}

# -------------------------------------------------------------- commands --
do_start() {
  local t0 s x keep
  t0=$(date +%s%N)
  install_packages
  install -d -m 0755 "$TB"
  setup_user
  start_munge
  if [[ $WITH_DBD == 1 ]]; then
    start_mariadb
    start_slurmdbd
  fi
  for s in $SITES; do
    [[ $s =~ ^[A-Za-z][A-Za-z0-9]*$ ]] || fail "site name '$s' must be letters and digits"
    install -d -m 0755 "$TB/$s" "$TB/$s/etc"
    [[ $(accounting_of "$s") == 1 ]] && register_cluster "$s"
    start_slurm_site "$s"
  done
  for s in $(sites_on_disk); do   # sites dropped from GRIDSUB_SITES
    keep=0; for x in $SITES; do [[ $x == "$s" ]] && keep=1; done
    ((keep)) || { say "$s: no longer in GRIDSUB_SITES; stopping it"; stop_pidfiles $BIN_SSHD 5 "$TB/$s/ssh/sshd.pid"; stop_slurm_site "$s"; }
  done
  for s in $SITES; do start_sshd "$s"; done
  write_client_and_env
  for s in $SITES; do   # end to end: log in like gridsub does and ask SLURM
    until_ok 10 "$s login" ssh -F "$TB/client/ssh_config" "$s" 'sinfo -h >/dev/null' ||
      fail "$s: ssh login as $LOGIN failed (see $TB/$s/ssh/sshd.log)"
  done
  say "up in $((($(date +%s%N) - t0) / 1000000)) ms; source $TB/testbed.env"
}

do_stop() {
  local t0 s
  t0=$(date +%s%N)
  for s in $(sites_on_disk); do stop_pidfiles $BIN_SSHD 5 "$TB/$s/ssh/sshd.pid"; done  # no new logins
  for s in $(sites_on_disk); do stop_slurm_site "$s"; done
  stop_accounting
  sweep_strays
  stop_pidfiles $BIN_MUNGED 10 "$TB/munge/munged.pid"
  say "stopped in $((($(date +%s%N) - t0) / 1000000)) ms"
}

do_status() {
  local s d n up node p bad=0
  if p=$(pidfile_pid "$TB/munge/munged.pid" $BIN_MUNGED); then echo "munged        running (pid $p)"; else echo "munged        STOPPED"; bad=1; fi
  for s in $SITES; do
    d=$TB/$s
    if p=$(pidfile_pid "$d/run/slurmctld.pid" $BIN_CTLD); then echo "$s slurmctld running (pid $p, 127.0.0.1:$(ctld_port "$s"))"; else echo "$s slurmctld STOPPED"; bad=1; fi
    n=0 up=0
    for node in $(node_names "$s"); do n=$((n + 1)); pidfile_pid "$d/run/slurmd-$node.pid" $BIN_SLURMD >/dev/null && up=$((up + 1)); done
    echo "$s slurmd    $up/$n running"; ((up == n)) || bad=1
    if p=$(pidfile_pid "$d/ssh/sshd.pid" $BIN_SSHD); then echo "$s sshd      running (pid $p, 127.0.0.1:$(ssh_port "$s"))"; else echo "$s sshd      STOPPED"; bad=1; fi
    [[ -e $(conf_of "$s") ]] && sctl "$s" sinfo 2>/dev/null | sed "s/^/    /" || true
  done
  return $bad
}

# forget_key: take this testbed's client keys out of the login users' authorized_keys.
forget_key() { forget_login_key "$LOGIN" "$TB/client"; forget_login_key "$LOGIN2" "$TB/client2"; }

forget_login_key() {
  local u=$1 c=$2 pub home keys
  [[ -s $c/id_ed25519.pub ]] && id "$u" >/dev/null 2>&1 || return 0
  pub=$(<"$c/id_ed25519.pub"); home=$(getent passwd "$u" | cut -d: -f6); keys=$home/.ssh/authorized_keys
  [[ -f $keys ]] || return 0
  grep -vxF "$pub" "$keys" >"$keys.next" || true
  chown "$u:" "$keys.next"; chmod 0600 "$keys.next"; mv -f "$keys.next" "$keys"
}

locked() { install -d -m 0755 "$TB"; exec 8>"$TB/.lock"; flock -w 300 8 || fail "cannot lock $TB/.lock"; "$@"; }

case ${1:-} in
  start) locked do_start ;;
  stop) [[ -d $TB ]] || { say "nothing to stop: $TB does not exist"; exit 0; }; locked do_stop ;;
  status) do_status ;;
  clean) if [[ -d $TB ]]; then locked do_stop; forget_key; rm -rf "$TB"; say "removed $TB"; fi ;;
  *) echo "usage: $0 start|stop|status|clean" >&2; exit 2 ;;
esac
