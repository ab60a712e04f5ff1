//go:build race

package dependable

const raceEnabled = true
