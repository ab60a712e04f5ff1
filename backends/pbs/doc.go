// Package pbs is gridsub's PBS backend (OpenPBS / PBS Professional): it
// drives one PBS server through its login node, with every remote command
// an argv handed to a backends.Runner (in production the one shared SSH
// connection of backends/transport) and every file moved by a
// backends.Stager (SFTP, confined to the site's remote directory).
//
// The package has three layers:
//
//   - argv builders (argv.go): qsub, qstat, qselect, qdel, pbsnodes,
//     pbs_rsub, pbs_rstat and pbs_rdel, always by their absolute path in a
//     configurable bin directory (a login PATH may find another batch
//     system's qsub first);
//   - pure parsers (parse.go) tested against outputs of a real OpenPBS
//     23.06.06 (testdata/, copied unchanged from the team's fixtures, see
//     testdata/README.md); both the release tag's and post-release
//     master's JSON decode; unreadable output is an error wrapping
//     backends.ErrBadOutput that quotes the text;
//   - the Backend (backend.go, find.go, resv.go), which implements
//     backends.Backend, Finder, Fetcher and Reserver on top of them.
//
// PBS defects the backend works around: `qstat -f -F json` with several ids
// prints only the first job (openpbs #2672), so Status asks for all ids in
// ONE `qstat -x -f -F dsv` (DSV prints every id, values verbatim); JSON
// retypes number-like values, so the grid tag in the job variable
// GRIDSUB_TAG carries a letter prefix ("g:<grid id>"); qsub accepts a job
// that can never run, so Submit checks the node count itself; pbs_rstat
// exits 0 for an unknown reservation, so its message is read; pbs_rsub
// prints UNCONFIRMED and rc 0 even for an impossible request, so the
// decision is waited for.
//
// Each job runs in its own directory <RemoteDir>/gridsub/<grid id>[-<k>]/
// through the SLURM backend's bash wrapper (preceded by a cd to
// $PBS_O_WORKDIR), which records the exit code in .gridsub-exit: the
// record of last resort when PBS keeps no history (job_history_enable
// off). The job id is written to .gridsub-jobid at submission, so
// FindByGridID finds a job PBS has forgotten.
package pbs
