// Package jobfile reads gridsub job files: the job.yaml a user hands to
// `gridsub job.yaml`.
//
// Parse works on the yaml.v3 node tree, so every problem is reported with the
// file, line and column, the field path and what would be valid, e.g.
//
//	examples/invalid/negative-nodes.yaml:7:10: resources.nodes: must be a whole number >= 1, got -4
//
// All problems of a file are collected into one ErrorList (each a *FieldError
// wrapping one of the package's sentinel errors), not just the first. Unknown
// fields are errors, with a did-you-mean by edit distance. The parser is pure:
// it never reads the clock (relative times such as "+4h" stay relative until
// Job.Resolve is given the submission time) nor the file system (Load resolves
// and checks input files).
//
// # Schema
//
// The annotated examples/reference.yaml shows every field; in brief:
//
//	name         required; 1-64 of [A-Za-z0-9._-], starting with a letter or digit
//	command      argv list (a single word may be a plain string); or
//	script       a bash script body; exactly one of command and script
//	args         words appended to command (not allowed with script)
//	env          mapping of variable names ([A-Za-z_][A-Za-z0-9_]*, not GRIDSUB_* in
//	             any case, SLURM_*, SBATCH_*, SALLOC_*, SRUN_*, PBS_*) to string
//	             values (no NUL, at most 64 KiB; at most 1024 variables)
//	setup        bash run before the command in the same shell (module load ...);
//	             at most 1 MiB; a failing setup ends the job with exit code 125
//	workdir      directory relative to the job directory (no absolute path, no ..)
//	inputs       list of local paths (relative to the job file's directory) or
//	             {local, remote, mode}; remote defaults to the base name, is
//	             relative and confined to the job directory, and unique
//	             — or {site, path, size, remote} for a file that already lies at
//	             a site (sitefile.go): path relative to that site's remote_dir
//	             (no absolute path, no .., nothing hidden), size 1 B..64 TiB
//	             (required), all at one site, which becomes the data origin
//	outputs      list of relative paths confined to the job directory; a
//	             trailing "/" marks a directory
//	resources:
//	  nodes          width, whole number 1..2^20 (required)
//	  cores_per_node whole number 1..2^20 (default: the site's)
//	  memory_per_node size with a unit, 1MiB..1PiB: "4GiB", "16GB" (default: the site's)
//	  gpus_per_node  whole number 0..1024 (default 0)
//	  walltime       estimate on the reference machine, > 0, <= 365d (required):
//	                 "90m", "1h30m", "2d", "01:30:00", "1-12:00:00"
//	site_options   per site name: {partition, account} (SLURM partition or PBS
//	               queue; 1-64 of [A-Za-z0-9._@-]); unlisted sites use their config's
//	scheduling:
//	  origin       submit site (where the data comes from); must be the site of
//	               inputs that lie at a site, if any
//	  data_size    bytes to move from origin: "50MB", "1.5GB", "64MiB"; <= 64 TiB; needs origin;
//	               must be the sum of the sizes of inputs that lie at a site, if any
//	  sites        allowed sites (default: all)
//	  prefer       preferred sites (among sites, if sites is given)
//	  no_split     forbid co-allocation across sites (default false)
//	  deadline     RFC 3339 time (1970 or later) or "+<duration>" after submission;
//	               at most 10 years after the submission
//	  qos          auto (default) | high | low | none (SPEC.md §5)
//	  benefit      {shape: linear|step, a > 0, b > 0, c >= 0, each <= 1e15}, the SPEC.md §4 benefit function; needs deadline
//	  deadline_policy strict (default) or best-effort; needs deadline
//	  reservation  {earliest_start, latest_end | flexibility in [0,1)} (SPEC.md §2)
//	simulate:      simulated sites only
//	  runtime      actual run time on the reference machine, <= 365d (default: walltime)
//	  exit_code    0..255 (default 0)
//	array:         "1-100%10": one job per index (N, A-B, A-B:S, comma-separated; <= 10000
//	               elements, indices 0..9999999), %K at most K unfinished at once
//	sweep:         {params: {NAME: [values...], ...}, limit: K}: one job per combination
//	after, afterok, afterany:  job ids held for by the broker (started / completed / ended)
//
// A pipeline file has name, steps (a list of jobs, each with a unique name)
// and optionally after/afterok/afterany for the whole pipeline; a step's
// dependencies may name earlier steps. See group.go and docs/arrays.md.
//
// The file itself must be a regular file of at most MaxFileSize (1 MiB):
// Load refuses FIFOs, devices and directories without blocking or reading
// them (ErrFile). Names, env, argv and path rules and every numeric limit
// are those of bridge/jobrules, which the broker's Submit applies to
// every request too, so a job file and an API request get the same answer.
//
// Site names are checked against a configuration by Job.CheckSites, which
// reports each unknown name at its line with the list of known sites.
//
// # Using a job
//
// Job.Spec(gridID) gives the backends.JobSpec for the whole job (the broker
// scales Walltime and Sim.Runtime per site and splits Nodes for co-allocated
// parts); Job.PolicyJob gives the policy.Job a planner reads; Job.Resolve turns
// relative times into absolute ones given the submission time.
package jobfile
