// Package experiment runs the simulation experiments of paper 000 (SPEC §1,
// Section 5) from a declarative experiment file, and writes their tables and
// plots.
//
//	experiment.yaml ─► Load (strict: unknown keys and bad values are named
//	                   with their line)
//	                 ─► Expand: the cartesian product of the sweep
//	                   (policy × workload × h set × bandwidth × p) → []Run
//	                 ─► Runner: a pool of workers; each run is one
//	                   replay.Run (the broker's planner on simulated sites,
//	                   in virtual time: the direct driver, or the real
//	                   broker with Options.ViaBroker; the same records) or,
//	                   for the kind "ctc-easy-reference", one
//	                   simbackend.ReplayEASY
//	                 ─► Summary ─► results.csv, summary.json, one PNG+SVG
//	                   per plot
//
// Every run is independent and deterministic: its inputs are the experiment
// file (seeds included) and its own parameters, never the wall clock or the
// order in which workers pick runs, so results.csv is the same byte for byte
// whatever the number of workers. Only the wall times in summary.json vary.
//
// See configs/experiments/ for one file per figure of paper 000 and
// docs/results/paper000.md for what they show.
package experiment
