package backendrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// Client is the host's side: a backends.Backend (and every optional
// capability, declared through Capabilities) whose calls go to a plugin.
//
// Every call is bounded by its ctx joined with the plugin's done context:
// a plugin that exits mid-call fails the call with wire.ErrPluginExited
// (retryable) at once. LinkEstimate and ConnErr take no ctx, so they answer
// from what the last Configure or Ping reported, never from an RPC.
type Client struct {
	rpc  pb.BackendClient
	done context.Context // closed when the plugin process is gone

	mu    sync.Mutex
	name  string // the plugin's name in errors until Configure says the site's
	hello *pb.BackendHello
	caps  backends.Capabilities
	clock bool
	conn  error
	link  struct {
		ok  bool
		spb float64
		lat time.Duration
	}
	limits OutputLimits
}

// OutputLimits bound what FetchOutputs writes on the host, whatever the
// plugin sends: the bytes of one file, of one job's outputs, and their
// number. Zero fields take the defaults (those of a built-in SSH site:
// transport.DefaultMaxFileSize, 50 GiB a job, DefaultMaxOutputFiles).
type OutputLimits struct {
	MaxFileSize int64 // bytes per file (the configuration's max_file_size)
	MaxJobBytes int64 // bytes per job (max_job_bytes)
	MaxFiles    int   // files per job
}

// Defaults of OutputLimits.
const (
	DefaultMaxJobBytes    int64 = 50 << 30 // sshbatch.DefaultMaxJobBytes
	DefaultMaxOutputFiles       = 10000
)

func (l OutputLimits) withDefaults() OutputLimits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = transport.DefaultMaxFileSize
	}
	if l.MaxJobBytes <= 0 {
		l.MaxJobBytes = DefaultMaxJobBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxOutputFiles
	}
	return l
}

// SetOutputLimits sets the bounds FetchOutputs holds the plugin to (the
// host's own staging configuration: the plugin's word is not taken).
func (c *Client) SetOutputLimits(l OutputLimits) {
	c.mu.Lock()
	c.limits = l
	c.mu.Unlock()
}

// NewClient returns a client over conn's service. done is the plugin's
// done context (go-plugin passes it to GRPCClient); label names the plugin
// in errors until Configure tells the site's name.
func NewClient(rpc pb.BackendClient, done context.Context, label string) *Client {
	if done == nil {
		done = context.Background()
	}
	return &Client{rpc: rpc, done: done, name: label}
}

var (
	_ backends.Backend       = (*Client)(nil)
	_ backends.Finder        = (*Client)(nil)
	_ backends.Fetcher       = (*Client)(nil)
	_ backends.Reserver      = (*Client)(nil)
	_ backends.Watcher       = (*Client)(nil)
	_ backends.LinkEstimator = (*Client)(nil)
	_ backends.Connectivity  = (*Client)(nil)
	_ backends.Declarer      = (*Client)(nil)
)

func (c *Client) label() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.name
}

// call runs one unary RPC under ctx joined with the plugin's done context
// and maps its transport error; the domain error comes from the reply.
func call[R any](c *Client, ctx context.Context, method string, f func(context.Context) (R, error)) (R, error) {
	jctx, stop := wire.Join(ctx, c.done)
	defer stop()
	r, err := f(jctx)
	if err != nil {
		var zero R
		return zero, wire.CallError(c.label(), method, ctx, jctx, err)
	}
	return r, nil
}

func (c *Client) domain(method string, e *pb.BackendError) error {
	return errorFromProto(c.label(), method, e)
}

// Configure sends the site configuration (JSON) and records what the
// plugin says it is and supports. It must be the first call.
func (c *Client) Configure(ctx context.Context, config []byte) (*Hello, error) {
	r, err := call(c, ctx, "Configure", func(ctx context.Context) (*pb.BackendHello, error) {
		return c.rpc.Configure(ctx, &pb.BackendConfigureRequest{ConfigJson: config})
	})
	if err != nil {
		return nil, err
	}
	if err := c.domain("Configure", r.Error); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.hello = r
	if r.Name != "" {
		c.name = r.Name
	}
	c.caps = capsFromProto(r.Capabilities)
	c.clock = r.Capabilities.GetSimClock()
	c.mu.Unlock()
	return &Hello{Name: r.Name, Kind: r.Kind, Version: r.Version, Capabilities: c.caps, SimClock: c.clock}, nil
}

