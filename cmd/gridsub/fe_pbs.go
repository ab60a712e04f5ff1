package main

import (
	"github.com/spf13/cobra"
)

func newQsubCmd(g *globals) *cobra.Command {
	return frontEnd(g, "qsub", "qsub [options] [script]", "Submit a batch script to the daemon as PBS's qsub does",
		`Qsub takes qsub's options (-N -l -q -A -o -e -j -J -t -W depend= -m -M -v -V
-S ...) and a #PBS script (a file, or the script on standard input), translates
them and queues the job in the running daemon. It prints the job id as PBS
does, "42.gridsub"; every front-end takes it, or 42. The script is copied at
submission; a failure of its own command is final (the submitter owns
retries). Exit status 0 when the job was queued, 1 otherwise.`)
}

func newQstatCmd(g *globals) *cobra.Command {
	return frontEnd(g, "qstat", "qstat [options] [job_id...]", "List the daemon's jobs as PBS's qstat does",
		`Qstat lists the daemon's unfinished jobs in qstat's table (Job id, Name, User,
Time Use, S, Queue); -x (or -H) adds finished ones; -f gives qstat -f's full
records (job_state, Exit_status, Resource_List...); -u USER; ids as qsub
printed them ("42.gridsub") or 42. No site is asked.`)
}

func newQdelCmd(g *globals) *cobra.Command {
	return frontEnd(g, "qdel", "qdel job_id...", "Cancel the daemon's jobs as PBS's qdel does",
		`Qdel cancels jobs by id ("42.gridsub", 42, or a grid id). The daemon records each
cancel and returns at once. Exit status 1 when an id is unknown.`)
}
