package main

import (
	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/frontend"
)

// The SLURM and PBS front-ends' commands (package frontend has their
// bodies; cmd/gridsub-fe serves them without gridsub's command tree).

// frontEnd makes a command that parses its own flags, as the tool it
// stands for does (sbatch's -o is not gridsub's --output).
func frontEnd(g *globals, tool, use, short, long string) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Long: long + `

Every option is the tool's own: gridsub's -c/--config, -o/--output and -h are
not read here (GRIDSUB_SOCKET, GRIDSUB_URL or GRIDSUB_CONFIG find the daemon);
--help alone shows this text.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a == "--help" {
					return cmd.Help()
				}
				if a == "--" {
					break
				}
			}
			return frontend.Run(cmd.Context(), feEnv(g), tool, args)
		},
	}
	c.Flags().Bool("help", false, "show this text") // no -h: it is the tool's own (squeue -h: no header)
	return c
}

// newSbatchCmd: sbatch [options] [script [args...]] | --wrap=CMD.
func newSbatchCmd(g *globals) *cobra.Command {
	return frontEnd(g, "sbatch", "sbatch [options] [script.sh [args...]]", "Submit a batch script to the daemon as SLURM's sbatch does",
		`Sbatch takes sbatch's options and a #SBATCH script (a file, --wrap=COMMAND, or
the script on standard input), translates them (see "gridsub validate
script.sh" for what each directive becomes) and queues the job in the running
daemon. It prints "Submitted batch job N", or N alone with --parsable; N is the
integer id every front-end (squeue, sacct, scancel, scontrol, gridsub status
--snakemake) takes, valid across daemon restarts. The script is copied at
submission. A failure of the job's own command is final: the workflow engine
that submitted it owns retries (a site's fault is still gridsub's to handle).
Exit status 0 when the job was queued, 1 otherwise, with the reason.`)
}

func newSqueueCmd(g *globals) *cobra.Command {
	return frontEnd(g, "squeue", "squeue [options]", "List the daemon's jobs as SLURM's squeue does",
		`Squeue lists the daemon's jobs in squeue's format: by default the pending and
running ones; -t/--states picks states (PD, R, CD, F, CA, TO, NF, or all);
-j/--jobs ids, -n/--name names, -p/--partition partitions, -u/--user users
(every job belongs to the user running the daemon); -o/--format takes squeue's
%i %j %t %T %M %D %P %u %R %r %l %C %N %S %V %e %a %q %o %A %K %F %% with
widths (%.18i right-justified, %-8j left); -h/--noheader; -l/--long. No site
is asked: the answer is the daemon's state.`)
}

// newSacctCmd: sacct -n -P -j a,b --format JobIDRaw,State,ExitCode -S ...
func newSacctCmd(g *globals) *cobra.Command {
	return frontEnd(g, "sacct", "sacct [options]", "Report the daemon's jobs as SLURM's sacct does",
		`Sacct reports jobs from the daemon's records in sacct's format: -j/--jobs ids,
-o/--format fields (JobID, JobIDRaw, JobName, State, ExitCode, DerivedExitCode,
Elapsed, ElapsedRaw, Start, End, Submit, Partition, Account, AllocCPUS, NCPUS,
NNodes, NodeList, Timelimit, User, Reason, QOS, Cluster; NAME%WIDTH sets a
width), -n/--noheader, -P/--parsable2 ('|' between fields), -p/--parsable (and
after the last), --delimiter, -S/--starttime and -E/--endtime (jobs eligible
in that window; the default without -j is since midnight), -s/--state, -X, -a,
-b/--brief. Gridsub jobs have no steps: each job is one line. No site is
asked.`)
}

// newScancelCmd: scancel ID... | -n NAME | -t STATE | -u USER.
func newScancelCmd(g *globals) *cobra.Command {
	return frontEnd(g, "scancel", "scancel [options] [job_id...]", "Cancel the daemon's jobs as SLURM's scancel does",
		`Scancel cancels jobs by id (N, N_I for an array element, or a grid id), or every
job matching -n/--name, -t/--state (PENDING, RUNNING), -u/--user, -p/--partition.
The daemon records each cancel and returns at once; it reaches the sites on its
next cycle. Exit status 1 when an id is unknown.`)
}

// newScontrolCmd: scontrol show job [ID] | scontrol show config.
func newScontrolCmd(g *globals) *cobra.Command {
	return frontEnd(g, "scontrol", "scontrol show job [ID] | scontrol show config", "Show the daemon's jobs and settings as SLURM's scontrol does",
		`Scontrol serves "show job [ID]" (every job, or one, in scontrol's KEY=VALUE
records) and "show config" (the lines clients read at start, with
SchedulerTimeSlice). Other scontrol commands are refused: they change a site's
state, which is the site's.`)
}
