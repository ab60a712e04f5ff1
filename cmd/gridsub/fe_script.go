package main

import (
	"fmt"
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
	data, err := readBounded(path, batchscript.MaxScript)
	if err != nil {
		return nil, nil, err
	}
	spec, err := batchscript.Parse(path, data, opts)
	if err != nil {
		return nil, nil, err
	}
	return scriptJob(spec, path, sites)
}

// scriptJob is the job of a parsed script, checked against the sites.
func scriptJob(spec *batchscript.Spec, file string, sites []string) (*jobfile.Job, []string, error) {
	j := spec.Job()
	if spec.Partition != "" || spec.Account != "" {
		j.SiteOptions = map[string]jobfile.SiteOptions{}
		for _, s := range sites {
			j.SiteOptions[s] = jobfile.SiteOptions{Partition: spec.Partition, Account: spec.Account}
		}
	}
	var warns []string
	for _, w := range spec.Warnings {
		warns = append(warns, w.String(file))
	}
	if err := j.CheckSites(sites); err != nil {
		return nil, warns, err
	}
	return j, warns, nil
}

// readBounded reads at most limit bytes of a file, failing on a larger one.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes; a batch script may be at most %d", path, fi.Size(), limit)
	}
	buf := make([]byte, fi.Size()+1)
	n, err := f.Read(buf)
	if err != nil && n == 0 && fi.Size() > 0 {
		return nil, err
	}
	if int64(n) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes", path, limit)
	}
	return buf[:n], nil
}

// loadJobWarn is loadJob with a batch script's warnings.
func loadJobWarn(path string, sites []string) (*jobfile.Job, []string, error) {
	if isBatchScript(path) {
		return loadBatchScript(path, sites, batchscript.Options{Environ: os.Environ()})
	}
	j, err := loadJob(path, sites)
	return j, nil, err
}
