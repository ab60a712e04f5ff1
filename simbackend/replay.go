package simbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gridsub/gridsub/simbackend/swf"
)

// ReplayJob is one job of a single-site replay, times in integer seconds
// from the trace's origin.
type ReplayJob struct {
	ID       int64
	Submit   int64
	Start    int64
	End      int64
	Width    int
	Estimate int64
	Run      int64
}

// Wait is Start - Submit.
func (j ReplayJob) Wait() int64 { return j.Start - j.Submit }

// ReplayResult is a finished replay: the jobs in trace order and the usual
// aggregates.
type ReplayResult struct {
	Procs int
	Jobs  []ReplayJob
	// Read and Kept count the trace's job lines and those the filter kept.
	Read, Kept int
	Summary    Summary
}

// ReplayOptions configure ReplayEASY.
type ReplayOptions struct {
	EASY EASYOptions
	// Filter, when non-nil, filters and repairs each job before it is
	// replayed (swf.StrongFilter reproduces the reference input).
	Filter func(*swf.Job) bool
}

// ReplayEASY replays an SWF trace (plain or gzip, streamed) on one site of
// procs processors under the package's EASY scheduler, driven by the
// discrete-event engine as fast as possible. Each job asks for Width()
// processors with estimate ReqTime and runs for Run seconds (the filter is
// expected to cap Run at ReqTime; a job running past its estimate is killed
// at it). With opts.EASY.ReferenceCompatible and swf.StrongFilter{338} on
// CTC-SP2 this reproduces the pyss reference schedule.
func ReplayEASY(ctx context.Context, r io.Reader, procs int, opts ReplayOptions) (*ReplayResult, error) {
	if procs < 1 {
		return nil, fmt.Errorf("simbackend: replay: procs must be >= 1, got %d", procs)
	}
	rd, err := swf.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("simbackend: replay: %w", err)
	}
	defer rd.Close()

	const sec = int64(time.Second)
	e := NewEngine(time.Unix(0, 0).UTC(), 0)
	res := &ReplayResult{Procs: procs}
	// Size the job table from the header when it says how many jobs follow.
	if n, err := rd.Header.Int("MaxRecords"); err == nil && n > 0 && n < 1<<22 {
		res.Jobs = make([]ReplayJob, 0, n)
	} else if n, err := rd.Header.Int("MaxJobs"); err == nil && n > 0 && n < 1<<22 {
		res.Jobs = make([]ReplayJob, 0, n)
	}
	endClass := ClassEarly
	if opts.EASY.ReferenceCompatible {
		endClass = ClassLate
	}
	// One allocation per job for the record and its event (reused for the
	// submission and then the end), plus one closure.
	type rjob struct {
		sjob
		ev      Event
		idx     int
		run     int64
		started bool
	}
	var sched *easy
	sched = newEASY(procs, opts.EASY, func(j *sjob, now int64) {
		rj := j.owner.(*rjob)
		res.Jobs[rj.idx].Start = now / sec
		rj.started = true
		e.mu.Lock()
		e.scheduleInto(&rj.ev, now+min(rj.run, j.est), endClass)
		e.mu.Unlock()
	})

	// A reader goroutine decompresses, parses, filters and checks the trace
	// in chunks while this one simulates: on two cores the replay takes
	// about as long as the slower of the two. The job order is the file's,
	// so the result does not depend on the interleaving.
	type chunk struct {
		jobs []swf.Job
		err  error
	}
	const chunkLen = 1024
	chunks := make(chan chunk, 4)
	spare := make(chan []swf.Job, 6)
	done := make(chan struct{})
	finished := make(chan struct{})
	var nRead, nKept int // written by the reader; read once chunks is closed
	go func() {
		defer close(finished)
		defer close(chunks)
		send := func(c chunk) bool {
			select {
			case chunks <- c:
				return true
			case <-done:
				return false
			}
		}
		buf := make([]swf.Job, 0, chunkLen)
		prev := int64(-1 << 62)
		for {
			sj, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				send(chunk{err: err})
				return
			}
			nRead++
			if opts.Filter != nil && !opts.Filter(&sj) {
				continue
			}
			w := sj.Width()
			switch {
			case w < 1 || int(w) > procs:
				err = fmt.Errorf("line %d: job %d asks for %d processors; the site has 1..%d (filter the trace)", rd.Line(), sj.ID, w, procs)
			case sj.ReqTime <= 0:
				err = fmt.Errorf("line %d: job %d has no runtime estimate (requested time %d); filter the trace", rd.Line(), sj.ID, sj.ReqTime)
			case sj.Run < 0:
				err = fmt.Errorf("line %d: job %d has a negative run time %d", rd.Line(), sj.ID, sj.Run)
			case sj.Submit < prev:
				err = fmt.Errorf("line %d: job %d submitted at %d, before the previous job: submit times must not decrease", rd.Line(), sj.ID, sj.Submit)
			case sj.Submit < 0 || sj.Submit > 1<<32 || sj.ReqTime > 1<<32:
				err = fmt.Errorf("line %d: job %d has times out of range (submit %d, requested %d)", rd.Line(), sj.ID, sj.Submit, sj.ReqTime)
			}
			if err != nil {
				send(chunk{err: err})
				return
			}
			prev = sj.Submit
			nKept++
			buf = append(buf, sj)
			if len(buf) == chunkLen {
				if !send(chunk{jobs: buf}) {
					return
				}
				select {
				case buf = <-spare:
					buf = buf[:0]
				default:
					buf = make([]swf.Job, 0, chunkLen)
				}
			}
		}
		if len(buf) > 0 {
			send(chunk{jobs: buf})
		}
	}()
	defer func() {
		close(done)
		<-finished
	}()

	var readErr error
	var cur []swf.Job
	var pos int
	var next func()
	fire := func(rj *rjob) {
		t := e.nowNS()
		if !rj.started {
			sched.submit(&rj.sjob, t)
			next()
			return
		}
		res.Jobs[rj.idx].End = t / sec
		sched.end(&rj.sjob, t)
	}
	// next takes the following job of the stream and schedules its
	// submission.
	next = func() {
		if pos == len(cur) {
			if cur != nil {
				select {
				case spare <- cur:
				default:
				}
			}
			c, ok := <-chunks
			if !ok {
				cur = nil
				return
			}
			if c.err != nil {
				readErr = c.err
				return
			}
			cur, pos = c.jobs, 0
		}
		sj := &cur[pos]
		pos++
		w := int(sj.Width())
		idx := len(res.Jobs)
		res.Jobs = append(res.Jobs, ReplayJob{ID: sj.ID, Submit: sj.Submit, Width: w, Estimate: sj.ReqTime, Run: sj.Run, Start: -1, End: -1})
		rj := &rjob{sjob: sjob{width: w, est: sj.ReqTime * sec}, idx: idx, run: sj.Run * sec}
		rj.owner = rj
		rj.ev.fn = func() { fire(rj) }
		e.mu.Lock()
		e.scheduleInto(&rj.ev, sj.Submit*sec, ClassDefault)
		e.mu.Unlock()
	}
	next()
	for n := 0; ; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if readErr != nil || !e.Step() {
			break
		}
	}
	if readErr != nil {
		return nil, fmt.Errorf("simbackend: replay: %w", readErr)
	}
	res.Read, res.Kept = nRead, nKept // the reader is done: chunks was closed
	for _, j := range res.Jobs {
		if j.End < 0 {
			return nil, errors.New("simbackend: replay: a job never ended (scheduler bug)")
		}
	}
	res.Summary = SummarizeReplay(res.Jobs, procs)
	return res, nil
}

