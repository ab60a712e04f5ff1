package sshsite

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
)

// pbsQueue is the default queue of a PBS-dialect site.
const pbsQueue = "workq"

// pbsVersion is what the dialect reports as pbs_version.
const pbsVersion = "23.06.06"

var (
	pbsNameRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,235}$`) })
	selectRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^select=([0-9]+)(?::ncpus=([0-9]+))?$`) })
	pbsNumberRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:0|-?[1-9][0-9]{0,17})$`) })
)

// pbsAnswers answer the PBS dialect's commands (pbsCmds).
var pbsAnswers = map[string]cmdFunc{
	"qsub":      (*Site).qsub,
	"qstat":     func(s *Site, o *out, a []string, _ request) int { return s.qstat(o, a) },
	"qselect":   func(s *Site, o *out, a []string, _ request) int { return s.qselect(o, a) },
	"qdel":      func(s *Site, o *out, a []string, _ request) int { return s.qdel(o, a) },
	"pbsnodes":  func(s *Site, o *out, a []string, _ request) int { return s.pbsnodes(o, a) },
	"pbs_rsub":  (*Site).rsub,
	"pbs_rstat": func(s *Site, o *out, a []string, _ request) int { return s.rstat(o, a) },
	"pbs_rdel":  func(s *Site, o *out, a []string, _ request) int { return s.rdel(o, a) },
}

const qsubUsage = `usage: qsub [-a date_time] [-A account_string] [-c interval]
	[-C directive_prefix] [-e path] [-f ] [-h ] [-I [-X]] [-j oe|eo] [-J X-Y[:Z]]
	[-k keep] [-l resource_list] [-m mail_options] [-M user_list]
	[-N jobname] [-o path] [-p priority] [-P project] [-q queue] [-r y|n]
	[-R o|e|oe] [-S path] [-u user_list] [-W otherattributes=value...]
	[-v variable_list] [-V ] [-z] [script | -- command [arg1 ...]]
       qsub --version`

// qsub reads the options backends/pbs sends (-N -v -r -l -q -o -e) and
// the script path.
func (s *Site) qsub(o *out, a []string, req request) int {
	j := &job{queue: pbsQueue, nodes: 1, cpus: 1, walltime: time.Hour, dir: s.home, user: req.Env["USER"], vars: map[string]string{}}
	var outp, errp, script, place string
	varList := ""
	for i := 0; i < len(a); i++ {
		w := a[i]
		if len(w) == 2 && w[0] == '-' && strings.IndexByte("NvrlqoeWjA", w[1]) >= 0 {
			if i+1 >= len(a) {
				return o.errf(2, "%s", qsubUsage)
			}
			i++
			v := a[i]
			switch w[1] {
			case 'N':
				if !pbsNameRe().MatchString(v) {
					return o.errf(2, "qsub: illegal -N value")
				}
				j.name = v
			case 'v':
				varList = v
			case 'r':
				if v != "y" && v != "n" {
					return o.errf(2, "%s", qsubUsage)
				}
			case 'q':
				j.queue = v
			case 'o':
				outp = v
			case 'e':
				errp = v
			case 'l':
				for _, r := range strings.Split(v, ",") {
					k, val, _ := strings.Cut(r, "=")
					switch k {
					case "select":
						m := selectRe().FindStringSubmatch(r)
						if m == nil {
							return o.errf(2, "qsub: Illegal attribute or resource value Resource_List.select")
						}
						j.nodes, _ = strconv.Atoi(m[1])
						if m[2] != "" {
							j.cpus, _ = strconv.Atoi(m[2])
						}
					case "place":
						place = val
					case "walltime":
						d, ok := pbsDuration(val)
						if !ok {
							return o.errf(2, "qsub: Illegal attribute or resource value Resource_List.walltime")
						}
						j.walltime = d
					default:
						return o.errf(187, "qsub: Unknown resource Resource_List.%s", k)
					}
				}
			}
			continue
		}
		if strings.HasPrefix(w, "-") {
			for _, c := range w[1:] {
				o.errf(2, "qsub: invalid option -- '%c'", c)
			}
			return o.errf(2, "%s", qsubUsage)
		}
		if i != len(a)-1 {
			return o.errf(2, "%s", qsubUsage)
		}
		script = w
	}
	if script == "" {
		return o.errf(2, "qsub: a script must be given (this site reads no script from stdin)")
	}
	j.script = absIn(req.Cwd, script)
	body, err := s.readHome(j.script, 1<<20)
	if err != nil {
		return o.errf(1, "qsub: script not a file")
	}
	j.body = body
	if j.name == "" {
		j.name = pbsJobName(script)
	}
	if j.nodes < 1 || j.cpus > s.cfg.Cores {
		// PBS takes it and the job can never run: refused here, said so.
		return o.errf(188, "qsub: Job violates queue and/or server resource limits")
	}
	_ = place
	j.vars["PBS_O_HOME"] = s.home
	j.vars["PBS_O_LOGNAME"] = j.user
	j.vars["PBS_O_PATH"] = s.bin + ":/usr/local/bin:/usr/bin:/bin"
	j.vars["PBS_O_SHELL"] = "/bin/sh"
	j.vars["PBS_O_WORKDIR"] = req.Cwd
	j.vars["PBS_O_SYSTEM"] = "Linux"
	j.vars["PBS_O_HOST"] = s.cfg.Name
	for k, v := range pbs.ParseVariableList(varList) {
		j.vars[k] = v
	}
	j.gridID = pbs.GridFromTag(j.vars[pbs.TagVar])
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.queue != pbsQueue {
		r := s.findPBSResv(j.queue)
		if r == nil {
			return o.errf(170, "qsub: Unknown queue")
		}
		j.resv = r.simID
	}
	j.vars["PBS_O_QUEUE"] = j.queue
	if err := s.submitLocked(j); err != nil {
		return o.errf(188, "qsub: Job violates queue and/or server resource limits")
	}
	j.native = string(j.id) + "." + s.cfg.Name
	if outp == "" {
		outp = s.home + "/" + j.name + ".o" + string(j.id)
	}
	if errp == "" {
		errp = s.home + "/" + j.name + ".e" + string(j.id)
	}
	_, outp, _ = strings.Cut(":"+outp, ":")
	_, errp, _ = strings.Cut(":"+errp, ":")
	j.out, j.err = absIn(req.Cwd, hostless(outp)), absIn(req.Cwd, hostless(errp))
	fmt.Fprintf(&o.stdout, "%s\n", j.native)
	return 0
}

// hostless drops a "host:" prefix from a PBS path.
func hostless(p string) string {
	if i := strings.IndexByte(p, ':'); i >= 0 && !strings.Contains(p[:i], "/") {
		return p[i+1:]
	}
	return p
}

func pbsJobName(script string) string {
	n := script[strings.LastIndexByte(script, '/')+1:]
	if n == "" || !pbsNameRe().MatchString(n) {
		return "STDIN"
	}
	return n
}

// pbsDuration reads a walltime or duration as PBS does ([[HH:]MM:]SS);
// ok is false for one that is unreadable or not positive.
func pbsDuration(v string) (time.Duration, bool) {
	d := pbs.ParseDuration(v)
	return d, d > 0
}

func pbsHMS(d time.Duration) string {
	t := int64(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", t/3600, t/60%60, t%60)
}

// kv is one attribute of a job as qstat -f prints it.
type kv struct{ k, v string }

// pbsAttrs lists j's attributes in qstat -f's order (s.mu held).
func (s *Site) pbsAttrs(j *job, st backends.JobStatus) []kv {
	state, substate := "Q", "10"
	switch {
	case st.State == backends.StateRunning:
		state, substate = "R", "42"
	case st.State == backends.StatePending && j.resv != "":
		state, substate = "Q", "10"
	case st.State.Final():
		state, substate = "F", "92"
	}
	ct := func(t time.Time) string { return t.Local().Format(pbs.CtimeLayout) }
	a := []kv{{"Job_Name", j.name}, {"Job_Owner", j.user + "@" + s.cfg.Name}, {"job_state", state},
		{"queue", j.queue}, {"server", s.cfg.Name}, {"ctime", ct(j.submit)},
		{"Error_Path", s.cfg.Name + ":" + j.err}, {"Output_Path", s.cfg.Name + ":" + j.out}}
	if nl := s.nodeList(j); nl != "" && !st.Start.IsZero() {
		var chunks []string
		for _, i := range j.nodeIdx {
			chunks = append(chunks, fmt.Sprintf("(%s:ncpus=%d)", s.nodeName(i), j.cpus))
		}
		a = append(a, kv{"exec_vnode", strings.Join(chunks, "+")})
	}
	a = append(a, kv{"qtime", ct(j.submit)}, kv{"Rerunable", "False"},
		kv{"Resource_List.ncpus", strconv.Itoa(j.nodes * j.cpus)}, kv{"Resource_List.nodect", strconv.Itoa(j.nodes)},
		kv{"Resource_List.place", "scatter:excl"}, kv{"Resource_List.select", fmt.Sprintf("%d:ncpus=%d", j.nodes, j.cpus)},
		kv{"Resource_List.walltime", pbsHMS(j.walltime)})
	if !st.Start.IsZero() {
		a = append(a, kv{"stime", ct(st.Start)})
	}
	a = append(a, kv{"jobdir", s.home}, kv{"substate", substate})
	keys := make([]string, 0, len(j.vars))
	for k := range j.vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var vl []string
	for _, k := range keys {
		vl = append(vl, k+"="+strings.ReplaceAll(j.vars[k], ",", `\,`))
	}
	a = append(a, kv{"Variable_List", strings.Join(vl, ",")})
	switch st.State {
	case backends.StatePending:
		a = append(a, kv{"comment", "Not Running: " + orDefault(st.Reason, "Insufficient amount of resource: ncpus")})
	case backends.StateRunning:
		a = append(a, kv{"comment", "Job run at " + ct(st.Start) + " on " + s.nodeList(j)})
	case backends.StateCompleted, backends.StateFailed:
		a = append(a, kv{"comment", "Job run at " + ct(st.Start) + " and finished"}, kv{"Exit_status", strconv.Itoa(st.ExitCode)})
	case backends.StateTimeout:
		a = append(a, kv{"comment", "Job run at " + ct(st.Start) + " and terminated: job exceeded resource walltime"},
			kv{"Exit_status", "-29"})
	case backends.StateCancelled:
		if !st.Start.IsZero() {
			a[len(a)-2] = kv{"substate", "91"}
			a = append(a, kv{"comment", "Job run at " + ct(st.Start) + " and terminated"}, kv{"Exit_status", "271"})
		} else {
			a = append(a, kv{"comment", "Job deleted before it ran"})
		}
	}
	if st.State.Final() {
		a = append(a, kv{"obittime", ct(st.End)})
	}
	a = append(a, kv{"run_count", map[bool]string{true: "1", false: "0"}[!st.Start.IsZero()]},
		kv{"Submit_Host", s.cfg.Name})
	return a
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// dsvLine prints a job as qstat -f -F dsv does.
func dsvLine(b *limBuf, id string, attrs []kv) {
	b.WriteString("Job Id: " + id)
	for _, a := range attrs {
		b.WriteString("|" + a.k + "=" + a.v)
	}
	b.WriteByte('\n')
}

// jsonValue types a value as PBS's JSON output does (number-like values
// become numbers).
func jsonValue(v string) any {
	if pbsNumberRe().MatchString(v) {
		return json.Number(v)
	}
	return v
}

// jsonJob nests a job's attributes as qstat -f -F json does.
func jsonJob(attrs []kv) map[string]any {
	m := map[string]any{}
	for _, a := range attrs {
		if a.k == "Variable_List" {
			vars := map[string]any{}
			for k, v := range pbs.ParseVariableList(a.v) {
				vars[k] = jsonValue(v)
			}
			m[a.k] = vars
			continue
		}
		if p, sub, ok := strings.Cut(a.k, "."); ok {
			inner, _ := m[p].(map[string]any)
			if inner == nil {
				inner = map[string]any{}
				m[p] = inner
			}
			inner[sub] = jsonValue(a.v)
			continue
		}
		m[a.k] = jsonValue(a.v)
	}
	return m
}

func (s *Site) jsonDoc(o *out, key string, v any) int {
	doc := map[string]any{"timestamp": time.Now().Unix(), "pbs_version": pbsVersion, "pbs_server": s.cfg.Name}
	if v != nil {
		doc[key] = v
	}
	b, err := json.MarshalIndent(doc, "", "\t")
	if err != nil {
		return o.errf(1, "qstat: %v", err)
	}
	o.stdout.Write(b)
	o.stdout.WriteByte('\n')
	return 0
}

// lookupPBS finds a job by "<n>.<server>" or "<n>".
func (s *Site) lookupPBS(id string) *job {
	n, srv, _ := strings.Cut(id, ".")
	if srv != "" && srv != s.cfg.Name {
		return nil
	}
	return s.jobs[backends.JobID(n)]
}

func (s *Site) qstat(o *out, a []string) int {
	var x, full, server, queues bool
	format := ""
	var ids []string
	for i := 0; i < len(a); i++ {
		switch w := a[i]; {
		case w == "-x" || w == "-H":
			x = true
		case w == "-f":
			full = true
		case w == "-t":
			// Array subjobs listed one by one: the simulated site runs no
			// arrays (qsub -J is refused), so every listing is the same.
		case w == "-B":
			server = true
		case w == "-Q":
			queues = true
		case w == "-F" && i+1 < len(a):
			i++
			format = strings.ToLower(a[i])
			if format != "json" && format != "dsv" {
				return o.errf(2, "qstat: invalid format: %s", a[i])
			}
		case strings.HasPrefix(w, "-"):
			for _, c := range w[1:] {
				o.errf(2, "qstat: invalid option -- '%c'", c)
			}
			return o.errf(2, "usage: \nqstat [-f] [-J] [-p] [-t] [-x] [-E] [-F format | -w] [-D delim] [ job_identifier... | destination... ]\nqstat -Q [-f] [-F format] [-D delim] [ destination... ]\nqstat -B [-f] [-F format] [-D delim] [ server_name... ]\nqstat --version")
		default:
			ids = append(ids, w)
		}
	}
	if (format != "") && !full {
		return o.errf(2, "qstat: -F is only allowed with -f")
	}
	switch {
	case server:
		return s.jsonDoc(o, "Server", map[string]any{s.cfg.Name: map[string]any{"server_state": "Active",
			"server_host": s.cfg.Name, "scheduling": "True", "default_queue": pbsQueue, "job_history_enable": "True",
			"resv_enable": "True", "pbs_version": pbsVersion}})
	case queues:
		return s.qstatQueues(o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var js []*job
	code := 0
	if len(ids) == 0 {
		js = append(js, s.order...)
	} else {
		for _, id := range ids {
			if j := s.lookupPBS(id); j != nil {
				js = append(js, j)
			} else {
				code = o.errf(153, "qstat: Unknown Job Id %s", id)
			}
		}
	}
	idl := make([]backends.JobID, len(js))
	for i, j := range js {
		idl[i] = j.id
	}
	s.mu.Unlock()
	sts := s.status(idl)
	s.mu.Lock()
	jsonJobs := map[string]any{}
	for _, j := range js {
		st := sts[j.id]
		if st.State.Final() && !x {
			if len(ids) > 0 {
				code = o.errf(35, "qstat: %s Job has finished, use -x or -H to obtain historical job information", j.native)
			}
			continue
		}
		attrs := s.pbsAttrs(j, st)
		switch {
		case format == "dsv":
			dsvLine(&o.stdout, j.native, attrs)
		case format == "json":
			jsonJobs[j.native] = jsonJob(attrs)
			if len(ids) > 0 {
				// openpbs #2672: with several ids the JSON form prints the first only.
				ids = nil
				goto done
			}
		case full:
			fmt.Fprintf(&o.stdout, "Job Id: %s\n", j.native)
			for _, kv := range attrs {
				fmt.Fprintf(&o.stdout, "    %s = %s\n", kv.k, kv.v)
			}
			o.stdout.WriteByte('\n')
		default:
			fmt.Fprintf(&o.stdout, "%-17s %-16s %-16s %8s %s %s\n", j.native, trunc(j.name, 16), trunc(j.user, 16), "0", attrs[2].v, j.queue)
		}
	}
done:
	if format == "json" {
		var v any
		if len(jsonJobs) > 0 {
			v = jsonJobs
		}
		s.jsonDoc(o, "Jobs", v)
	}
	return code
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (s *Site) qstatQueues(o *out) int {
	s.mu.Lock()
	counts := map[string]int{}
	for _, j := range s.order {
		if !j.ended {
			counts[j.queue]++
		}
	}
	var rq []*resv
	for _, r := range s.resvs {
		rq = append(rq, r)
	}
	s.mu.Unlock()
	qs := map[string]any{pbsQueue: map[string]any{"queue_type": "Execution", "total_jobs": counts[pbsQueue],
		"enabled": "True", "started": "True"}}
	for _, r := range rq {
		if st := s.resvState(r); st == "deleted" || st == "ended" {
			continue
		}
		q, _, _ := strings.Cut(r.name, ".")
		qs[q] = map[string]any{"queue_type": "Execution", "total_jobs": counts[q], "enabled": "True",
			"started":         map[bool]string{true: "True", false: "False"}[s.resvState(r) == "active"],
			"acl_user_enable": "True", "acl_users": r.users}
	}
	return s.jsonDoc(o, "Queue", qs)
}

func (s *Site) qselect(o *out, a []string) int {
	x := false
	user := ""
	for i := 0; i < len(a); i++ {
		switch {
		case a[i] == "-x":
			x = true
		case a[i] == "-u" && i+1 < len(a):
			i++
			user = a[i]
		default:
			return o.errf(2, "usage: qselect [-a [op]date_time] [-A account_string] [-c [op]interval] [-h hold_list] [-H] [-J] [-l resource_list] [-N name] [-p [op]priority] [-q destination] [-r y|n] [-s states] [-t] [-T] [-u user_name] [-x] [-P project_name]")
		}
	}
	s.mu.Lock()
	js := append([]*job(nil), s.order...)
	s.mu.Unlock()
	for _, j := range js {
		if user != "" && j.user != user || !x && j.ended {
			continue
		}
		fmt.Fprintln(&o.stdout, j.native)
	}
	return 0
}

func (s *Site) qdel(o *out, a []string) int {
	code := 0
	for _, id := range a {
		if strings.HasPrefix(id, "-") {
			return o.errf(2, "usage: qdel [-W force|suppress_email=X] [-x] job_identifier...\n       qdel --version")
		}
		if n, _, _ := strings.Cut(id, "."); n == "" || strings.Trim(n, "0123456789") != "" {
			code = o.errf(1, "qdel: illegally formed job identifier: %s", id)
			continue
		}
		s.mu.Lock()
		j := s.lookupPBS(id)
		s.mu.Unlock()
		if j == nil {
			code = o.errf(153, "qdel: Unknown Job Id %s", id)
			continue
		}
		if st := s.status([]backends.JobID{j.id})[j.id]; st.State.Final() {
			code = o.errf(35, "qdel: Job has finished %s", j.native)
			continue
		}
		s.sim.Cancel(context.Background(), j.id)
	}
	return code
}

func (s *Site) pbsnodes(o *out, a []string) int {
	if !slices.Contains(a, "-a") {
		return o.errf(1, "pbsnodes: this site answers only pbsnodes -a [-F json]")
	}
	s.mu.Lock()
	jobsOn := make([][]string, len(s.free))
	for _, j := range s.order {
		if j.started && !j.ended {
			for _, i := range j.nodeIdx {
				jobsOn[i] = append(jobsOn[i], j.native)
			}
		}
	}
	nodes := map[string]any{}
	for i := range s.free {
		n := map[string]any{"Mom": s.nodeName(i), "ntype": "PBS", "state": "free", "pcpus": s.cfg.Cores,
			"resources_available": map[string]any{"host": s.nodeName(i), "ncpus": s.cfg.Cores, "vnode": s.nodeName(i)},
			"resv_enable":         "True", "sharing": "default_shared"}
		if !s.free[i] {
			n["state"] = "job-busy"
			n["jobs"] = jobsOn[i]
			n["resources_assigned"] = map[string]any{"ncpus": s.cfg.Cores}
		}
		nodes[s.nodeName(i)] = n
	}
	s.mu.Unlock()
	if !slices.Contains(a, "json") {
		for name := range nodes {
			fmt.Fprintf(&o.stdout, "%s\n     state = %v\n\n", name, nodes[name].(map[string]any)["state"])
		}
		return 0
	}
	return s.jsonDoc(o, "nodes", nodes)
}
