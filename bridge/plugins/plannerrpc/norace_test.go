//go:build !race

package plannerrpc

const raceOn = false
