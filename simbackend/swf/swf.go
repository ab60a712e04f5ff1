package swf

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Sentinel errors of the package.
var (
	// ErrMalformed: a job line or header line cannot be read. The wrapping
	// error names the line number and what was expected.
	ErrMalformed = errors.New("malformed SWF")
	// ErrNoHeader: Header.Int was asked for a key the file does not carry,
	// or whose value does not start with an integer.
	ErrNoHeader = errors.New("SWF header value missing")
)

// NumFields is the number of fields on every SWF job line.
const NumFields = 18

// Job is one SWF job line. Missing values are -1, as in the file.
type Job struct {
	ID        int64   // 1 job number
	Submit    int64   // 2 submit time (s from log start)
	Wait      int64   // 3 wait time (s)
	Run       int64   // 4 run time (s)
	Alloc     int64   // 5 allocated processors
	AvgCPU    float64 // 6 average CPU time used (s)
	UsedMem   int64   // 7 used memory (KB/proc)
	ReqProcs  int64   // 8 requested processors
	ReqTime   int64   // 9 requested time (user estimate, s)
	ReqMem    int64   // 10 requested memory (KB/proc)
	Status    int64   // 11 status
	User      int64   // 12 user id
	Group     int64   // 13 group id
	Exe       int64   // 14 executable number
	Queue     int64   // 15 queue number
	Partition int64   // 16 partition number
	Prev      int64   // 17 preceding job number
	Think     int64   // 18 think time from preceding job (s)
}

// Width is the job's processor count: requested processors when positive,
// else allocated ones.
func (j *Job) Width() int64 {
	if j.ReqProcs > 0 {
		return j.ReqProcs
	}
	return j.Alloc
}

// Header holds the "; Key: value" comment lines, values trimmed. A key seen
// twice (CTC lists several "Queue:" lines) keeps every value in order.
type Header map[string][]string

// Get returns the first value for key, if any.
func (h Header) Get(key string) (string, bool) {
	v, ok := h[key]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// Int parses the leading integer of key's first value, ignoring trailing
// text: "338 (batch partition; 512 total)" gives 338.
func (h Header) Int(key string) (int64, error) {
	v, ok := h.Get(key)
	if !ok {
		return 0, fmt.Errorf("%w: no %q line", ErrNoHeader, key)
	}
	end := 0
	if end < len(v) && (v[end] == '-' || v[end] == '+') {
		end++
	}
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(v[:end], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q value %q does not start with an integer", ErrNoHeader, key, v)
	}
	return n, nil
}

// Reader streams jobs from an SWF file, plain or gzip-compressed (detected
// from the magic bytes). It holds one line in memory at a time.
type Reader struct {
	sc      *bufio.Scanner
	closer  io.Closer
	line    int
	pending []byte // first job line, read while collecting the header
	done    bool
	// Header is complete once NewReader returns for files whose comments
	// precede the jobs (all PWA files); comment lines met later are added as
	// they are read.
	Header Header
}

// NewReader reads the header comments of r and returns a Reader positioned
// on the first job.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	var closer io.Closer
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("swf: gzip: %w", err)
		}
		src, closer = gz, gz
	}
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	rd := &Reader{sc: sc, closer: closer, Header: Header{}}
	for sc.Scan() {
		rd.line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if b[0] == ';' {
			rd.addComment(b)
			continue
		}
		rd.pending = b
		return rd, nil
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("swf: line %d: %w", rd.line+1, err)
	}
	rd.done = true
	return rd, nil
}

