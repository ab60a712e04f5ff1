// Package fakesite builds stand-ins for real sites out of simulated ones,
// for tests of code that treats real sites differently (the daemon's
// health probes, `gridsub sites` against a daemon): a site of a real kind
// that needs no SSH, whose Info can be made to fail on demand and which
// can claim a measured link.
//
// It is test support, imported only by _test files; it lives outside them
// because more than one package's tests need the same stand-ins.
package fakesite
