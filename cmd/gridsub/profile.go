package main

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
)

// Profiling the daemon (docs/simsite.md, the load test) and the simulator:
// with GRIDSUB_CPUPROFILE=<file> `gridsub serve` writes a CPU profile of its
// whole run to file when it stops (`gridsub sim`: of the experiment's runs,
// when they end), with GRIDSUB_MEMPROFILE=<file> a heap profile (in-use and
// allocated) at that moment. Read them with `go tool pprof <gridsub binary>
// <file>`. Unset, nothing is profiled.
const (
	envCPUProfile = "GRIDSUB_CPUPROFILE"
	envMemProfile = "GRIDSUB_MEMPROFILE"
)

// startProfiles starts what the environment asks for and returns the
// function that writes the profiles (call it once, when the daemon stops).
// A profile that cannot be written is logged, never fatal.
func startProfiles(log *slog.Logger) (stop func()) {
	var cpu *os.File
	if p := os.Getenv(envCPUProfile); p != "" {
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			log.Warn("no CPU profile", "env", envCPUProfile, "err", err)
		} else {
			cpu = f
		}
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				log.Warn("CPU profile", "err", err)
			}
		}
		if p := os.Getenv(envMemProfile); p != "" {
			runtime.GC()
			f, err := os.Create(p)
			if err == nil {
				err = pprof.WriteHeapProfile(f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				log.Warn("no heap profile", "env", envMemProfile, "err", err)
			}
		}
	}
}
