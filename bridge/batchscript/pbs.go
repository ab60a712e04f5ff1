package batchscript

import (
	"strings"
)

var pbsOpts []opt

func init() {
	pbsOpts = []opt{
		{"", 'N', true, func(p *parser, ln int, dir, v string) { p.name(ln, dir, v) }},
		{"", 'l', true, func(p *parser, ln int, dir, v string) { p.pbsResources(ln, dir, v) }},
		{"", 'q', true, func(p *parser, ln int, dir, v string) {
			if q, server, ok := strings.Cut(v, "@"); ok {
				p.fail(ln, dir, ErrUnsupported, "a queue at a named server (%s) is not supported; gridsub picks the site: give -q %s", server, q)
				return
			}
			p.s.Partition = p.word(ln, dir, v)
		}},
		{"", 'A', true, func(p *parser, ln int, dir, v string) { p.s.Account = p.word(ln, dir, v) }},
		{"", 'o', true, func(p *parser, ln int, dir, v string) { p.s.Stdout = p.pbsPath(ln, dir, v) }},
		{"", 'e', true, func(p *parser, ln int, dir, v string) { p.s.Stderr = p.pbsPath(ln, dir, v) }},
		{"", 'j', true, func(p *parser, ln int, dir, v string) {
			switch v {
			case "oe", "eo":
				p.joined = true
			case "n":
				p.joined = false
			default:
				p.fail(ln, dir, ErrValue, "%q: want oe, eo or n", v)
			}
		}},
		{"", 'J', true, func(p *parser, ln int, dir, v string) { p.s.Array = p.pbsArray(ln, dir, v) }}, // PBS Pro
		{"", 't', true, func(p *parser, ln int, dir, v string) { p.s.Array = p.array(ln, dir, v) }},    // Torque
		{"", 'W', true, func(p *parser, ln int, dir, v string) { p.pbsW(ln, dir, v) }},
		{"", 'm', true, func(p *parser, ln int, dir, v string) {
			p.s.MailTypes = nil
			for _, c := range v {
				switch c {
				case 'a':
					p.s.MailTypes = appendOnce(p.s.MailTypes, "FAIL")
				case 'b':
					p.s.MailTypes = appendOnce(p.s.MailTypes, "BEGIN")
				case 'e':
					p.s.MailTypes = appendOnce(p.s.MailTypes, "END")
				case 'n':
					if len(v) > 1 {
						p.fail(ln, dir, ErrValue, "%q: n (no mail) goes alone", v)
					}
				default:
					p.fail(ln, dir, ErrValue, "%q: want letters of abe, or n", v)
					return
				}
			}
		}},
		{"", 'M', true, func(p *parser, ln int, dir, v string) { p.mailUser(ln, dir, v) }},
		{"", 'V', false, func(p *parser, ln int, dir, _ string) { p.export, p.exportLine = mergeExport(p.export, "ALL"), ln }},
		{"", 'v', true, func(p *parser, ln int, dir, v string) { p.export, p.exportLine = mergeExport(p.export, v), ln }},
		{"", 'd', true, func(p *parser, ln int, dir, v string) { p.s.Chdir = p.path(ln, dir, v) }}, // Torque
		{"", 'w', true, func(p *parser, ln int, dir, v string) { p.s.Chdir = p.path(ln, dir, v) }}, // Torque
		{"", 'S', true, func(p *parser, ln int, dir, v string) {
			if strings.Contains(v, "@") || strings.Contains(v, ",") {
				p.fail(ln, dir, ErrUnsupported, "one shell path, without @host")
				return
			}
			if !strings.HasPrefix(v, "/") {
				p.fail(ln, dir, ErrValue, "%q: give the shell's absolute path, like /bin/bash", v)
				return
			}
			p.s.Interpreter = v
		}},
		{"", 'r', true, harmless("gridsub requeues a job a site loses by itself; the job's own failure is final")},
		{"", 'k', true, harmless("output files are written where -o and -e say, or to the site's job log")},
		{"", 'p', true, harmless("gridsub's queue order is its policy's; a priority is not passed on")},
		{"", 'c', true, harmless("checkpointing is the site's")},
		{"", 'a', true, unsupported("gridsub does not delay a start; use a job file's scheduling.reservation")},
		{"", 'h', false, unsupported("submitting held is not supported")},
		{"", 'I', false, unsupported("interactive jobs are not supported")},
		{"", 'X', false, unsupported("X11 forwarding is not supported")},
		{"", 'C', true, unsupported("changing the directive prefix is not supported")},
		{"", 'P', true, unsupported("a PBS project is a site's own name; use -A for an account")},
		{"", 'u', true, unsupported("jobs run as the site account gridsub logs in as")},
		{"", 'z', false, func(*parser, int, string, string) {}},
	}
}

