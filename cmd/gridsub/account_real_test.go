package main

import (
	"os"
	"testing"
)

// needEnforcedAccounts skips unless siteA of the SLURM testbed keeps
// accounting and enforces associations (its login user may charge only
// account gridsub).
func needEnforcedAccounts(t *testing.T) {
	t.Helper()
	needSlurm(t)
	if os.Getenv("GRIDSUB_SITEA_ACCOUNTING") != "1" || os.Getenv("GRIDSUB_ACCOUNTING_ENFORCE") == "" {
		t.Skip("siteA has no enforced associations: start the testbed with GRIDSUB_SLURMDBD=1 GRIDSUB_ACCOUNTING_ENFORCE=associations (scripts/test.sh does)")
	}
}

// TestRealSlurmWrongAccountNamed: on the real SLURM testbed with
// slurmdbd and enforced associations, a job whose site options name an
// account siteA's login user does not have is refused by `gridsub
// validate` and by the dry run before anything is submitted, naming the
// site, the field and the accounts siteA has; a configuration whose siteA
// account is wrong is named as misconfigured by both, not called "down".
func TestRealSlurmWrongAccountNamed(t *testing.T) {
	needEnforcedAccounts(t)
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `name: wrongacct
command: ["/bin/true"]
resources: {nodes: 1, walltime: 5m}
scheduling: {sites: [siteA]}
site_options: {siteA: {account: nosuch}}
`)
	want := `site siteA has no account "nosuch" for its login user; it has: gridsub`
	wantNamed(t, "validate", exitUsage, []string{"--config", "configs/local-slurm.yaml", "validate", job}, `SiteOptions["siteA"].Account`, want)
	wantNamed(t, "dry run", exitUsage, []string{"--config", "configs/local-slurm.yaml", "submit", "--dry-run", "--embedded", job}, `SiteOptions["siteA"].Account`, want)
	good := writeFile(t, dir, "good.yaml", "name: goodacct\ncommand: [\"/bin/true\"]\nresources: {nodes: 1, walltime: 5m}\nscheduling: {sites: [siteA]}\nsite_options: {siteA: {account: gridsub}}\n")
	wantNamed(t, "validate, the account it has", 0, []string{"--config", "configs/local-slurm.yaml", "validate", good})

	cfg := misconfigured(t, dir, "configs/local-slurm.yaml", "partition: batch", "partition: batch\n    account: nosuch")
	pinned := writeFile(t, dir, "pinned.yaml", "name: pinned\ncommand: [\"/bin/true\"]\nresources: {nodes: 1, walltime: 5m}\nscheduling: {sites: [siteA]}\n")
	open := writeFile(t, dir, "open.yaml", "name: open\ncommand: [\"/bin/true\"]\nresources: {nodes: 1, walltime: 5m}\n")
	want = `site siteA has no account "nosuch" (sites.siteA.account in the configuration); it has: gridsub`
	wantNamed(t, "validate, misconfigured site", exitJobFailed, []string{"--config", cfg, "validate", pinned}, "site siteA is misconfigured: "+want)
	wantNamed(t, "dry run, misconfigured site", 0, []string{"--config", cfg, "submit", "--dry-run", "--embedded", open}, "misconfigured: "+want)
}
