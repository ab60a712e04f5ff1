package sshsite

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"
)

// maxFrame bounds one request or reply on the command socket.
const maxFrame = 32 << 20

// request is one batch command run at the login node: its argv (argv[0]
// the command's name), the caller's working directory and the environment
// variables the dialects read.
type request struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`

	// stdin reads the command's standard input to its end, at most max
	// bytes (more is errStdinTooLarge); nil means the command has none.
	// Only a command that reads its stdin calls it (sbatch given no script
	// file, as the real one), so a command given a file never waits on a
	// stdin that stays open.
	stdin func(max int) ([]byte, error)
}

// reply is what the command prints and its exit code. On the command
// socket, a reply with NeedStdin > 0 is instead the site asking the
// client for its standard input (at most NeedStdin bytes), which the
// client sends as one stdinFrame before the real reply comes.
type reply struct {
	Stdout    []byte `json:"stdout"`
	Stderr    []byte `json:"stderr"`
	Code      int    `json:"code"`
	NeedStdin int    `json:"need_stdin,omitempty"`
}

// stdinFrame carries a command's standard input to the site; Over says it
// had more than the bytes asked for (and Stdin is then empty).
type stdinFrame struct {
	Stdin []byte `json:"stdin"`
	Over  bool   `json:"over,omitempty"`
}

// errStdinTooLarge: a command's standard input exceeds what it may read.
var errStdinTooLarge = errors.New("standard input too large")

// readBounded reads r to its end, at most max bytes (more is
// errStdinTooLarge).
func readBounded(r io.Reader, max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, errStdinTooLarge
	}
	return b, nil
}

// onceStdin makes read answer once (a second call gets the same bytes).
func onceStdin(read func(max int) ([]byte, error)) func(max int) ([]byte, error) {
	var (
		done bool
		b    []byte
		err  error
	)
	return func(max int) ([]byte, error) {
		if !done {
			done = true
			b, err = read(max)
		}
		return b, err
	}
}

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", len(b), maxFrame)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b)))); err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func readFrame(r io.Reader, v any) error {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > maxFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// envPassed are the variables a command sends to the site.
var envPassed = []string{"SLURM_TIME_FORMAT", "USER", "PBS_JOBID", "SLURM_JOB_ID"}

// CmdMain is the client side of a site's batch command: args are
// <socket> <command> <args...> (what a bin/ stub passes). It sends the
// command to the site, prints its output and returns its exit code. The
// gridsub binary runs it as `gridsub simsite cmd`.
func CmdMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: simsite cmd <socket> <command> [args...]")
		return 2
	}
	sock, name := args[0], args[1]
	cwd, _ := os.Getwd()
	req := request{Argv: append([]string{name}, args[2:]...), Cwd: cwd, Env: map[string]string{}}
	for _, k := range envPassed {
		if v, ok := os.LookupEnv(k); ok {
			req.Env[k] = v
		}
	}
	c, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		// What a batch client prints when its server is gone.
		fmt.Fprintf(os.Stderr, "%s: cannot connect to server: %v\n", name, err)
		return 1
	}
	defer c.Close()
	if err := writeFrame(c, req); err != nil {
		fmt.Fprintf(os.Stderr, "%s: communication failure: %v\n", name, err)
		return 1
	}
	br := bufio.NewReader(c)
	for {
		var rep reply
		if err := readFrame(br, &rep); err != nil {
			fmt.Fprintf(os.Stderr, "%s: communication failure: %v\n", name, err)
			return 1
		}
		if rep.NeedStdin > 0 {
			// The command reads its stdin (sbatch without a script
			// file): send it, bounded.
			b, err := readBounded(os.Stdin, rep.NeedStdin)
			f := stdinFrame{Stdin: b, Over: errors.Is(err, errStdinTooLarge)}
			if err != nil && !f.Over {
				fmt.Fprintf(os.Stderr, "%s: reading standard input: %v\n", name, err)
				return 1
			}
			if err := writeFrame(c, f); err != nil {
				fmt.Fprintf(os.Stderr, "%s: communication failure: %v\n", name, err)
				return 1
			}
			continue
		}
		os.Stdout.Write(rep.Stdout)
		os.Stderr.Write(rep.Stderr)
		return rep.Code
	}
}

func (s *Site) serveCmds() {
	for {
		c, err := s.cmdLn.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Minute))
			br := bufio.NewReader(c)
			var req request
			if err := readFrame(br, &req); err != nil || len(req.Argv) == 0 {
				return
			}
			req.stdin = onceStdin(func(max int) ([]byte, error) {
				if err := writeFrame(c, reply{NeedStdin: max}); err != nil {
					return nil, err
				}
				var f stdinFrame
				if err := readFrame(br, &f); err != nil {
					return nil, err
				}
				if f.Over {
					return nil, errStdinTooLarge
				}
				return f.Stdin, nil
			})
			writeFrame(c, s.runSafe(req))
		}()
	}
}

// cmdFunc answers one batch command of a dialect: a is its arguments
// (req.Argv without the program), the answer goes to o, the exit code is
// returned.
type cmdFunc func(s *Site, o *out, a []string, req request) int

// run dispatches one batch command to the dialect.
func (s *Site) run(req request) reply {
	name := path.Base(req.Argv[0])
	s.mu.Lock()
	s.batch[name]++
	s.mu.Unlock()
	o := &out{}
	cmds := pbsAnswers
	if s.cfg.Dialect == SLURM {
		cmds = slurmAnswers
	}
	code := 127
	if ch := s.hangOf(name); ch != nil {
		<-ch // Hang: the command never answers while it is on
	}
	if s.faults.limited.Load() {
		// Overloaded or rate limiting (RateLimit): every batch command is
		// turned away with the batch system's own words.
		if s.cfg.Dialect == SLURM {
			code = o.errf(1, "%s: error: Unable to contact slurm controller: RPC rate limit exceeded, please retry later", name)
		} else {
			code = o.errf(15010, "Connection refused\n%s: cannot connect to server %s (errno=15010)", name, s.cfg.Name)
		}
		return reply{Stdout: o.stdout.Bytes(), Stderr: o.stderr.Bytes(), Code: code}
	}
	if f, ok := cmds[name]; ok {
		code = f(s, o, req.Argv[1:], req)
	} else {
		o.errf(127, "%s: command not found", name)
	}
	if o.stdout.over || o.stderr.over {
		return tooLong(name)
	}
	return reply{Stdout: o.stdout.Bytes(), Stderr: o.stderr.Bytes(), Code: code}
}

// runSafe is run with a panic turned into the command's failure (the site
// keeps serving).
func (s *Site) runSafe(req request) (rep reply) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("batch command panicked", "argv", req.Argv, "panic", r)
			rep = reply{Stderr: []byte(fmt.Sprintf("%s: internal error of the simulated site\n", req.Argv[0])), Code: 1}
		}
	}()
	return s.run(req)
}

// RateLimit makes the site turn away every batch command while on, as an
// overloaded or rate-limiting controller does: SLURM's "RPC rate limit
// exceeded", PBS's connection refusal (errno 15010). The commands still
// count in Stats.Batch.
func (s *Site) RateLimit(on bool) { s.faults.limited.Store(on) }

// Hang makes every run of the batch command name (e.g. "sbatch",
// "squeue") block while on, as a command whose controller accepts the
// connection and never answers; turning it off lets the blocked runs go
// on.
func (s *Site) Hang(name string, on bool) {
	f := &s.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hangs == nil {
		f.hangs = map[string]chan struct{}{}
	}
	ch, hung := f.hangs[name]
	switch {
	case on && !hung:
		f.hangs[name] = make(chan struct{})
	case !on && hung:
		close(ch)
		delete(f.hangs, name)
	}
}

func (s *Site) hangOf(name string) chan struct{} {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.hangs[name]
}

// faults are the misbehaviours a test turns on: RateLimit, Hang.
type faults struct {
	limited atomic.Bool
	mu      sync.Mutex
	hangs   map[string]chan struct{} // the commands that block, until their channel closes
}