// Hello is what a plugin says about itself when configured.
type Hello struct {
	Name         string // the site's name
	Kind         string
	Version      string // the plugin's semver
	Capabilities backends.Capabilities
	SimClock     bool
}

// Name implements backends.Backend: the site's name.
func (c *Client) Name() string { return c.label() }

// Capabilities implements backends.Declarer with what the plugin declared
// at Configure.
func (c *Client) Capabilities() backends.Capabilities {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
}

// Info implements backends.Backend.
func (c *Client) Info(ctx context.Context) (*backends.SiteInfo, error) {
	r, err := call(c, ctx, "Info", func(ctx context.Context) (*pb.BackendInfoReply, error) {
		return c.rpc.Info(ctx, &pb.BackendInfoRequest{})
	})
	if err != nil {
		return nil, err
	}
	if err := c.domain("Info", r.Error); err != nil {
		return nil, err
	}
	if r.Info == nil {
		return nil, fmt.Errorf("plugin %s: Info: %w: empty reply", c.label(), wire.ErrTransport)
	}
	return infoFromProto(r.Info), nil
}

// Submit implements backends.Backend. A Submit cut short by the plugin's
// exit fails with wire.ErrPluginExited, which is ErrUnavailable: the job
// may have reached the site, and the caller looks its tag up first.
func (c *Client) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	r, err := call(c, ctx, "Submit", func(ctx context.Context) (*pb.BackendSubmitReply, error) {
		return c.rpc.Submit(ctx, &pb.BackendSubmitRequest{Spec: specToProto(spec)})
	})
	if err != nil {
		return "", err
	}
	if err := c.domain("Submit", r.Error); err != nil {
		return backends.JobID(r.Id), err
	}
	return backends.JobID(r.Id), nil
}