func (p *parser) pbsOptions(ln int, words []string) {
	for i := 0; i < len(words); i++ {
		w := words[i]
		if len(w) < 2 || w[0] != '-' || w[1] == '-' {
			p.fail(ln, w, ErrValue, "not a qsub option (a directive's words are options like -l walltime=01:00:00)")
			continue
		}
		o := findShort(pbsOpts, w[1])
		if o == nil {
			p.fail(ln, w, ErrUnsupported, "unknown qsub option")
			continue
		}
		val, dir := "", w
		switch {
		case o.arg && len(w) > 2:
			val = w[2:]
		case o.arg:
			if i+1 >= len(words) {
				p.fail(ln, w, ErrValue, "needs a value")
				continue
			}
			i++
			val, dir = words[i], w+" "+words[i]
		case len(w) > 2:
			p.fail(ln, w, ErrValue, "takes no value")
			continue
		}
		o.do(p, ln, dir, val)
	}
}

// pbsResources reads -l's comma-separated NAME=VALUE list.
func (p *parser) pbsResources(ln int, dir, v string) {
	for _, kv := range strings.Split(v, ",") { // ':' and '+' belong to select= and nodes=
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			p.fail(ln, dir, ErrValue, "%q: want NAME=VALUE", kv)
			continue
		}
		switch k {
		case "walltime":
			d, err := PBSTime(val)
			if err != nil {
				p.fail(ln, dir, ErrValue, "%v", err)
				continue
			}
			p.s.Walltime, p.s.WalltimeSet = d, true
		case "select":
			p.pbsSelect(ln, dir, val)
		case "nodes":
			p.torqueNodes(ln, dir, val)
		case "ncpus", "ppn":
			if n, ok := p.count(ln, dir, val, 1, 100000); ok {
				p.s.TasksPerNode, p.s.CPUsPerTask = n, 1
			}
		case "mem":
			if n, ok := p.pbsSize(ln, dir, val); ok {
				p.memTotal, p.s.MemPerNode, p.memPerCPU = n, 0, 0
			}
		case "pmem", "pvmem":
			if n, ok := p.pbsSize(ln, dir, val); ok {
				p.memPerCPU, p.memTotal, p.s.MemPerNode = n, 0, 0
			}
		case "ngpus", "gpus":
			if n, ok := p.count(ln, dir, val, 1, 64); ok {
				p.s.GPUsPerNode, p.gpuLine = n, ln
			}
		case "place":
			p.warn(ln, dir, "placement ("+val+") is the site's: gridsub asks for whole chunks per node")
		case "cput", "vmem", "file":
			p.warn(ln, dir, k+" is a limit the site enforces by its own defaults; not passed on")
		case "host", "vnode", "software", "arch", "feature":
			p.fail(ln, dir, ErrUnsupported, "%s names are a site's own; gridsub picks the site", k)
		default:
			p.fail(ln, dir, ErrUnsupported, "resource %q is not supported; gridsub knows walltime, select, nodes, ncpus, ppn, mem, pmem, ngpus", k)
		}
	}
}

// pbsSelect reads PBS Pro's select=N:ncpus=M:mem=X:ngpus=G[:mpiprocs=..].
func (p *parser) pbsSelect(ln int, dir, v string) {
	if strings.Contains(v, "+") {
		p.fail(ln, dir, ErrUnsupported, "chunks of different shapes (%s) are not supported; gridsub asks for N nodes of one shape", v)
		return
	}
	parts := strings.Split(v, ":")
	n := 1
	start := 0
	if !strings.Contains(parts[0], "=") {
		var ok bool
		if n, ok = p.count(ln, dir, parts[0], 1, 100000); !ok {
			return
		}
		start = 1
	}
	p.s.Nodes, p.nodesSet = n, true
	for _, kv := range parts[start:] {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			p.fail(ln, dir, ErrValue, "%q: want NAME=VALUE in a chunk", kv)
			continue
		}
		switch k {
		case "ncpus":
			if c, ok := p.count(ln, dir, val, 1, 100000); ok {
				p.s.TasksPerNode, p.s.CPUsPerTask = c, 1
			}
		case "mpiprocs":
			if c, ok := p.count(ln, dir, val, 1, 100000); ok {
				p.s.NTasks, p.ntasksSet = c*n, true
			}
		case "ompthreads":
			if _, ok := p.count(ln, dir, val, 1, 100000); ok {
				p.warn(ln, dir, "ompthreads: set OMP_NUM_THREADS in the script; gridsub sizes the node by ncpus")
			}
		case "mem":
			if m, ok := p.pbsSize(ln, dir, val); ok {
				p.s.MemPerNode, p.memTotal, p.memPerCPU = m, 0, 0
			}
		case "ngpus":
			if g, ok := p.count(ln, dir, val, 1, 64); ok {
				p.s.GPUsPerNode, p.gpuLine = g, ln
			}
		case "host", "vnode", "model", "arch", "aoe":
			p.fail(ln, dir, ErrUnsupported, "%s names are a site's own; gridsub picks the site", k)
		default:
			p.fail(ln, dir, ErrUnsupported, "chunk resource %q is not supported; gridsub knows ncpus, mpiprocs, ompthreads, mem, ngpus", k)
		}
	}
}