// Open opens an SWF file (plain or .gz). Close the Reader when done.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("swf: %w", err)
	}
	rd, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("swf: %s: %w", path, err)
	}
	if rd.closer != nil {
		rd.closer = multiCloser{rd.closer, f}
	} else {
		rd.closer = f
	}
	return rd, nil
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var first error
	for _, c := range m {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close releases the underlying file and gzip stream, if the Reader owns them.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// Line is the number of the line last read (1-based).
func (r *Reader) Line() int { return r.line }

func (r *Reader) addComment(b []byte) {
	body := b[1:]
	// "; Key: value". Continuation and prose lines are indented further
	// ("              http://...") or have no colon; they are skipped.
	if len(body) > 1 && body[0] == ' ' && (body[1] == ' ' || body[1] == '\t') {
		return
	}
	k, v, ok := strings.Cut(strings.TrimSpace(string(body)), ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.ContainsAny(k, " \t") {
		return
	}
	r.Header[k] = append(r.Header[k], strings.TrimSpace(v))
}

// Next returns the next job, or io.EOF after the last one. A malformed line
// gives an error wrapping ErrMalformed with its line number; reading may not
// continue after an error.
func (r *Reader) Next() (Job, error) {
	for {
		var b []byte
		if r.pending != nil {
			b, r.pending = r.pending, nil
		} else {
			if r.done || !r.sc.Scan() {
				r.done = true
				if err := r.sc.Err(); err != nil {
					return Job{}, fmt.Errorf("swf: line %d: %w", r.line+1, err)
				}
				return Job{}, io.EOF
			}
			r.line++
			b = bytes.TrimSpace(r.sc.Bytes())
		}
		if len(b) == 0 {
			continue
		}
		if b[0] == ';' {
			r.addComment(b)
			continue
		}
		j, err := ParseLine(b)
		if err != nil {
			return Job{}, fmt.Errorf("swf: line %d: %w", r.line, err)
		}
		return j, nil
	}
}

// ParseLine parses one job line of exactly 18 whitespace-separated numeric
// fields. Integer fields given with a fraction ("246.00") are truncated.
func ParseLine(b []byte) (Job, error) {
	var v [NumFields]int64
	var cpu float64
	n := 0
	i := 0
	for {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
			i++
		}
		if i >= len(b) {
			break
		}
		st := i
		for i < len(b) && b[i] != ' ' && b[i] != '\t' && b[i] != '\r' {
			i++
		}
		if n >= NumFields {
			return Job{}, fmt.Errorf("%w: more than %d fields", ErrMalformed, NumFields)
		}
		x, f, err := parseNum(b[st:i])
		if err != nil {
			return Job{}, fmt.Errorf("%w: field %d %q is not a number", ErrMalformed, n+1, b[st:i])
		}
		v[n] = x
		if n == 5 {
			cpu = f
		}
		n++
	}
	if n != NumFields {
		return Job{}, fmt.Errorf("%w: %d fields, want exactly %d", ErrMalformed, n, NumFields)
	}
	return Job{
		ID: v[0], Submit: v[1], Wait: v[2], Run: v[3], Alloc: v[4], AvgCPU: cpu,
		UsedMem: v[6], ReqProcs: v[7], ReqTime: v[8], ReqMem: v[9], Status: v[10],
		User: v[11], Group: v[12], Exe: v[13], Queue: v[14], Partition: v[15],
		Prev: v[16], Think: v[17],
	}, nil
}

// parseNum parses an integer quickly, falling back to a float for values
// with a fraction or exponent; it returns the value truncated and as float.
// NaN, infinities and values beyond int64 are errors.
func parseNum(s []byte) (int64, float64, error) {
	neg := false
	k := 0
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		k = 1
	}
	if k < len(s) && len(s)-k <= 18 {
		var x int64
		ok := true
		for _, c := range s[k:] {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			x = x*10 + int64(c-'0')
		}
		if ok {
			if neg {
				x = -x
			}
			return x, float64(x), nil
		}
	}
	if x, err := strconv.ParseInt(string(s), 10, 64); err == nil {
		return x, float64(x), nil // a long whole number, exactly
	}
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return 0, 0, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= 1<<63 {
		return 0, 0, fmt.Errorf("%s is not a finite number within int64", s)
	}
	return int64(f), f, nil
}

// MaxSizeHint caps SizeHint: 2^18 jobs (38 MB of Jobs) covers every
// archive trace this project uses in one allocation; a larger one grows.
const MaxSizeHint = 1 << 18

// SizeHint is how many job lines the header announces (MaxRecords, else
// MaxJobs), for sizing a slice before reading; 1024 when the header says
// nothing usable. It is a hint: the file may hold fewer or more, so it is
// capped at MaxSizeHint (a header claiming 2^24 records would otherwise
// reserve 2.4 GB before a single line is read).
func (r *Reader) SizeHint() int {
	for _, key := range []string{"MaxRecords", "MaxJobs"} {
		if v, err := r.Header.Int(key); err == nil && v > 0 {
			return int(min(v, MaxSizeHint))
		}
	}
	return 1024
}

// ReadJobs reads jobs from r until EOF or until n have been kept (n <= 0:
// no limit). keep, when non-nil, filters and may repair each job
// (StrongFilter.Apply).
func ReadJobs(r *Reader, keep func(*Job) bool, n int) ([]Job, error) {
	// Sized from the header's record count (a Job is 144 bytes: growing
	// the slice by doubling copied the whole trace over again and again).
	c := r.SizeHint()
	if n > 0 {
		c = min(c, n)
	}
	out := make([]Job, 0, c)
	for n <= 0 || len(out) < n {
		j, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, err
		}
		if keep == nil || keep(&j) {
			out = append(out, j)
		}
	}
	return out, nil
}
