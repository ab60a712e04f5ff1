// Package sshbatch runs many remote commands in one SSH session: the
// shared core of the SLURM and PBS backends' batched submission (one
// `sbatch`/`qsub` per job, all in one remote command, each job's outcome
// read back separately, Submit). It also holds what else the two
// SSH-driven backends share: the spec checks of their common job wrapper
// (CheckSpec, RelPath, ValidGridID) and the state of the connection their
// Connect makes (Link).
//
// A batch is the argv
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
// session is gone): no command runs after its output stopped being read. The nonce is 16 hex digits of a SHA-256 of the commands, so a
// command's own output cannot forge a marker of the batch by accident.
//
// Both output streams therefore read, per command, "#gridsub-job <nonce>
// <k>" on a line of its own, the command's own output, then a newline and
// "#gridsub-rc <nonce> <k> <exit status>". Parse splits them back
// (Output.Started, Done, ExitCode, Stdout, Stderr): a command whose end
// marker never arrived (the session was cut) is not Done, and its outcome
// is unknown. Decode turns a script back into its commands and
// WriteSection writes one command's section as the shell would: what an
// SSH-served simulated site needs to answer a batch without a shell
// (Example_simulatedSite). Build → Decode is the identity, tested by a
// fuzz target.
//
// A script is bounded in size (Build's maxBytes, by default
// DefaultMaxBytes): sshd hands the whole command line to the login shell
// as one argument, and Linux refuses an argument over 128 KiB.
package sshbatch
