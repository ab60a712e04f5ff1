// Package api is the broker's HTTP/JSON API and its Go client, the one the
// CLI uses to talk to `gridsub serve`.
//
//	CLI ── Client ──HTTP/JSON──► unix socket (0600) or TCP + bearer token
//	                              │
//	                            Server ── Broker (interface) ── *bridge.Broker (+ its Store)
//
// A *bridge.Broker becomes a Broker with WithStore(b, store): ListJobs
// comes from the store, Job falls back to it for jobs of an earlier run, and
// the store's Health answers GET /v1/health.
//
// Routes (openapi.yaml, also served at GET /openapi.yaml, documents each):
//
//	POST /v1/jobs                submit a bridge.Request; 201 with the job at once,
//	                             422 infeasible when no configured site can run it
//	GET  /v1/jobs                list: state (repeatable, comma-separated), site,
//	                             name, after, limit, events, order (oldest, the
//	                             default, or newest first); paged, with "next"
//	GET  /v1/jobs/{id}           one job with its events
//	GET  /v1/jobs/{id}/events    its history
//	POST /v1/jobs/{id}/cancel    cancel; 409 if it already ended
//	GET  /v1/jobs/{id}/explain   where a queued job would be placed now, and why
//	POST /v1/explain             a dry run of a bridge.Request (validated as POST
//	                             /v1/jobs; 422 infeasible when no site can run it)
//	GET  /v1/sites               the sites: names, and from a SiteReporter (the
//	                             daemon) a Site record each — health, load,
//	                             measured link, trust, job outcomes
//	GET  /v1/health              ok, or 503 when the Broker's Checker says not
//
// GET /v1/sites keeps "sites" as the list of names that clients before
// site health read (the CLI's submit validates job files against it) and
// adds "details", one Site per site in the same order, when the Broker is a
// SiteReporter; NewSite builds a Site from a configured site and the
// store's record of it (status "ok", "unreachable: <reason>" or "not
// probed yet"; null for what was never measured). Client.Sites returns the
// names, Client.SiteStatus the whole answer.
//
// Errors are {"error": "...", "code": "..."} with the status of their
// sentinel: bridge.ErrNotFound 404 not_found; bridge.ErrBadRequest 400
// bad_request; bridge.ErrUnknownSite 400 unknown_site; bridge.ErrFinal 409
// final; store.ErrDiskFull 507 disk_full; store.ErrUnavailable 503
// unavailable; anything else 500 internal. The client turns them back into
// *Error values that unwrap to the same sentinels, so errors.Is works
// across the socket as it does in process.
//
// ListenUnix creates the socket with mode 0600 (in a private directory,
// then linked into place), refuses to start when a live server answers on
// the path (ErrInUse), removes a stale socket, and never removes anything
// that is not a socket (ErrNotSocket). Serve and ListenTCP refuse a TCP
// listener without a token (ErrNoToken) or with one shorter than
// MinTokenLen (ErrShortToken), and plain HTTP on a non-loopback address
// (ErrPlaintext) unless TLS (ServerTLS: TLS 1.2+, a key of mode 0600) or the
// InsecurePlaintext override is given. A client that finds nobody on the
// socket returns ErrNoDaemon, so the CLI can fall back to an embedded
// broker; ClientTLS and HTTPClient let it trust a private CA.
//
// Every server is bounded (Limits, NewHTTPServer, LimitListener): header,
// read, write and idle timeouts, header size, connections per listener,
// and a body of at most ServerOptions.MaxBody read before any handler runs
// (413 too_large naming the limit; 408 timeout when it does not arrive in
// time). The client reads answers of at most MaxResponse bytes.
package api
