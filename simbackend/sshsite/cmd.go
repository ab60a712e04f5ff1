package sshsite

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path"
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
}

// reply is what the command prints and its exit code.
type reply struct {
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	Code   int    `json:"code"`
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
	var rep reply
	if err := readFrame(bufio.NewReader(c), &rep); err != nil {
		fmt.Fprintf(os.Stderr, "%s: communication failure: %v\n", name, err)
		return 1
	}
	os.Stdout.Write(rep.Stdout)
	os.Stderr.Write(rep.Stderr)
	return rep.Code
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
			var req request
			if err := readFrame(bufio.NewReader(c), &req); err != nil || len(req.Argv) == 0 {
				return
			}
			writeFrame(c, s.runSafe(req))
		}()
	}
}

// run dispatches one batch command to the dialect.
func (s *Site) run(req request) reply {
	name := path.Base(req.Argv[0])
	s.mu.Lock()
	s.batch[name]++
	s.mu.Unlock()
	o := &out{}
	var code int
	if s.cfg.Dialect == SLURM {
		code = s.slurm(o, name, req)
	} else {
		code = s.pbs(o, name, req)
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
