// Package sshsite serves a simulated batch-system site over real SSH, in
// SLURM's or PBS's command dialect, so that the real backends
// (backends/slurm, backends/pbs) drive it exactly as they drive a real
// cluster: same transport, same quoted argv, same shell wrappers, same
// parsers.
//
// A Site is:
//
//   - an x/crypto/ssh server on a loopback port with a host key generated
//     at Start (KnownHosts gives its line), public-key authentication
//     against Config.AuthorizedKeys only, "exec" and the "sftp" subsystem
//     only (no shells, terminals or forwarding);
//   - a login node: every exec request runs with a real /bin/sh -c in the
//     site's home, PATH starting with the site's bin/ directory, so shell
//     wrappers, `bash -c` submission scripts, cd, mkdir, cat, grep, find
//     and exit-code files behave as on a real login node (a line that is
//     only one batch command, or a batch as backends/sshbatch builds it of
//     batch commands or PBS submission scripts, is answered in process by
//     the same code, with the same output: direct.go, batchfast.go);
//   - the batch commands in bin/ (sbatch, squeue, sinfo, scancel, sacct,
//     scontrol; or qsub, qstat, qselect, qdel, pbsnodes, pbs_rsub,
//     pbs_rstat, pbs_rdel): tiny scripts that run Config.Exe (gridsub
//     simsite cmd) which forwards argv, working directory and a few
//     environment variables over a 0600 unix socket in run/ to the site
//     and prints what the dialect answers, with its exit code;
//   - the engine: a simbackend.Site (FCFS + EASY backfilling) on the
//     simbackend engine driven in scaled wall time (Config.Scale site
//     seconds per wall second). When the engine starts a job the site runs
//     the script copied at submission as a real process (bash, in the
//     job's working directory, stdout/stderr to the job's files, its own
//     process group); the process's exit ends the job (simbackend's
//     Site.Finish), and the engine's walltime or a cancel kills it.
//   - an SFTP server (pkg/sftp request server) confined to the home with
//     an os.Root: paths are the real absolute paths below the home, so the
//     shell and SFTP agree; a path or symbolic link leading outside is
//     refused; every file written is bounded (Config.MaxFileSize).
//
// What the site reads of a request it reads with the backends' own code
// (sshbatch.Unquote and Decode for command lines and batches,
// pbs.ParseVariableList, pbs.ParseDuration and the tags' inverses
// pbs.GridFromTag and slurm.GridFromTag), so the two cannot drift apart.
// What the dialects print is what the backends' parsers read from the real
// systems (their testdata fixtures); comparison tests hold the two side by
// side against the real SLURM testbed and the real OpenPBS server. The
// SLURM dialect keeps ended jobs visible to squeue for MinJobAge and then
// only in its jobcomp/filetxt log (scontrol show config names it);
// sacct says accounting is disabled. The PBS dialect keeps history
// (job_history_enable=True): qstat -x shows every job.
//
// The login shell is a real shell running as the serving user: it is not a
// sandbox. Serve sites on loopback, for keys you hold.
package sshsite