// torqueNodes reads Torque's nodes=N:ppn=M[:gpus=G].
func (p *parser) torqueNodes(ln int, dir, v string) {
	if strings.Contains(v, "+") {
		p.fail(ln, dir, ErrUnsupported, "node groups of different shapes (%s) are not supported", v)
		return
	}
	parts := strings.Split(v, ":")
	n, ok := p.count(ln, dir, parts[0], 1, 100000)
	if !ok {
		if parts[0] != "" && (parts[0][0] < '0' || parts[0][0] > '9') {
			p.errs = p.errs[:len(p.errs)-1]
			p.fail(ln, dir, ErrUnsupported, "node names (%s) are a site's own; give a count: nodes=1:ppn=M", parts[0])
		}
		return
	}
	p.s.Nodes, p.nodesSet = n, true
	for _, kv := range parts[1:] {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			p.fail(ln, dir, ErrUnsupported, "node property %q is a site's own name", kv)
			continue
		}
		switch k {
		case "ppn":
			if c, ok := p.count(ln, dir, val, 1, 100000); ok {
				p.s.TasksPerNode, p.s.CPUsPerTask = c, 1
			}
		case "gpus":
			if g, ok := p.count(ln, dir, val, 1, 64); ok {
				p.s.GPUsPerNode, p.gpuLine = g, ln
			}
		default:
			p.fail(ln, dir, ErrUnsupported, "%q is not supported in nodes=; gridsub knows ppn and gpus", k)
		}
	}
}

// pbsSize reads a PBS size: a number with b, kb, mb, gb, tb (or w
// units refused); a bare number is bytes.
func (p *parser) pbsSize(ln int, dir, v string) (int64, bool) {
	n, err := PBSSize(v)
	if err != nil {
		p.fail(ln, dir, ErrValue, "%v", err)
		return 0, false
	}
	return n, true
}

// pbsPath reads -o/-e: [host:]path; a host is refused.
func (p *parser) pbsPath(ln int, dir, v string) string {
	if h, _, ok := strings.Cut(v, ":"); ok && !strings.Contains(h, "/") {
		p.fail(ln, dir, ErrUnsupported, "a path on a named host (%s) is not supported; outputs stay at the site or are fetched by gridsub", h)
		return ""
	}
	return p.path(ln, dir, v)
}

// pbsArray reads PBS Pro's -J X-Y[:Z][%N].
func (p *parser) pbsArray(ln int, dir, v string) string {
	if strings.Contains(v, ",") {
		p.fail(ln, dir, ErrValue, "%q: PBS Pro's -J takes one range X-Y[:Z][%%N]", v)
		return ""
	}
	return p.array(ln, dir, v)
}

// pbsW reads -W ATTR=VALUE: depend= is translated, the rest refused.
func (p *parser) pbsW(ln int, dir, v string) {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		p.fail(ln, dir, ErrValue, "%q: want ATTR=VALUE, like depend=afterok:1234", v)
		return
	}
	switch k {
	case "depend":
		for _, d := range strings.Split(val, ",") {
			// PBS ids are "1234.server"; the number is what gridsub's
			// qsub printed.
			parts := strings.Split(d, ":")
			for i := 1; i < len(parts); i++ {
				parts[i], _, _ = strings.Cut(parts[i], ".")
			}
			p.dep(ln, dir, strings.Join(parts, ":"))
		}
	case "umask":
		p.warn(ln, dir, "output files get the site account's umask")
	case "group_list", "sandbox", "stagein", "stageout", "block", "run_count", "release_wait":
		p.fail(ln, dir, ErrUnsupported, "-W %s is not supported", k)
	default:
		p.fail(ln, dir, ErrUnsupported, "-W %s is not supported; gridsub knows depend= and umask=", k)
	}
}

// mergeExport adds a qsub -v list or -V (ALL) to an --export-style value.
func mergeExport(cur, add string) string {
	if cur == "" {
		return add
	}
	return cur + "," + add
}
