package swf

import (
	"os"
	"path/filepath"
)

// WorkloadsDir finds the directory holding the PWA traces: $GRIDSUB_WORKLOADS
// if set, else ../shared/workloads relative to the repository root (the
// nearest ancestor of the working directory holding go.mod). It reports
// false when no such directory exists.
func WorkloadsDir() (string, bool) {
	if d := os.Getenv("GRIDSUB_WORKLOADS"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, true
		}
		return d, false
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			w := filepath.Join(filepath.Dir(d), "shared", "workloads")
			if st, err := os.Stat(w); err == nil && st.IsDir() {
				return w, true
			}
			return w, false
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}
