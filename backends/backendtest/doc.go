// Package backendtest is the conformance suite every gridsub backend must
// pass: the real SLURM sites (backends/slurm), the simulated sites
// (simbackend) and anything served through the plugin bridge.
//
// A backend's test builds a Harness (the Backend, fresh grid ids, how site
// time passes, capability flags) and calls Run. The suite checks the
// contract of backends.Backend and its optional capabilities: a job runs to
// completed with exit code 0; a non-zero exit is failed with its code; a job
// past its walltime is timeout; pending and running jobs cancel (twice is
// fine); unknown ids come back as lost in a batched Status that keeps order;
// bad specs are refused with ErrInvalidSpec or ErrRejected and the site
// still works; a hostile job name and command stay literal; staged inputs
// reach the job and outputs come back intact; FindByGridID finds exactly the
// tagged job; reservations are created, shown, used, refused when they
// overlap, and deleted idempotently.
package backendtest
