//go:build race

package plannerrpc

// raceOn: the race detector slows the host side of the replays down
// several times; they replay fewer jobs.
const raceOn = true