// Status implements backends.Backend.
func (c *Client) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	req := &pb.BackendStatusRequest{Ids: make([]string, len(ids))}
	for i, id := range ids {
		req.Ids[i] = string(id)
	}
	r, err := call(c, ctx, "Status", func(ctx context.Context) (*pb.BackendStatusReply, error) {
		return c.rpc.Status(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	if err := c.domain("Status", r.Error); err != nil {
		return nil, err
	}
	if len(r.Statuses) != len(ids) {
		return nil, fmt.Errorf("plugin %s: Status: %w: %d statuses for %d ids", c.label(), backends.ErrBadOutput, len(r.Statuses), len(ids))
	}
	return statusesFromProto(r.Statuses), nil
}

// Cancel implements backends.Backend.
func (c *Client) Cancel(ctx context.Context, id backends.JobID) error {
	r, err := call(c, ctx, "Cancel", func(ctx context.Context) (*pb.BackendCancelReply, error) {
		return c.rpc.Cancel(ctx, &pb.BackendCancelRequest{Id: string(id)})
	})
	if err != nil {
		return err
	}
	return c.domain("Cancel", r.Error)
}

// FindByGridID implements backends.Finder.
func (c *Client) FindByGridID(ctx context.Context, gridID string) ([]backends.JobStatus, error) {
	r, err := call(c, ctx, "FindByGridID", func(ctx context.Context) (*pb.BackendFindReply, error) {
		return c.rpc.FindByGridID(ctx, &pb.BackendFindRequest{GridId: gridID})
	})
	if err != nil {
		return nil, err
	}
	if err := c.domain("FindByGridID", r.Error); err != nil {
		return nil, err
	}
	return statusesFromProto(r.Statuses), nil
}

// FetchOutputs implements backends.Fetcher. The plugin streams the files;
// this side writes them under localDir through an os.Root (no path, ".."
// or symbolic link can place a file outside it), each atomically (a
// ".gridsub-part" file renamed once complete). It returns the local paths
// written, also when it fails part way.
func (c *Client) FetchOutputs(ctx context.Context, id backends.JobID, spec *backends.JobSpec, localDir string) ([]string, error) {
	jctx, stop := wire.Join(ctx, c.done)
	defer stop()
	st, err := c.rpc.FetchOutputs(jctx, &pb.BackendFetchRequest{Id: string(id), Spec: specToProto(spec)})
	if err != nil {
		return nil, wire.CallError(c.label(), "FetchOutputs", ctx, jctx, err)
	}
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return nil, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
	}
	root, err := os.OpenRoot(localDir)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
	}
	defer root.Close()
	c.mu.Lock()
	lim := c.limits.withDefaults()
	c.mu.Unlock()
	var (
		got   []string
		cur   *os.File
		rel   string
		mode  fs.FileMode
		files int
		fileN int64 // bytes of the current file
		jobN  int64 // bytes of every file so far
	)
	over := func(what string, limit int64) error {
		return fmt.Errorf("plugin %s: FetchOutputs: %w: %s is over the limit of %d bytes the host allows (staging.%s); the fetch was stopped there",
			c.label(), transport.ErrTooLarge, rel, limit, what)
	}
	finish := func() error {
		if cur == nil {
			return nil
		}
		f := cur
		cur = nil
		if err := f.Close(); err != nil {
			root.Remove(rel + partSuffix)
			return err
		}
		if err := root.Rename(rel+partSuffix, rel); err != nil {
			root.Remove(rel + partSuffix)
			return err
		}
		_ = root.Chmod(rel, mode)
		got = append(got, filepath.Join(localDir, rel))
		return nil
	}
	abort := func() {
		if cur != nil {
			cur.Close()
			root.Remove(rel + partSuffix)
			cur = nil
		}
	}
	for {
		ch, err := st.Recv()
		if err == io.EOF {
			if err := finish(); err != nil {
				return got, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
			}
			return got, nil
		}
		if err != nil {
			abort()
			return got, wire.CallError(c.label(), "FetchOutputs", ctx, jctx, err)
		}
		if ch.Error != nil {
			if err := finish(); err != nil {
				return got, errors.Join(c.domain("FetchOutputs", ch.Error), err)
			}
			return got, c.domain("FetchOutputs", ch.Error)
		}
		if ch.First {
			if err := finish(); err != nil {
				return got, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
			}
			r, err := localRel(ch.Path)
			if err != nil {
				return got, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
			}
			if files++; files > lim.MaxFiles {
				return got, fmt.Errorf("plugin %s: FetchOutputs: %w: more than %d output files; the fetch was stopped there", c.label(), transport.ErrTooLarge, lim.MaxFiles)
			}
			rel, mode = r, fs.FileMode(ch.Mode).Perm()
			if mode == 0 {
				mode = 0o644
			}
			fileN = 0
			if d := filepath.Dir(rel); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return got, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
				}
			}
			f, err := root.OpenFile(rel+partSuffix, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return got, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
			}
			cur = f
		} else if cur == nil || ch.Path != filepath.ToSlash(rel) {
			abort()
			return got, fmt.Errorf("plugin %s: FetchOutputs: %w: a chunk of %q out of order", c.label(), wire.ErrTransport, ch.Path)
		}
		fileN += int64(len(ch.Data))
		jobN += int64(len(ch.Data))
		switch {
		case fileN > lim.MaxFileSize:
			err := over("max_file_size", lim.MaxFileSize)
			abort()
			return got, err
		case jobN > lim.MaxJobBytes:
			err := over("max_job_bytes (this job's outputs, with the files before it)", lim.MaxJobBytes)
			abort()
			return got, err
		}
		if _, err := cur.Write(ch.Data); err != nil {
			abort()
			return got, fmt.Errorf("plugin %s: FetchOutputs: %w", c.label(), err)
		}
	}
}

const partSuffix = ".gridsub-part"

// localRel checks a path the plugin sent: relative, slash-separated, no
// "..", and turns it into a local relative path. os.Root enforces the same
// again, symbolic links included.
func localRel(p string) (string, error) {
	if p == "" || path.IsAbs(p) || !fs.ValidPath(p) {
		return "", fmt.Errorf("%w: the plugin sent the output path %q, which is not a plain relative path", backends.ErrBadOutput, p)
	}
	return filepath.FromSlash(p), nil
}

