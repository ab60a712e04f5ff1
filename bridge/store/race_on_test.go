//go:build race

package store_test

// raceOn: the race detector slows everything down ~10×, so the timing and
// memory assertions of the scale test do not apply.
const raceOn = true
