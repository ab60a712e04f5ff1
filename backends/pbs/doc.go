// Package pbs is gridsub's PBS dialect (OpenPBS / PBS Professional) of the
// SSH batch backend (backends/sshbatch): New and Connect return a Backend,
// an sshbatch.Backend that speaks PBS through the server's login node.
//
// The package has three parts:
//
//   - argv builders (argv.go): qsub, qstat, qselect, qdel, pbsnodes,
//     pbs_rsub, pbs_rstat and pbs_rdel, always by their absolute path in a
//     configurable bin directory (a login PATH may find another batch
//     system's qsub first);
//   - pure parsers (parse.go) tested against every output of a real
//     OpenPBS 23.06.06 in the team's fixtures (testdata/, copied
//     unchanged, each parsed by a test with its expected result, see
//     testdata/README.md); both the release tag's and post-release
//     master's JSON decode; unreadable output is an error wrapping
//     backends.ErrBadOutput that quotes the text;
//   - the dialect (backend.go, info.go, find.go, resv.go): which command
//     does what for the shared backend, and how PBS's words read.
//
// PBS defects the dialect works around: `qstat -f -F json` with several ids
// prints only the first job (openpbs #2672), so Status asks for all ids in
// ONE `qstat -x -f -F dsv` (DSV prints every id, values verbatim); JSON
// retypes number-like values, so the grid tag in the job variable
// GRIDSUB_TAG carries a letter prefix ("g:<grid id>"); qsub accepts a job
// that can never run, so the submission checks the site's size itself;
// pbs_rstat exits 0 for an unknown reservation, so its message is read;
// pbs_rsub prints UNCONFIRMED and rc 0 even for an impossible request, so
// the decision is waited for.
//
// Each job runs in its own directory through the shared wrapper, preceded
// by a cd to $PBS_O_WORKDIR (PBS starts jobs in the home directory). The
// job id is written to .gridsub-jobid at submission, so FindByGridID finds
// a job PBS has forgotten (job_history_enable off), whose state the shared
// backend then reads from its exit-code file.
package pbs
