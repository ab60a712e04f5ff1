// Package frontend is gridsub's SLURM and PBS front-ends: sbatch, squeue,
// sacct, scancel, scontrol, qsub, qstat, qdel and Snakemake's status poll
// (`gridsub status --snakemake ID`), with the real tools' flags and
// formats, as functions over the daemon's API client.
//
// They answer from the daemon's state only: every call is a few API
// requests to the daemon, never a command at a site. Their ids are the
// integers SLURM and PBS clients expect: the sequence number of the grid
// id (g0lx8k2p3q9ab-000042 is 42, its array element
// g0lx8k2p3q9ab-000042_3 is 42_3); the daemon keeps its id prefix in its
// store, so an id stays valid across restarts.
//
// Two programs run them: gridsub (its front-end commands, and as a
// multi-call binary) and cmd/gridsub-fe, a small binary that links no
// site, store or policy code, so that a workflow engine's process per
// poll and per submission starts in a few milliseconds. This package
// imports nothing of gridsub's beyond bridge, bridge/api,
// bridge/batchscript and policy; TestFrontendImports holds that.
package frontend
