package main

import (
	"os"

	"github.com/gridsub/gridsub/bridge/batchscript"
	"github.com/gridsub/gridsub/bridge/jobfile"
)

// isBatchScript reports whether the file at path is a batch script (a #!
// line, #SBATCH or #PBS directives) rather than a YAML job file.
func isBatchScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, _ := f.Read(head)
	_, ok := batchscript.Detect(head[:n])
	return ok
}

// loadBatchScript reads a batch script as a job for the given sites: its
// directives translated (bridge/batchscript), the partition or queue and
// account asked for at every site. It returns the warnings of the
// directives accepted without effect.
func loadBatchScript(path string, sites []string, opts batchscript.Options) (*jobfile.Job, []string, error) {
	data, err := batchscript.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	spec, err := batchscript.Parse(path, data, opts)
	if err != nil {
		return nil, nil, err
	}
	return spec.JobFor(path, sites)
}

// loadJobWarn is loadJob with a batch script's warnings.
func loadJobWarn(path string, sites []string) (*jobfile.Job, []string, error) {
	if isBatchScript(path) {
		return loadBatchScript(path, sites, batchscript.Options{Environ: os.Environ()})
	}
	j, err := loadJob(path, sites)
	return j, nil, err
}
