// Command gridsub-fe is gridsub's SLURM and PBS front-ends (sbatch,
// squeue, sacct, scancel, scontrol, qsub, qstat, qdel) and `status
// --snakemake ID` in a small binary: a workflow engine starts one process
// per submission and per poll, and this one starts in a few milliseconds
// where gridsub, which links every site, store and policy, takes several
// times longer. `gridsub shims install DIR` links DIR/sbatch, DIR/squeue...
// to it when it lies beside gridsub.
//
// It answers by itself when GRIDSUB_SOCKET names the daemon's socket (and
// GRIDSUB_URL is not set) and the call is one frontend.Match takes; every
// other call (--help, a daemon found through the configuration or over
// TCP, any other gridsub command) runs gridsub itself, found beside this
// executable or on the PATH, with the same arguments, so that both give
// the same answers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/gridsub/gridsub/frontend"
)

func main() {
	args := os.Args[1:]
	if name := filepath.Base(os.Args[0]); slices.Contains(frontend.Tools, name) {
		args = append([]string{name}, args...) // a link named sbatch is `gridsub sbatch`
	}
	if os.Getenv(frontend.EnvSocket) != "" && os.Getenv(frontend.EnvURL) == "" {
		if run, ok := frontend.Match(args); ok {
			os.Exit(frontend.Exit(run(context.Background(), &frontend.Env{Stdout: os.Stdout, Stderr: os.Stderr}), os.Stderr))
		}
	}
	gridsub, err := fullGridsub()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gridsub-fe: %v\n", err)
		os.Exit(3)
	}
	err = syscall.Exec(gridsub, append([]string{gridsub}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "gridsub-fe: running %s: %v\n", gridsub, err)
	os.Exit(3)
}

// fullGridsub finds gridsub: beside this executable (links resolved),
// else on the PATH.
func fullGridsub() (string, error) {
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			p := filepath.Join(filepath.Dir(exe), "gridsub")
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath("gridsub")
	if err != nil {
		return "", fmt.Errorf("this call needs gridsub itself (set %s to the daemon's socket for the front-ends alone), and no gridsub is beside this executable or on the PATH", frontend.EnvSocket)
	}
	return p, nil
}
