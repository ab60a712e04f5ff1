package transport

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Defaults applied by Dial to zero Config fields.
const (
	DefaultPort        = 22
	DefaultMaxSessions = 8 // below OpenSSH's default MaxSessions 10
	DefaultKeepAlive   = 30 * time.Second
	DefaultDialTimeout = 20 * time.Second
	// DefaultMaxOutput bounds the stdout (and the stderr) Run keeps of one
	// command: 64 MiB, far above any batch system's answer for thousands
	// of jobs.
	DefaultMaxOutput = 64 << 20
	// DefaultSFTPRequests is the number of concurrent SFTP requests in
	// flight per file when concurrency is on.
	DefaultSFTPRequests = 64
)

// Config describes how to reach one site's login node.
type Config struct {
	// Host is the login node's name or address, or with SSHConfig an
	// alias of the OpenSSH client configuration.
	Host string
	Port int // 0 means 22 (or what SSHConfig resolves)
	User string
	// SSHConfig resolves Host the way OpenSSH does (ssh -G), filling the
	// fields left unset (ResolveSSHConfig): SSHConfigDefault reads
	// OpenSSH's own files, another value is a file given to ssh -F. Empty:
	// no resolution, the fields are taken as they are.
	SSHConfig string

	// KeyFiles are private key files (OpenSSH or PEM). Encrypted keys are
	// refused with a clear error: load them into an agent instead.
	KeyFiles []string
	// UseAgent offers the keys of the ssh-agent at $SSH_AUTH_SOCK.
	UseAgent bool
	// CertFiles are OpenSSH user certificates (ssh-keygen -s) for the keys
	// offered; "<key>-cert.pub" beside a key file is offered too. A
	// certificate outside its validity window is left out, and a failed
	// login says so with the window.
	CertFiles []string
	// Prompter answers keyboard-interactive questions (a one-time
	// password) and key passphrases. Nil (a daemon): a login that needs a
	// person fails with ErrNeedsLogin and the Client waits for Login.
	Prompter Prompter
	// Jumps are the jump hosts (OpenSSH's ProxyJump), in order: the first
	// is dialed directly, each next one and then Host through the one
	// before. Every hop's host key is checked (InsecureIgnoreHostKey never
	// applies to a hop) and every hop's connection is kept and reused.
	Jumps []Hop
	// ProxyJump is OpenSSH's ProxyJump, "[user@]host[:port],...": with
	// SSHConfig each hop is resolved as ssh does, else taken literally
	// (with the login node's credentials and known_hosts). Used when Jumps
	// is empty.
	ProxyJump string

	// KnownHosts are known_hosts files. Several keys per host,
	// "[host]:port" entries, hashed host names, @cert-authority and @revoked
	// lines are understood. Empty means ~/.ssh/known_hosts.
	KnownHosts []string
	// InsecureIgnoreHostKey skips the host key check for a host that the
	// known_hosts files (KnownHosts, else ~/.ssh/known_hosts) do not list;
	// such a connect logs a WARN with the key's fingerprint. A listed host
	// must still offer a listed key. Never the default.
	InsecureIgnoreHostKey bool

	// MaxSessions bounds the concurrent sessions on the one connection
	// (commands plus the SFTP session, which holds one slot for as long as
	// the connection lives: with 1, commands wait for ever once a file was
	// staged). 0 means 8, below OpenSSH's default MaxSessions of 10.
	MaxSessions int
	// KeepAlive is the interval of keepalive@openssh.com requests; a request
	// unanswered for that long again closes the connection. 0 means 30s; a
	// negative value disables keepalives.
	KeepAlive time.Duration
	// DialTimeout bounds dial plus handshake when ctx has no earlier
	// deadline. 0 means 20s.
	DialTimeout time.Duration
	// Lazy lets Dial return a Client although the site cannot be reached
	// now (the first dial failed with backends.ErrUnavailable): calls then
	// reconnect with the usual backoff and fail with ErrUnavailable until
	// the site answers, and Client.Err says why. A broker keeps working
	// with its other sites instead of refusing to start. A login that
	// needs a person's answer (ErrNeedsLogin) is let through the same way:
	// the Client then waits for Login. A changed or unknown host key,
	// failed authentication or a bad configuration still fail Dial: those
	// need a person to change something, not a retry.
	Lazy bool

	// SFTPSequential turns off pkg/sftp's concurrent reads and writes (for
	// comparisons and for servers that mishandle them).
	SFTPSequential bool
	// SFTPRequests is the number of concurrent requests per file. 0 means 64.
	SFTPRequests int

	// MaxFileSize bounds every file a Stager puts or gets, in bytes; a
	// larger one fails with ErrTooLarge, the copy stopped at the limit. 0
	// means DefaultMaxFileSize (10 GiB).
	MaxFileSize int64
	// MinTransferRate (bytes per second) and MinTransferTime make each
	// transfer's deadline: a transfer of n bytes is cancelled with
	// ErrTransferTimeout after MinTransferTime + n/MinTransferRate (an
	// upload of unknown size counts as MaxFileSize). 0 means
	// DefaultMinTransferRate (1 MiB/s) and DefaultMinTransferTime (1m).
	MinTransferRate float64
	MinTransferTime time.Duration
	// MaxOutput bounds what Run keeps of a command's stdout and of its
	// stderr, in bytes; more fails with ErrOutputLimit. 0 means
	// DefaultMaxOutput (64 MiB).
	MaxOutput int

	Logger *slog.Logger
}

