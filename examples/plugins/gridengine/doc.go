// Package gridengine is gridsub's backend for Grid Engine (Sun/Oracle
// Grid Engine, Son of Grid Engine and its descendants; tested on Debian's
// gridengine 8.1.9), written as a centre would write its own: an external
// plugin (cmd/gridsub-gridengine) over the public packages only —
// backends, backends/sshbatch (the SSH batch site, of which this package
// is a Dialect) and the plugin SDK (bridge/plugins) — loaded by gridsub by
// path and checksum.
//
// What it runs at the site's login node, each command an argv or a
// constant script taking its data as positional parameters:
//
//   - discovery: qhost -xml, qconf -sql, qstat -g c and qstat -u '*' -xml
//     in one command (Info). Grid Engine schedules slots, not nodes: a
//     gridsub node is Config.SlotsPerNode slots (the site's
//     cores_per_node), so the site's nodes are its queue's slots divided
//     by that, and a node's memory the smallest host's memory per CPU
//     times it;
//   - submission: qsub -terse -w e (the qmaster refuses a job that can
//     never run), -N, -v GRIDSUB_TAG=g:<grid id> (the tag), -r n, -S
//     /bin/bash, -pe PE N for a job of more than one slot, -l h_rt=, -l
//     h_vmem= (per slot), -q, -P (the job's account, else the site's), -ar
//     (a reservation), from the job directory, which records the job
//     number in .gridsub-jobid; batches through sshbatch.Submit;
//   - status: one remote command per poll for any number of jobs
//     (statusScript): qstat -xml -u USER for the live ones, one qacct pass
//     over the accounting file for those that ended (failed 37, the h_rt
//     limit, is a timeout), the cancel markers for those gridsub deleted;
//     a job none of them knows is read from its exit-code file by the
//     shared Backend;
//   - cancel: qdel, leaving a marker under gridsub/.cancelled (Grid Engine
//     keeps no record of a pending job deleted);
//   - find by tag: qstat -u USER -j '*' (env_list carries the tag) and the
//     id files of the job directories;
//   - advance reservations: qrsub (-a, -d, -pe, -q, -u), qrstat -ar -xml,
//     qrdel.
//
// Outputs, logs and data at the site come over SFTP through the shared
// Backend. Every parser is pure, with fixtures captured from the real
// daemons in testdata/ and a fuzz target.
//
// Grid Engine array jobs (qsub -t) are not used: gridsub expands its own
// arrays into element jobs, each one Grid Engine job; the parsers read
// array entries (tasks) when they meet them.
package gridengine
