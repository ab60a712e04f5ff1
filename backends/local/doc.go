// Package local is gridsub's built-in local site (kind: local): jobs run as
// real processes on this machine, a small batch system for a workstation.
// It is gridsub's default site (configs/local.yaml), built by the plugin
// catalog like every backend (in process, or isolated as `gridsub plugin
// serve backend local`), and examples/plugins/localsite/cmd serves the same
// site as an external backend plugin (plugins.ServeBackendFactory(FromConfig)).
//
// What it does:
//
//   - A site has Config.Slots "nodes". A job asks for JobSpec.Nodes of them;
//     jobs that do not fit now wait in a strict FIFO queue (the head blocks
//     the jobs behind it, as a batch system's FCFS does). Info reports
//     Nodes = slots, FreeNodes = slots not in use, one Busy block per running
//     job until its walltime.
//   - Each job runs in its own directory <Root>/<tag>/ (tag = grid id, or
//     <grid id>-<k> for component k of a co-allocated job), as its own
//     process group, with stdout in gridsub.out and stderr in gridsub.err
//     there (the names backends/slurm uses), stdin from /dev/null, and an
//     environment built from Config.PassEnv, JobSpec.Env and GRIDSUB_GRID_ID,
//     GRIDSUB_JOB_DIR, GRIDSUB_JOB_ID, GRIDSUB_NODES.
//   - A Command is run as argv: its first word is looked up in the job's
//     PATH and executed by absolute path, every word passed literally. A
//     Script is written to <Root>/<tag>/.gridsub-job.sh and run by
//     Config.Shell (bash by default, the interpreter JobSpec.Script names).
//     Either way the job's leader is a fixed /bin/sh wrapper (wrapperScript,
//     a constant: no word of the spec is ever part of a shell string) that
//     runs "$@" and writes the exit code to the site's state directory, so
//     the code survives gridsub.
//   - The walltime is enforced from the job's start: SIGTERM to the process
//     group, SIGKILL after Config.KillGrace. Cancel does the same. When the
//     leader ends, processes it left in its group get the same treatment, so
//     a job leaves nothing behind.
//   - State survives the plugin process. Each job has a small JSON record in
//     <Root>/.gridsub/<id>.json (0600, in a 0700 directory) rewritten at every
//     transition; New reads them back. A job that ended while no Site was
//     running is found with its exit code; a pending job is queued again; a
//     running job whose leader is still alive is re-attached by pid (its
//     identity checked by the process start time and the boot id on Linux,
//     so a reused pid is never signalled) and its walltime enforced again;
//     a job caught between "starting" and "running" is reported lost rather
//     than run twice. One Site at a time owns a root (an flock on
//     <Root>/.gridsub/lock): a second one fails with ErrRootInUse.
//   - Inputs (StageFile) are copied into the job directory and outputs
//     fetched back (Fetcher) through os.Root, so no path and no symbolic link
//     leads out of the job directory or the destination; only regular files
//     are copied, each at most Config.MaxInputBytes / MaxOutputBytes.
//   - FindByGridID finds every job with a grid id, from the records, so
//     reconciliation works across restarts.
//
// What it is not: a sandbox. Jobs run as the plugin's user and can do
// whatever that user can; the confinement is of the paths this backend
// handles on a job's behalf. Records are never purged (one small file per
// job); remove <Root>/.gridsub/<id>.json of ended jobs to forget them.
// Linux gives the full behaviour; on the BSDs and macOS a re-attached job
// is recognised by its pid alone; elsewhere (Windows) the package is empty.
package local
