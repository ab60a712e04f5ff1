// Package paper003 runs paper 003's experiment (Ding, Chen, Gu; SPEC.md §4)
// on a simulated grid: m clusters of hosts, f data repositories, a
// meta-task whose inputs live in the repositories, and the repetitive
// mapping of policy/benefit every Δt, for each heuristic (benefit,
// Min-min, Sufferage; data-aware or data-blind), each input data size and
// each seed. `gridsub sim configs/experiments/paper003-*.yaml` runs it
// (an experiment file of kind paper003) and writes results.csv,
// summary.json with the paired verdict of every claim, and the plots.
//
//	Spec (spec.go) ── newWorld(seed) ── simulate(world, heuristic, data) ── Execute ── WriteAll
//	                  hosts, speeds,     every Δt: arrived + mapped-not-     workers   results.csv,
//	                  bandwidths,        started tasks -> benefit.Map;                 summary.json,
//	                  tasks (same for    start what starts before the next            plots (gonum)
//	                  every heuristic)   event; drop = abandoned
package paper003
