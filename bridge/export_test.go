package bridge

// Test hooks for the external test package (bridge_test).

// Every test of the package checks that each event added to a job is
// written with it before the operation ends (flushEvents).
func init() { checkWrites = true }

// Crash points of a move (remap.go), for tests outside the package.
const (
	CrashAfterWithdraw = crashAfterWithdraw
	CrashBeforeSubmit  = crashBeforeSubmit
)

// SetRemapHook sets the function called at each crash point of a move;
// returning true stops the broker there as if killed. A hook that blocks
// holds the broker at that point (a test then kills the process).
func SetRemapHook(b *Broker, hook func(point, id string) bool) { b.rm.hook = hook }

// RemapPartition and Occupy: the real-SLURM remap tests' hold on a whole
// partition (remap_slurm_test.go).
const RemapPartition = remapPartition

var Occupy = occupy