// Hop is one jump host. Empty fields take the target's: User, the
// credentials (KeyFiles, CertFiles, UseAgent, when none are set) and
// KnownHosts.
type Hop struct {
	Host       string
	Port       int // 0 means 22
	User       string
	KeyFiles   []string
	CertFiles  []string
	UseAgent   bool
	KnownHosts []string
}

// withDefaults validates cfg and fills in defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Host == "" {
		return cfg, fmt.Errorf("transport config: host is empty (want a host name or IP address)")
	}
	if cfg.User == "" {
		return cfg, fmt.Errorf("transport config: user is empty for host %s (want the login name at the site)", cfg.Host)
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return cfg, fmt.Errorf("transport config: port %d out of range (want 1-65535)", cfg.Port)
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxSessions < 1 {
		return cfg, fmt.Errorf("transport config: max sessions %d (want >= 1; 2 or more when staging files)", cfg.MaxSessions)
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.SFTPRequests <= 0 {
		cfg.SFTPRequests = DefaultSFTPRequests
	}
	switch {
	case cfg.MaxOutput == 0:
		cfg.MaxOutput = DefaultMaxOutput
	case cfg.MaxOutput < 0:
		return cfg, fmt.Errorf("transport config: max output %d (want > 0 bytes; 0 means %d)", cfg.MaxOutput, DefaultMaxOutput)
	}
	switch {
	case cfg.MaxFileSize == 0:
		cfg.MaxFileSize = DefaultMaxFileSize
	case cfg.MaxFileSize < 0:
		return cfg, fmt.Errorf("transport config: max file size %d (want > 0 bytes; 0 means %d)", cfg.MaxFileSize, DefaultMaxFileSize)
	}
	switch {
	case cfg.MinTransferRate == 0:
		cfg.MinTransferRate = DefaultMinTransferRate
	case !(cfg.MinTransferRate > 0) || cfg.MinTransferRate > 1e15:
		return cfg, fmt.Errorf("transport config: min transfer rate %g bytes/s (want > 0 and finite)", cfg.MinTransferRate)
	}
	switch {
	case cfg.MinTransferTime == 0:
		cfg.MinTransferTime = DefaultMinTransferTime
	case cfg.MinTransferTime < 0:
		return cfg, fmt.Errorf("transport config: min transfer time %s (want > 0)", cfg.MinTransferTime)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.KnownHosts) == 0 && !cfg.InsecureIgnoreHostKey {
		if home, err := os.UserHomeDir(); err == nil {
			cfg.KnownHosts = []string{filepath.Join(home, ".ssh", "known_hosts")}
		}
	}
	if len(cfg.KeyFiles) == 0 && !cfg.UseAgent {
		return cfg, fmt.Errorf("%w: no credentials for %s: set key files or use the agent", ErrAuth, cfg.target())
	}
	for i := range cfg.Jumps {
		h := &cfg.Jumps[i]
		if h.Host == "" {
			return cfg, fmt.Errorf("transport config: jump host %d of %d has no host", i+1, len(cfg.Jumps))
		}
		if h.Port == 0 {
			h.Port = DefaultPort
		}
		if h.Port < 0 || h.Port > 65535 {
			return cfg, fmt.Errorf("transport config: jump host %d (%s) port %d out of range (want 1-65535)", i+1, h.Host, h.Port)
		}
		if h.User == "" {
			h.User = cfg.User
		}
		if len(h.KeyFiles) == 0 && !h.UseAgent {
			h.KeyFiles, h.CertFiles, h.UseAgent = cfg.KeyFiles, cfg.CertFiles, cfg.UseAgent
		}
		if len(h.KnownHosts) == 0 {
			h.KnownHosts = cfg.KnownHosts
		}
	}
	return cfg, nil
}

// addr is "host:port" for dialing.
func (cfg Config) addr() string { return net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)) }

// target is "user@host:port" for messages.
func (cfg Config) target() string { return cfg.User + "@" + cfg.addr() }
