// Package users holds what the daemon knows of its users beside the job
// store: per-user bearer tokens for the TCP API (Tokens, one 0600 file of
// SHA-256 hashes in the state directory: a token is shown once, at
// creation, and never stored) and per-user, per-site identities
// (Credentials, one 0600 file per user and site: which key, certificate,
// account and remote user a user's jobs use at a site). Neither is ever
// written to the job store or to a log.
//
// Who asks is decided by the API (bridge/api: the unix socket's peer
// credentials, or a token's user); limits and fair share by the broker.
package users
