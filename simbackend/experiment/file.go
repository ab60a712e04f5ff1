package experiment

import (
	"math"
	"os"

	"github.com/gridsub/gridsub/backends/regularfile"
)

// openFile opens a trace or reference schedule: a regular file only, of any
// size (regularfile.Open: a FIFO or a device is refused without blocking).
func openFile(path string) (*os.File, error) {
	return regularfile.Open(path, math.MaxInt64)
}
