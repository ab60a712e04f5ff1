package backends

import "context"

// The names of a job's standard output and error, the same on every
// backend: in the remote job directory (SLURM, PBS), among the fetched
// outputs (<out-dir>/<job id>/), and on simulated sites.
const (
	StdoutFile = "gridsub.out"
	StderrFile = "gridsub.err"
)

// Log streams: the stream argument of LogReader.ReadLog.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MaxLogRead bounds one ReadLog: a caller asking for more gets at most this.
const MaxLogRead = 1 << 20

// LogFile is the file name of a stream ("" for an unknown stream).
func LogFile(stream string) string {
	switch stream {
	case StreamStdout:
		return StdoutFile
	case StreamStderr:
		return StderrFile
	}
	return ""
}

// LogReader is an optional capability: read a job's standard output or
// error as it is written, while it runs and after it ended.
//
// Contract: stream is StreamStdout or StreamStderr (another is an error
// wrapping ErrInvalidSpec); spec is the job's spec as submitted (it locates
// the job directory). ReadLog returns at most max bytes (at most
// MaxLogRead; max <= 0 means MaxLogRead) from offset on, and the size of
// the stream so far; a stream not written yet is empty (size 0, no error).
// Only a regular file inside the job directory is read (no link is
// followed). An offset past the size returns no data.
type LogReader interface {
	ReadLog(ctx context.Context, id JobID, spec *JobSpec, stream string, offset int64, max int) (data []byte, size int64, err error)
}

// LogMax clamps a ReadLog max to (0, MaxLogRead].
func LogMax(max int) int {
	if max <= 0 || max > MaxLogRead {
		return MaxLogRead
	}
	return max
}
