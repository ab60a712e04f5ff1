#!/usr/bin/env bash
# Re-captures the fixtures in this directory from the real daemons of the local
# testbed (bash scripts/slurm-testbed.sh start; source .../testbed.env), through
# the login node's sshd exactly as the backend talks to it. Each capture NAME
# writes NAME.out (stdout), NAME.err (stderr) and NAME.rc (exit status).
# Run from this directory. It submits, cancels and reserves on siteA/siteB.
set -uo pipefail
: "${GRIDSUB_SSH_CONFIG:?source testbed.env first}"
here=$(cd "$(dirname "$0")" && pwd)
cap() { # NAME SITE REMOTE-SHELL-COMMAND
  local name=$1 site=$2; shift 2
  ssh -F "$GRIDSUB_SSH_CONFIG" "$site" "$*" >"$here/$name.out" 2>"$here/$name.err"
  echo $? >"$here/$name.rc"
}
R() { ssh -F "$GRIDSUB_SSH_CONFIG" "$@"; }
Q=$'\x1f'
FMT="JobID:0$Q,State:0$Q,Reason:0$Q,exit_code:0$Q,StartTime:0$Q,EndTime:0$Q,TimeLimit:0$Q,NumNodes:0$Q,NodeList:0$Q,Partition:0$Q,Comment:0$Q,Name:0"
R siteA 'mkdir -p $SCRATCH/capture'
D='cd $SCRATCH/capture &&'
# --- sbatch
cap sbatch_ok siteA "$D sbatch --parsable -J 'cap ok' --comment=gridsub:cap-ok -t 1 --wrap 'sleep 2'"
ok=$(cat "$here/sbatch_ok.out")
cap sbatch_fail_job siteA "$D sbatch --parsable -J capfail --comment=gridsub:cap-fail -t 1 --wrap 'exit 3'"
fail=$(cat "$here/sbatch_fail_job.out")
cap sbatch_timeout_job siteA "$D sbatch --parsable -J captime --comment=gridsub:cap-time -t 1 --wrap 'sleep 300'"
tmo=$(cat "$here/sbatch_timeout_job.out")
cap sbatch_hold siteA "$D sbatch --parsable -H -J 'cap held' --comment=gridsub:cap-held -t 1 --wrap true"
held=$(cat "$here/sbatch_hold.out")
cap sbatch_run siteA "$D sbatch --parsable -N 2 -J caprun --comment=gridsub:cap-run -t 5 --wrap 'sleep 120'"
run=$(cat "$here/sbatch_run.out")
cap sbatch_cancel siteA "$D sbatch --parsable -J capcancel --comment=gridsub:cap-cancel -t 5 --wrap 'sleep 120'"
cnl=$(cat "$here/sbatch_cancel.out")
cap sbatch_bad_partition siteA "$D sbatch --parsable -p nosuch -t 1 --wrap true"
cap sbatch_too_many_nodes siteA "$D sbatch --parsable -N 99 -t 1 --wrap true"
cap sbatch_too_long siteA "$D sbatch --parsable -p debug -t 120 --wrap true"
cap sbatch_bad_reservation siteA "$D sbatch --parsable --reservation=nosuch -t 1 --wrap true"
cap sbatch_siteB siteB "mkdir -p \$SCRATCH/capture && cd \$SCRATCH/capture && sbatch --parsable -J capb -t 1 --wrap true"
sleep 4
cap scancel_ok siteA "scancel $cnl"
sleep 2
# --- status
cap squeue_mixed siteA "SLURM_TIME_FORMAT=%s squeue -h -t all -j $ok,$fail,$tmo,$held,$run,$cnl,999999 -O '$FMT'"
cap squeue_invalid siteA "SLURM_TIME_FORMAT=%s squeue -h -t all -j 999999 -O '$FMT'"
cap squeue_by_comment siteA "SLURM_TIME_FORMAT=%s squeue -h -t all -O '$FMT'"
cap scontrol_job_running siteA "SLURM_TIME_FORMAT=%s scontrol show job -o $run"
cap scontrol_job_failed siteA "SLURM_TIME_FORMAT=%s scontrol show job -o $fail"
cap scontrol_jobs_all siteA "SLURM_TIME_FORMAT=%s scontrol show job -o"
cap scontrol_job_held siteA "scontrol show job -o $held"
cap scontrol_job_cancelled siteA "scontrol show job -o $cnl"
cap scontrol_job_invalid siteA "scontrol show job -o 999999"
cap sacct_disabled siteA "SLURM_TIME_FORMAT=%s sacct -X -n -P -j $ok -S now-1hour --format=JobIDRaw,State,ExitCode,Start,End"
cap scancel_invalid siteA "scancel 999999"
# --- site info
cap sinfo siteA "sinfo -h -N -o '%N$Q%P$Q%c$Q%T'"
cap sinfo_siteB siteB "sinfo -h -N -o '%N$Q%P$Q%c$Q%T'"
cap sinfo_siteB_mem siteB "sinfo -h -N -o '%N$Q%P$Q%c$Q%T$Q%m$Q%G'"   # SinfoFormat: with memory (MiB) and gres
cap squeue_active siteA "SLURM_TIME_FORMAT=%s squeue -h -t PD,CF,R,CG,S -O '$FMT'"
cap scontrol_nodes siteA "scontrol show nodes -o"
cap scontrol_partitions siteA "scontrol show partition -o"
cap scontrol_config_jobcomp siteA "scontrol show config"
# --- reservations
cap resv_create siteB "scontrol create reservation ReservationName=capr1 StartTime=now+600 Duration=10 NodeCnt=2 Users=griduser"
# NodeCnt beyond the free nodes is silently clamped (capr2 gets the 2 left)...
cap resv_create_clamped siteB "scontrol create reservation ReservationName=capr2 StartTime=now+605 Duration=10 NodeCnt=4 Users=griduser"
cap resv_show_clamped siteB "SLURM_TIME_FORMAT=%s scontrol show reservation -o capr2"
# ...and once no node is left, creation fails.
cap resv_create_busy siteB "scontrol create reservation ReservationName=capr3 StartTime=now+605 Duration=10 NodeCnt=1 Users=griduser"
cap resv_create_overlap siteB "scontrol create reservation ReservationName=capr4 StartTime=now+600 Duration=10 Nodes=bnode1 Users=griduser"
cap resv_show_all siteB "SLURM_TIME_FORMAT=%s scontrol show reservation -o"
R siteB "scontrol delete ReservationName=capr2"
cap resv_show siteB "SLURM_TIME_FORMAT=%s scontrol show reservation -o capr1"
cap resv_show_missing siteB "scontrol show reservation -o nosuch"
cap sbatch_into_resv siteB "cd \$SCRATCH/capture && sbatch --parsable --reservation=capr1 -t 1 --wrap true"
cap resv_delete_in_use siteB "scontrol delete ReservationName=capr1"
R siteB "scancel $(cat "$here/sbatch_into_resv.out")"; sleep 1
cap resv_delete siteB "scontrol delete ReservationName=capr1"
cap resv_delete_missing siteB "scontrol delete ReservationName=capr1"
# --- the job completion log (JobCompType=jobcomp/filetxt), after TIMEOUT
sleep 62
cap squeue_timeout siteA "SLURM_TIME_FORMAT=%s squeue -h -t all -j $tmo -O '$FMT'"
cap scontrol_job_timeout siteA "scontrol show job -o $tmo"
R siteA "scancel $run $held"; sleep 2
cap jobcomp siteA "cat $GRIDSUB_SITEA_JOBCOMP"
R siteA 'sinfo --version' >"$here/VERSION"
