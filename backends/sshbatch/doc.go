// Package sshbatch is gridsub's backend for a batch system driven over SSH
// through its login node, written once for every batch system it speaks:
// a Backend does what does not depend on the batch system, over a Dialect
// (backends/slurm, backends/pbs) that says which commands do what and how
// their outputs read.
//
// # The Backend
//
// New (or Dial, which makes the one SSH connection of backends/transport)
// builds a Backend over a Dialect, a backends.Runner for commands and a
// backends.Stager for files, confined to the site's remote directory. It
// implements backends.Backend, Finder, Fetcher, Reserver (with a dialect
// that is a Reserver), BatchSubmitter, DataHolder, LogReader, LinkEstimator
// and Connectivity:
//
//   - each job runs in its own directory <RemoteDir>/gridsub/<grid id>[-<k>]
//     (JobDir) through one bash wrapper (Wrapper: the environment, the work
//     dir, the command or script quoted literally, the exit code recorded
//     atomically in .gridsub-exit), after a dialect's prologue;
//   - Submit checks the spec (CheckSpec and the dialect's), asks the
//     dialect for the submission command (which may ask the site whether
//     the job can ever run), stages the inputs within the job's byte
//     budget, runs the command with the wrapper on its stdin and reads the
//     id;
//   - Status asks the dialect (Query, one command per Traits.MaxIDs ids)
//     and reads the exit-code files of the jobs the batch system forgot;
//     a job with no record left is StateLost; Cancel runs the dialect's
//     cancel, a job already ended being no error; FindByGridID takes the
//     dialect's finds and reads the exit-code files of the forgotten ones;
//   - FetchOutputs moves regular files only, within the job's byte budget,
//     through backends.OutputDir; ReadLog reads gridsub.out/.err by offset;
//     ReadData and LinkData serve files that lie at the site;
//   - CreateReservation checks the request, defaults its users to the
//     login user and withdraws a reservation granted fewer nodes than
//     asked.
//
// A Dialect's commands go through an Exec, which names the site and the
// command in errors and turns a failed command into backends.ErrRejected
// or, when the dialect reads its words so, backends.ErrUnavailable.
//
// # Batches
//
// SubmitBatch runs many submissions in one SSH session (Submit, the
// package function): one `sbatch`/`qsub` per job, all in one remote
// command, each job's outcome read back separately. A batch is the argv
//
//	/bin/sh -c <script> gridsub-batch
//
// handed to a backends.Runner (which quotes every word, so the script
// reaches /bin/sh as one literal word). The script is built only from
// commands quoted word by word with transport.Quote — no user data is ever
// interpolated into shell text unquoted — and has, for each command k
// (0-based, in order), exactly these lines:
//
//	printf '#gridsub-job <nonce> <k>\n' || exit 1; printf '#gridsub-job <nonce> <k>\n' >&2
//	<transport.Quote(argv)> <<'<delimiter>'     (or: <transport.Quote(argv)> </dev/null)
//	<the command's stdin, verbatim, ending with a newline>
//	<delimiter>
//	r=$?; printf '\n#gridsub-rc <nonce> <k> %d\n' "$r"; printf '\n#gridsub-rc <nonce> <k> %d\n' "$r" >&2
//
// after one first line "# gridsub-batch v1 <nonce> <n>". The here-document
// lines are present only when the command has stdin; its delimiter is
// GRIDSUB_STDIN_<k> (with "_<i>" appended while it equals a line of the
// stdin). The shell stops at the first start marker it cannot write (the
// session is gone): no command runs after its output stopped being read.
// The nonce is 16 hex digits of a SHA-256 of the commands, so a command's
// own output cannot forge a marker of the batch by accident.
//
// Both output streams therefore read, per command, "#gridsub-job <nonce>
// <k>" on a line of its own, the command's own output, then a newline and
// "#gridsub-rc <nonce> <k> <exit status>". Parse splits them back
// (Output.Started, Done, ExitCode, Stdout, Stderr): a command whose end
// marker never arrived (the session was cut) is not Done, and its outcome
// is unknown; such jobs are looked up by their tags (Dialect.Live). Decode
// turns a script back into its commands and WriteSection writes one
// command's section as the shell would: what an SSH-served simulated site
// needs to answer a batch without a shell (Example_simulatedSite). Build →
// Decode is the identity, tested by a fuzz target.
//
// A script is bounded in size (Build's maxBytes, by default
// DefaultMaxBytes): sshd hands the whole command line to the login shell
// as one argument, and Linux refuses an argument over 128 KiB.
//
// The shared commands on job directories (ExitFilesArgv, ListFilesArgv,
// MkdirArgv) and their parsers (ParseExitFiles, ParseFileList) are pure
// and tested against captures in testdata/. Package sshbatchtest holds the
// real-site cases every dialect passes.
package sshbatch
