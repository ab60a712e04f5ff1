// Package swf reads workload traces in the Standard Workload Format of the
// Parallel Workloads Archive (18 numeric fields per job line, "; Key: value"
// header comments, -1 for missing values), plain or gzip-compressed, as a
// stream: one job at a time, so a 200,000-job trace never sits in memory.
//
// It also holds the two transformations gridsub's experiments need:
// StrongFilter, predictsim's input filter that produced the reference EASY
// schedule of CTC-SP2, and Shape, which turns a filtered trace into paper
// 000's Workload 1 and 2 (first N jobs, width cap, uniform submit site and
// data size, 90 % wide jobs) from an explicit seed.
//
// Traces are not part of the repository; tests look for them in
// $GRIDSUB_WORKLOADS, else ../shared/workloads next to the repository root,
// and skip when absent.
package swf
