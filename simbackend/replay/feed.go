package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/gridsub/gridsub/simbackend/swf"
)

// Feed is a workload delivered while it is read, so that reading a trace
// and replaying it run side by side: batches of jobs in submit order on C,
// which the reader closes at the end. Err, once C is closed, is what
// stopped the reading early (nil at the end of the workload).
type Feed struct {
	C     <-chan []Job
	Err   func() error
	Total int // jobs in the workload when known (for progress); 0 = unknown
	// Hint is about how many jobs to expect (the trace header's count), to
	// size memory once rather than grow it batch by batch; 0 = no idea.
	Hint int
	// Free, when not nil, takes back the batches the replay has copied, for
	// the reader to fill again (a send that would block is skipped).
	Free chan<- []Job
	// Stop, when not nil, tells the reader to stop (and close its file):
	// RunFeed calls it when it returns, whether or not it read the feed to
	// its end, so that a replay that fails leaves no reader behind.
	Stop func()
}

// recycle hands a batch the replay has copied back to the reader.
func (f *Feed) recycle(b []Job) {
	if f.Free == nil {
		return
	}
	select {
	case f.Free <- b:
	default:
	}
}

// feedBatch is how many jobs a reader sends at a time: few channel
// operations, and the replay starts after the first few milliseconds.
const feedBatch = 4096

// next waits for the next batch; ok is false once the feed is closed (err
// then says why, nil at the workload's end).
func (f *Feed) next(ctx context.Context) (b []Job, ok bool, err error) {
	select {
	case b, ok = <-f.C:
		if !ok && f.Err != nil {
			err = f.Err()
		}
		return b, ok, err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// rest appends what remains of the feed to jobs.
func (f *Feed) rest(ctx context.Context, jobs []Job) ([]Job, error) {
	for {
		b, ok, err := f.next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return jobs, nil
		}
		jobs = append(jobs, b...)
	}
}

// ReadFeed reads an SWF trace on its own goroutine: the jobs keep passes
// (keep may be nil: every job), shaped one at a time by o (so not Workload
// 2, which chooses among all jobs: swf.ErrNeedsAll), converted as
// FromShaped does. A trace that cannot be opened is an error at once; one
// that breaks while read ends the feed with that error. Cancelling ctx
// stops the reader.
func ReadFeed(ctx context.Context, path string, keep func(*swf.Job) bool, o swf.ShapeOptions) (Feed, error) {
	sh, err := swf.NewShaper(o)
	if err != nil {
		return Feed{}, err
	}
	r, err := swf.Open(path)
	if err != nil {
		return Feed{}, err
	}
	ctx, stop := context.WithCancel(ctx)
	c := make(chan []Job, 4)
	free := make(chan []Job, 4)
	var mu sync.Mutex
	var readErr error
	go func() {
		defer close(c)
		defer r.Close()
		fail := func(err error) {
			mu.Lock()
			readErr = err
			mu.Unlock()
		}
		send := func(b []Job) bool {
			select {
			case c <- b:
				return true
			case <-ctx.Done():
				fail(ctx.Err())
				return false
			}
		}
		b := make([]Job, 0, feedBatch)
		var t0 int64
		first := true
		var j swf.Job // one for the whole trace: keep(&j) would move a fresh one to the heap per line
		for {
			var err error
			j, err = r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fail(fmt.Errorf("%s: %w", path, err))
				return
			}
			if keep != nil && !keep(&j) {
				continue
			}
			s, ok := sh.Next(&j)
			if !ok {
				break
			}
			if first {
				t0, first = s.Submit, false
			}
			b = append(b, fromShaped(t0, &s))
			if len(b) == feedBatch {
				if !send(b) {
					return
				}
				select { // a batch the replay is done with, else a new one
				case b = <-free:
					b = b[:0]
				default:
					b = make([]Job, 0, feedBatch)
				}
			}
		}
		if len(b) > 0 {
			send(b)
		}
	}()
	hint := r.SizeHint()
	if o.N > 0 {
		hint = min(hint, o.N)
	}
	return Feed{C: c, Free: free, Stop: stop, Total: o.N, Hint: hint, Err: func() error {
		mu.Lock()
		defer mu.Unlock()
		return readErr
	}}, nil
}
