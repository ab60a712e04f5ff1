// Command gridsub is the command-line interface of the gridsub meta-scheduler.
//
//	gridsub job.yaml            run a job (same as `gridsub submit job.yaml`)
//	gridsub validate job.yaml   check a job file without running it
//	gridsub sites               list the configured sites
//
// Without a configuration (--config, or GRIDSUB_CONFIG) gridsub runs each
// job on the built-in local site (configs/local.yaml: real processes on
// this machine, one slot per core), so it works on any machine without a
// cluster; --config testbed is the simulated testbed of paper 000 (Beijing
// 128 nodes, Shanghai 64, Harbin 32). The command
// layer only parses flags, loads files and renders; the scheduling lives in
// bridge/ and policy/.
package main
