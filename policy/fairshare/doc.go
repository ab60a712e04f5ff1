// Package fairshare holds the built-ins of the queue-order policy kind
// (policy.Order): fcfs, the broker's own order unchanged (the default),
// and fairshare, Slurm's classic fair-share factor over decayed recent
// use (docs/users.md has the formula, the knobs and an example).
package fairshare