// CreateReservation implements backends.Reserver.
func (c *Client) CreateReservation(ctx context.Context, rs *backends.ReservationSpec) (backends.ResvID, error) {
	r, err := call(c, ctx, "CreateReservation", func(ctx context.Context) (*pb.BackendCreateReservationReply, error) {
		return c.rpc.CreateReservation(ctx, &pb.BackendCreateReservationRequest{Spec: resvSpecToProto(rs)})
	})
	if err != nil {
		return "", err
	}
	return backends.ResvID(r.Id), c.domain("CreateReservation", r.Error)
}

// ShowReservation implements backends.Reserver.
func (c *Client) ShowReservation(ctx context.Context, id backends.ResvID) (*backends.Reservation, error) {
	r, err := call(c, ctx, "ShowReservation", func(ctx context.Context) (*pb.BackendShowReservationReply, error) {
		return c.rpc.ShowReservation(ctx, &pb.BackendShowReservationRequest{Id: string(id)})
	})
	if err != nil {
		return nil, err
	}
	if err := c.domain("ShowReservation", r.Error); err != nil {
		return nil, err
	}
	if r.Reservation == nil {
		return nil, fmt.Errorf("plugin %s: ShowReservation: %w: empty reply", c.label(), wire.ErrTransport)
	}
	return resvFromProto(r.Reservation), nil
}

// DeleteReservation implements backends.Reserver.
func (c *Client) DeleteReservation(ctx context.Context, id backends.ResvID) error {
	r, err := call(c, ctx, "DeleteReservation", func(ctx context.Context) (*pb.BackendDeleteReservationReply, error) {
		return c.rpc.DeleteReservation(ctx, &pb.BackendDeleteReservationRequest{Id: string(id)})
	})
	if err != nil {
		return err
	}
	return c.domain("DeleteReservation", r.Error)
}

// Watch implements backends.Watcher over the plugin's Watch stream.
func (c *Client) Watch(ctx context.Context, fn func(backends.JobStatus)) error {
	jctx, stop := wire.Join(ctx, c.done)
	defer stop()
	st, err := c.rpc.Watch(jctx, &pb.BackendWatchRequest{})
	if err != nil {
		return wire.CallError(c.label(), "Watch", ctx, jctx, err)
	}
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			if ctx.Err() != nil {
				return fmt.Errorf("plugin %s: Watch: %w", c.label(), ctx.Err())
			}
			return fmt.Errorf("plugin %s: Watch: %w: the stream ended", c.label(), backends.ErrUnavailable)
		}
		if err != nil {
			return wire.CallError(c.label(), "Watch", ctx, jctx, err)
		}
		if ev.Error != nil {
			return c.domain("Watch", ev.Error)
		}
		if ev.Status != nil {
			fn(statusFromProto(ev.Status))
		}
	}
}

// Ping checks the plugin answers and refreshes the cache LinkEstimate and
// ConnErr answer from.
func (c *Client) Ping(ctx context.Context) error {
	r, err := call(c, ctx, "Ping", func(ctx context.Context) (*pb.BackendPingReply, error) {
		return c.rpc.Ping(ctx, &pb.BackendPingRequest{})
	})
	if err != nil {
		return err
	}
	conn := c.domain("ConnErr", r.ConnError)
	c.mu.Lock()
	c.conn = conn
	c.link.ok, c.link.spb, c.link.lat = r.LinkOk, r.LinkSecPerByte, time.Duration(r.LinkLatencyNanos)
	c.mu.Unlock()
	return nil
}

// ConnErr implements backends.Connectivity from the last Ping.
func (c *Client) ConnErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// LinkEstimate implements backends.LinkEstimator from the last Ping.
func (c *Client) LinkEstimate() (float64, time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.link.spb, c.link.lat, c.link.ok
}

// AdvanceTo drives the plugin's virtual clock (a simulated site); it fails
// with backends.ErrUnsupported for a real one.
func (c *Client) AdvanceTo(ctx context.Context, until time.Time) (time.Time, error) {
	r, err := call(c, ctx, "Clock", func(ctx context.Context) (*pb.BackendClockReply, error) {
		return c.rpc.Clock(ctx, &pb.BackendClockRequest{UntilUnixNano: wire.TimeToWire(until)})
	})
	if err != nil {
		return time.Time{}, err
	}
	return wire.TimeFromWire(r.NowUnixNano), c.domain("Clock", r.Error)
}
