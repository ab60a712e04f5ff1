//go:build !race

package benefit

// raceDetector: the race detector slows the code several times.
const raceDetector = false
