package batchscript

import (
	"fmt"
	"os"

	"github.com/gridsub/gridsub/bridge/jobfile"
)

// ReadFile reads a script of at most MaxScript bytes: a regular file, not
// a larger one.
func ReadFile(path string) ([]byte, error) {
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
	if fi.Size() > MaxScript {
		return nil, fmt.Errorf("%s: %d bytes; a batch script may be at most %d", path, fi.Size(), MaxScript)
	}
	buf := make([]byte, fi.Size()+1)
	n, err := f.Read(buf)
	if err != nil && n == 0 && fi.Size() > 0 {
		return nil, err
	}
	if int64(n) > MaxScript {
		return nil, fmt.Errorf("%s: more than %d bytes", path, MaxScript)
	}
	return buf[:n], nil
}

// JobFor is the job of the script read from file, checked against the
// sites: the partition or queue and account asked for at every one of
// them. It returns the warnings of the directives accepted without
// effect, each naming file and line.
func (s *Spec) JobFor(file string, sites []string) (*jobfile.Job, []string, error) {
	j := s.Job()
	if s.Partition != "" || s.Account != "" {
		j.SiteOptions = map[string]jobfile.SiteOptions{}
		for _, site := range sites {
			j.SiteOptions[site] = jobfile.SiteOptions{Partition: s.Partition, Account: s.Account}
		}
	}
	var warns []string
	for _, w := range s.Warnings {
		warns = append(warns, w.String(file))
	}
	if err := j.CheckSites(sites); err != nil {
		return nil, warns, err
	}
	return j, warns, nil
}
