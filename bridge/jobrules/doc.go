// Package jobrules holds the rules a job must pass wherever it enters
// gridsub: the job file parser (bridge/jobfile) and the broker's Submit
// (bridge), which the CLI, the HTTP API and any future client all cross.
// Keeping them in one place gives every client the same answer.
//
// The package is pure except for the path confinement functions (Resolve,
// Confine), which read the file system to resolve symbolic links. Every
// check returns nil or an *Error whose text says what is wrong and what
// would be valid, without the field name: the caller knows the field (a job
// file's "env.SLURM_X" at its line and column, a request's
// Env["SLURM_X"]) and prefixes it. An *Error wraps ErrValue, ErrPath or
// ErrOutsideRoot.
//
// # Limits
//
// Every number a job carries is bounded so that the arithmetic done on it
// later (walltime scaled by a site's speed, a deadline minus the
// submission, a size times a price) cannot overflow:
//
//	name           1-64 of [A-Za-z0-9._-], starting with a letter or digit
//	nodes          1 .. MaxNodes (2^20)
//	cores_per_node 0 (site default) or 1 .. MaxCoresPerNode (2^20)
//	walltime       > 0 and <= MaxWalltime (365 days)
//	data size      0 .. MaxDataSize (2^46 bytes, 64 TiB)
//	times          deadline, reservation window: not more than ClockSkew
//	               (5 minutes) before the submission and not more than
//	               MaxHorizon (10 years) after it
//	env            at most MaxEnvVars names, each [A-Za-z_][A-Za-z0-9_]*,
//	               not reserved (GRIDSUB_* in any case, SLURM_*, SBATCH_*,
//	               SALLOC_*, SRUN_*, PBS_*); values without NUL, at most
//	               MaxEnvValue bytes
//	argv, script   no NUL; at most MaxArgs words of MaxWord bytes, a script
//	               at most MaxScript bytes
//	paths          job-directory paths relative, no "..", no NUL, at most
//	               MaxPathLen bytes; at most MaxFiles inputs and outputs
package jobrules
