//go:build race

package replay

// raceOn: the race detector slows the replays about tenfold; tests that
// replay many jobs replay fewer under it.
const raceOn = true
