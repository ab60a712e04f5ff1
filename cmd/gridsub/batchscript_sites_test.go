package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// scriptAtSite runs a batch script through gridsub (embedded) with a site
// configuration, requires success and returns the file its -o directive
// wrote, fetched back from logs/.
func scriptAtSite(t *testing.T, config, script string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := gridsub(t, "--config", config, path, "--output", "json", "--out-dir", filepath.Join(dir, "out"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var j jobJSON
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	for _, p := range j.Outputs {
		if strings.Contains(p, "/logs/") {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("no logs/ output among %v\n%s", j.Outputs, stderr)
	return ""
}

// TestSbatchScriptAtPBSSite: a #SBATCH script runs at the real OpenPBS
// site, its directives translated: the job sees SLURM's variables (set by
// gridsub, with gridsub's id) beside PBS's own, and its -o pattern.
func TestSbatchScriptAtPBSSite(t *testing.T) {
	needPBS(t)
	out := scriptAtSite(t, "configs/local-pbs.yaml", `#!/bin/bash
#SBATCH --job-name=portable
#SBATCH --ntasks=1 --time=5
#SBATCH --output=logs/%x-%j.out
echo "slurm=$SLURM_JOB_ID ntasks=$SLURM_NTASKS name=$SLURM_JOB_NAME num=$GRIDSUB_JOB_NUM pbs=$PBS_JOBID"
`)
	m := regexp.MustCompile(`^slurm=(\d+) ntasks=1 name=portable num=(\d+) pbs=(\S+)\n$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[3] == m[2] || !strings.Contains(m[3], ".") {
		t.Fatalf("the job printed %q: want SLURM_JOB_ID = GRIDSUB_JOB_NUM and PBS's own PBS_JOBID", out)
	}
}

// TestPBSScriptAtSLURMSite: a #PBS script runs at the real SLURM site: PBS's
// variables set by gridsub, SLURM's own left alone (srun needs them).
func TestPBSScriptAtSLURMSite(t *testing.T) {
	needSlurm(t)
	// siteA of configs/local-slurm.yaml: a testbed of one site has no siteB.
	cfg := filepath.Join(t.TempDir(), "siteA.yaml")
	os.WriteFile(cfg, []byte(`sites:
  - name: siteA
    kind: slurm
    nodes: 8
    cores_per_node: ${GRIDSUB_SITEA_CPUS_PER_NODE:-2}
    partition: batch
    remote_dir: ${GRIDSUB_SITEA_SCRATCH}
    ssh:
      host: ${GRIDSUB_SSH_HOST}
      port: ${GRIDSUB_SITEA_SSH_PORT}
      user: ${GRIDSUB_SSH_USER}
      key_file: ${GRIDSUB_SSH_KEY}
      known_hosts: ${GRIDSUB_SSH_KNOWN_HOSTS}
broker:
  interval: 1s
`), 0o644)
	out := scriptAtSite(t, cfg, `#!/bin/bash
#PBS -N fromtorque
#PBS -l nodes=1:ppn=1,walltime=00:05:00
#PBS -o logs/torque.out
#PBS -j oe
echo "pbs=$PBS_JOBID name=$PBS_JOBNAME np=$PBS_NP num=$GRIDSUB_JOB_NUM slurm=$SLURM_JOB_ID"
echo to-stderr >&2
`)
	m := regexp.MustCompile(`^pbs=(\d+) name=fromtorque np=1 num=(\d+) slurm=(\d+)\nto-stderr\n$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the job printed %q: want PBS_JOBID = GRIDSUB_JOB_NUM, SLURM's own SLURM_JOB_ID, both streams (-j oe)", out)
	}
}
