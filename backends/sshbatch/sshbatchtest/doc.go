// Package sshbatchtest holds the cases every dialect of backends/sshbatch
// passes against a real batch site behind its real sshd: the conformance
// suite (backends/backendtest), one status command per poll, site data,
// job logs, batched submission with refusals, a cut batch, and batched jobs
// that really run. A dialect's real-site test describes its testbed as a
// Site and calls Run (and Conformance for more sites); what only one batch
// system does stays in its package's tests.
//
// The testbeds run on the test's machine: Site.Root, the backends' remote
// directory, is also a local path the cases prepare files in.
package sshbatchtest