// SummarizeReplay computes the metrics of a single-site replay (the same
// accumulator as Compute, fed with integer seconds).
func SummarizeReplay(jobs []ReplayJob, procs int) Summary {
	a := newAccum(1)
	for _, j := range jobs {
		a.add(float64(j.Submit), float64(j.Start), float64(j.End), j.Width, nil)
	}
	return a.summary([]SiteCapacity{{Nodes: procs}}, len(jobs), 0)
}

// ReferenceMatch compares a replay with a reference schedule in SWF (field 3
// holding the simulated wait, as pyss writes it).
type ReferenceMatch struct {
	Jobs      int     // jobs in the replay
	Same      int     // jobs whose start time equals the reference's
	Missing   int     // replay jobs absent from the reference
	Percent   float64 // 100 × Same / Jobs
	FirstDiff int64   // id of the first job (in trace order) that differs; -1 if none
}

// MatchReference reads a reference schedule (plain or gzip SWF) and compares
// start times (submit + wait) job by job, by job id.
func MatchReference(res *ReplayResult, ref io.Reader) (ReferenceMatch, error) {
	rd, err := swf.NewReader(ref)
	if err != nil {
		return ReferenceMatch{}, fmt.Errorf("simbackend: reference: %w", err)
	}
	defer rd.Close()
	starts := make(map[int64]int64, len(res.Jobs))
	for {
		j, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ReferenceMatch{}, fmt.Errorf("simbackend: reference: %w", err)
		}
		starts[j.ID] = j.Submit + j.Wait
	}
	m := ReferenceMatch{Jobs: len(res.Jobs), FirstDiff: -1}
	for _, j := range res.Jobs {
		s, ok := starts[j.ID]
		switch {
		case !ok:
			m.Missing++
		case s == j.Start:
			m.Same++
			continue
		}
		if m.FirstDiff < 0 {
			m.FirstDiff = j.ID
		}
	}
	if m.Jobs > 0 {
		m.Percent = 100 * float64(m.Same) / float64(m.Jobs)
	}
	return m, nil
}
