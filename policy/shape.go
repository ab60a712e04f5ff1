package policy

import (
	"strconv"
	"strings"
)

// NodeShape is what one node has (a site's Shape) or what a job asks of
// each of its nodes (a Job's PerNode).
//
// For a site, Cores and MemBytes of 0 mean "not known" (the site's batch
// system did not say, and the site is not ruled out for them); GPUs of 0
// means the nodes have none. For a job, 0 means nothing asked.
type NodeShape struct {
	Cores    int   // CPU cores per node
	MemBytes int64 // memory per node, bytes
	GPUs     int   // GPUs per node
}

// Zero reports whether the shape asks (or says) nothing.
func (n NodeShape) Zero() bool { return n == NodeShape{} }

// Lacks says why a node of shape n cannot hold a job asking ask per node
// ("2 cores per node, the job asks 4; no GPUs, the job asks 1"), or ""
// when it can. Unknown site values (0 cores, 0 memory) never rule a site
// out: its batch system has the last word, and a refusal there makes the
// broker try another placement.
func (n NodeShape) Lacks(ask NodeShape) string {
	var why []string
	if ask.Cores > 0 && n.Cores > 0 && ask.Cores > n.Cores {
		why = append(why, strconv.Itoa(n.Cores)+" cores per node, the job asks "+strconv.Itoa(ask.Cores))
	}
	if ask.MemBytes > 0 && n.MemBytes > 0 && ask.MemBytes > n.MemBytes {
		why = append(why, FormatBytes(n.MemBytes)+" memory per node, the job asks "+FormatBytes(ask.MemBytes))
	}
	if ask.GPUs > 0 && ask.GPUs > n.GPUs {
		if n.GPUs == 0 {
			why = append(why, "no GPUs, the job asks "+strconv.Itoa(ask.GPUs)+" per node")
		} else {
			why = append(why, strconv.Itoa(n.GPUs)+" GPUs per node, the job asks "+strconv.Itoa(ask.GPUs))
		}
	}
	return strings.Join(why, "; ")
}

// String is the shape in a few words: "4 cores, 8GiB, 2 GPUs" (unknown or
// zero parts left out; "any" when nothing is set).
func (n NodeShape) String() string {
	var p []string
	if n.Cores > 0 {
		p = append(p, strconv.Itoa(n.Cores)+" cores")
	}
	if n.MemBytes > 0 {
		p = append(p, FormatBytes(n.MemBytes))
	}
	if n.GPUs > 0 {
		p = append(p, strconv.Itoa(n.GPUs)+" GPUs")
	}
	if len(p) == 0 {
		return "any"
	}
	return strings.Join(p, ", ")
}

// FormatBytes writes a byte count in the largest binary unit that divides
// it exactly ("4GiB", "1536MiB", "100B").
func FormatBytes(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	u := 0
	for u < len(units)-1 && b >= 1024 && b%1024 == 0 {
		b /= 1024
		u++
	}
	return strconv.FormatInt(b, 10) + units[u]
}

// Misfits lists, for each site j may use (Allowed, or all) whose node
// shape lacks what j asks per node, the site's index and why: the sites
// a planner must never choose for j. Nil when j asks nothing per node.
func (s *Snapshot) Misfits(j *Job) []Misfit {
	if j.PerNode.Zero() {
		return nil
	}
	var out []Misfit
	check := func(i int) {
		if i < 0 || i >= len(s.Sites) {
			return
		}
		if why := s.Sites[i].Shape.Lacks(j.PerNode); why != "" {
			out = append(out, Misfit{Site: i, Why: why})
		}
	}
	if j.Allowed == nil {
		for i := range s.Sites {
			check(i)
		}
	} else {
		for _, i := range j.Allowed {
			check(i)
		}
	}
	return out
}

// Misfit is a site ruled out for a job by its node shape.
type Misfit struct {
	Site int
	Why  string
}
