// Package transport is gridsub's way into a site: SSH command execution and
// SFTP file staging over one long-lived connection per site, with transfer
// accounting for the policies' transfer-cost term.
//
// # Connection
//
// Dial opens one SSH connection (x/crypto/ssh) and returns a Client that
// every caller for that site shares. Dial and handshake are bounded by the
// context (x/crypto has no DialContext: net.Dialer.DialContext, then
// ssh.NewClientConn on a socket whose deadline comes from ctx and which is
// closed if ctx ends first) and by Config.DialTimeout. A keepalive@openssh.com
// request goes out every Config.KeepAlive; one left unanswered for another
// interval closes the connection, so nobody waits on a dead TCP connection.
//
// When the connection has died the next caller redials transparently (only
// one goroutine dials; the others wait for it). Consecutive failed dials back
// off exponentially (250ms doubling to 30s, with jitter); a caller whose
// deadline ends before the backoff does is told so at once with an error
// wrapping backends.ErrUnavailable. A command is never re-sent after it was
// started (it may have run: sbatch is not idempotent); only opening a session
// is retried, once, on a fresh connection.
//
// # Sessions
//
// OpenSSH's sshd refuses more than MaxSessions (10 by default) sessions per
// connection. A semaphore of Config.MaxSessions (default 8) slots bounds the
// sessions this Client opens; the SFTP client holds one slot for as long as
// it lives. If the server still refuses a session (a lower MaxSessions, or
// sessions still closing; OpenSSH 9.2 answers "connect failed: open failed",
// others "administratively prohibited"), opening backs off (50ms doubling to
// 2s) and retries until ctx ends, then fails with ErrSessionLimit (which also
// matches backends.ErrUnavailable). Waiting for a free slot of the
// semaphore past ctx fails the same way. Opening a session and starting the
// command are bounded by ctx even if the server never answers.
//
// Run implements backends.Runner. A non-zero exit is Result.ExitCode, not an
// error; a missing exit status (connection lost) is an error wrapping
// backends.ErrUnavailable. When ctx ends during Run, the remote process is
// sent SIGTERM, the session is closed and Run returns at once with ctx.Err()
// wrapped. OpenSSH delivers signal requests from 7.9 on, to the process group
// of the command, but refuses them for root logins ("session signalling
// requires privilege separation"); closing the channel does not kill a
// command without a pty, so such a command runs on, holding its sshd session,
// until it ends.
//
// # Quoting
//
// The SSH protocol carries one command string, which the login shell parses.
// Run builds it with Quote: every word that is not made of safe characters
// is single-quoted, so "$(touch /tmp/owned); rm -rf ~", quotes, newlines,
// globs and spaces reach the program literally. The login shell must be
// POSIX-like (sh, bash, dash, ksh, zsh). Environment variables are argv words
// of the caller's choosing (e.g. env VAR=value sbatch ...).
//
// # Host keys and authentication
//
// Host keys are checked against known_hosts files with
// golang.org/x/crypto/ssh/knownhosts: "[host]:port" entries, several keys per
// host (round-robin login nodes), hashed names, @cert-authority and @revoked
// lines. The host key algorithms of the keys known for the host are asked for
// first, as OpenSSH does, so a server with several host keys does not look
// "changed". A key that differs from the known ones fails with
// ErrHostKeyChanged naming host, port, the offered fingerprint, the
// known_hosts file and line, and the ssh-keygen -R command to run after
// verifying the new key with the site's admins; an unknown host fails with
// ErrHostKeyUnknown and the ssh-keyscan line to add it. Config.InsecureIgnoreHostKey
// skips the check only for a host the known_hosts files (Config.KnownHosts,
// else ~/.ssh/known_hosts) do not list, with a WARN on every such connect; a
// host they list must still offer a listed key (ErrHostKeyChanged,
// ErrHostKeyRevoked otherwise), so the flag can never override known_hosts.
//
// A host certificate is checked against @cert-authority lines; one
// outside its validity window fails with ErrHostCertInvalid giving the
// window. When a @cert-authority line covers the host, the certificate
// host key algorithms are asked for first, so the server presents its
// certificate rather than its bare key. (x/crypto's knownhosts matches a
// pattern's port exactly: "@cert-authority *.example.org" covers port 22.)
//
// Authentication offers the key files' keys (each read at every connect,
// so a renewed short-lived certificate is picked up) and the ssh-agent's,
// OpenSSH user certificates first (Config.CertFiles, and "<key>-cert.pub"
// beside a key file; one outside its window is left out and a failed login
// says so with the window), then keyboard-interactive. Failure is ErrAuth
// naming user@host:port, what was offered, the certificates left out and
// whether answers to the server's questions were rejected. No password is
// ever stored or logged.
//
// # One-time passwords and passphrases
//
// Questions only a person can answer — a keyboard-interactive prompt (a
// TOTP code, a Duo-style "1") or an encrypted key file's passphrase — go to
// a Prompter (Config.Prompter, or the one given to Client.Login). A
// passphrase is asked once: the decrypted key stays in memory for the
// Client's lifetime and serves every later connection and every hop. With
// no Prompter (a daemon), such a question fails the dial with ErrNeedsLogin
// (which matches backends.ErrNeedsLogin and backends.ErrUnavailable) and
// the Client then waits: it dials nothing and every call fails at once,
// not sent, until Client.Login connects with a Prompter — so a lost
// connection never turns into a storm of failed logins or push
// notifications. The daemon relays Login's questions to `gridsub login`.
//
// # Jump hosts and the OpenSSH configuration
//
// Config.Jumps (or Config.ProxyJump, "[user@]host[:port],...") are jump
// hosts reached in order, each through the one before with a direct-tcpip
// channel, as ssh -J does; the login node is reached through the last.
// Every hop's host key is checked against its known_hosts (the flag
// InsecureIgnoreHostKey never applies to a hop), and errors name the hop
// ("jump host 2 of 2 (user@host:port)", "login node ..."). Each hop's
// connection is kept, with keepalives, and reused: when only the login
// node's connection drops, it is redialed through the live hops.
//
// With Config.SSHConfig the host may be an alias of the OpenSSH client
// configuration: ResolveSSHConfig asks OpenSSH itself (ssh -G) and fills
// the fields left unset — HostName, User, Port, IdentityFile,
// IdentitiesOnly, CertificateFile, UserKnownHostsFile,
// GlobalKnownHostsFile, ProxyJump (every hop resolved the same way),
// ServerAliveInterval, ConnectTimeout — so the explicit fields win. A
// setting gridsub cannot honour (ProxyCommand, StrictHostKeyChecking no,
// KnownHostsCommand, HostKeyAlias, UserKnownHostsFile /dev/null, an
// IdentityAgent other than $SSH_AUTH_SOCK) fails with ErrSSHConfig naming
// it. Diagnose walks the path hop by hop for `gridsub doctor`.
//
// # Staging
//
// Client.Stager(root) returns a backends.Stager confined to root. Remote
// paths are cleaned; absolute paths and paths leaving root via ".." are
// refused with ErrPathEscape (which matches backends.ErrInvalidSpec). On the
// server every component below root is checked with Lstat before anything
// is opened or created (missing directories are made one at a time and
// checked again): a symbolic link, device, FIFO or socket anywhere on the
// path, or as the file itself, fails with ErrSpecialFile naming the path
// and its type, so no link is followed out of root in either direction and
// only regular files move. Get also checks that the opened handle is the
// file it checked (type, size, mtime). Root itself is configuration and
// may be a link. SFTP has no openat: a process of the remote user that
// swaps a checked directory for a link between the check and the open is
// not excluded (SLURM kills a job's processes when it ends, so in practice
// a finished job cannot).
//
// Every transfer is bounded. A file over Config.MaxFileSize fails with
// ErrTooLarge before a byte moves when its size is known, and a source or
// remote file that grows past it (an endless stream) is stopped at the
// limit; GetLimit takes a tighter per-call limit (a job's remaining
// budget). Each transfer runs under its own deadline, MinTransferTime +
// size/MinTransferRate from its start, and ends with ErrTransferTimeout
// (which matches context.DeadlineExceeded) when it passes: a stalled server
// or network path costs at most that long plus the abort graces below.
//
// All transfers use the connection's one SFTP client (pkg/sftp) with
// concurrent reads and writes (Config.SFTPRequests requests in flight per
// file) unless Config.SFTPSequential. Put is atomic: it writes
// ".<name>.gridsub-tmp-<random>" in the target directory (parents created),
// hashes the bytes with SHA-256 while streaming, fsyncs when the server
// offers fsync@openssh.com, closes (checking the error), verifies the size,
// and renames over the final name with posix-rename@openssh.com. On failure
// the temp file is removed; if the connection died and it cannot be, the
// Client remembers it and removes it when the next SFTP session starts.
// pkg/sftp notices a cancelled ctx only between requests; if a transfer has
// not returned abortGrace (2s) after its ctx ended (a stalled server), its
// SFTP session is closed under it (other transfers on it fail as
// unavailable; the next one starts a new session); if even that is not
// confirmed within another abortGrace (the network path hangs), the SSH
// connection is closed and the next call reconnects.
//
// # Accounting
//
// Every Put and Get returns a backends.Transfer (bytes, duration, SHA-256)
// and feeds the Client's Estimator, an exponentially weighted least-squares
// fit of seconds = latency + secPerByte*bytes (see Estimator).
//
// # Errors
//
// See the sentinel block in errors.go. Connection-level failures match
// backends.ErrUnavailable (retryable); host-key and authentication failures
// do not.
package transport
