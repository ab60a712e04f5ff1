// Package remap holds the built-in policy.Remaps, repetitive mapping of
// jobs that wait in a site's queue (SPEC.md §4). Each pass compares a
// waiting job's predicted completion where it waits with the best
// placement that could start it now elsewhere, and moves it when the gain
// is worth it: Gain ("gain", the default) oldest dispatch first, Benefit
// ("benefit") the move that saves the most of the jobs' benefit functions
// first. Pure: a RemapInput in, moves out.
package remap
