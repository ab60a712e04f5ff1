package pbs

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// nodesInfo reads the vnodes (pbsnodes -a -F json) and caches the site's
// size for Submit and CreateReservation.
func (d *dialect) nodesInfo(ctx context.Context, x *sshbatch.Exec) ([]Node, error) {
	r, err := x.Output(ctx, d.cmds.NodesArgv())
	if err != nil {
		return nil, err
	}
	nodes, err := ParsePbsnodes(r.Stdout)
	if err != nil {
		return nil, err
	}
	n, cpn, mem, gpus := 0, 0, int64(0), 0
	for _, x := range nodes {
		if x.Usable() || x.Transient() {
			n++
			cpn, mem, gpus = max(cpn, x.NCPUs), max(mem, x.MemBytes), max(gpus, x.NGPUs)
		}
	}
	d.mu.Lock()
	d.nodes, d.cpn, d.mem, d.gpus = n, cpn, mem, gpus
	d.mu.Unlock()
	return nodes, nil
}

// shape returns the cached node count and CPUs per node, asking once.
func (d *dialect) shape(ctx context.Context, x *sshbatch.Exec) (int, int, error) {
	d.mu.Lock()
	n, cpn := d.nodes, d.cpn
	d.mu.Unlock()
	if n > 0 {
		return n, cpn, nil
	}
	if _, err := d.nodesInfo(ctx, x); err != nil {
		return 0, 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nodes, d.cpn, nil
}

// Info reports the usable vnodes, idle ones, CPUs per vnode, the queues
// (the configured or default one first; reservation queues left out) and
// the live jobs of that queue with their estimated ends: four commands
// (pbsnodes, qstat -B, qstat -Q, qstat -f without ids).
func (d *dialect) Info(ctx context.Context, x *sshbatch.Exec) (*backends.SiteInfo, error) {
	nodes, err := d.nodesInfo(ctx, x)
	if err != nil {
		return nil, err
	}
	info := &backends.SiteInfo{Name: d.cfg.Name, Kind: "pbs"}
	for _, n := range nodes {
		if !n.Usable() && !n.Transient() {
			continue
		}
		info.Nodes++
		if n.Idle() {
			info.FreeNodes++
		}
		info.CoresPerNode = max(info.CoresPerNode, n.NCPUs)
		info.MemPerNode = max(info.MemPerNode, n.MemBytes)
		info.GPUsPerNode = max(info.GPUsPerNode, n.NGPUs)
	}
	queue := d.cfg.Queue
	if queue == "" {
		r, err := x.Output(ctx, d.cmds.ServerArgv())
		if err != nil {
			return nil, err
		}
		srv, err := ParseServer(r.Stdout)
		if err != nil {
			return nil, err
		}
		queue = srv.DefaultQueue
	}
	r, err := x.Output(ctx, d.cmds.QueuesArgv())
	if err != nil {
		return nil, err
	}
	qs, err := ParseQueues(r.Stdout)
	if err != nil {
		return nil, err
	}
	var names []string
	found := false
	for _, q := range qs {
		if q.IsResv {
			continue
		}
		if q.Name == queue {
			found = true
			continue
		}
		names = append(names, q.Name)
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", backends.ErrRejected, backends.MissingName(d.cfg.Name, "queue", "partition", queue, names))
	}
	info.Partitions = append([]string{queue}, names...)
	r, err = x.Output(ctx, d.cmds.ActiveJSONArgv())
	if err != nil {
		return nil, err
	}
	jobs, err := ParseJobsJSON(r.Stdout)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if j.Attrs["queue"] != queue {
			continue
		}
		st, err := j.Status(d.cfg.Location)
		if err != nil {
			return nil, err
		}
		switch st.State {
		case backends.StatePending:
			info.Queued++
		case backends.StateRunning:
			info.Running++
			n, _ := strconv.Atoi(j.Attrs["Resource_List.nodect"])
			until := st.Start.Add(ParseDuration(j.Attrs["Resource_List.walltime"]))
			info.Busy = append(info.Busy, backends.Allocation{Nodes: max(n, 1), Until: until})
		}
	}
	sort.Slice(info.Busy, func(i, k int) bool { return info.Busy[i].Until.Before(info.Busy[k].Until) })
	return info, nil
}

// ParseDuration reads PBS's [[HH:]MM:]SS (0 when unreadable).
func ParseDuration(s string) time.Duration {
	var d time.Duration
	for _, p := range strings.Split(strings.TrimSpace(s), ":") {
		v, err := strconv.Atoi(p)
		if err != nil {
			return 0
		}
		d = d*60 + time.Duration(v)
	}
	return d * time.Second
}
