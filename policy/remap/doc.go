// Package remap holds the built-in policy.Remap ("gain"): repetitive
// mapping of jobs that wait in a site's queue (SPEC.md §4). Each pass
// compares a waiting job's predicted completion where it waits with the
// best placement that could start it now elsewhere, and moves it when the
// gain is worth it. Pure: a RemapInput in, moves out.
package remap
