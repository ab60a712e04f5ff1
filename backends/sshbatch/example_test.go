package sshbatch_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Example_simulatedSite: how a simulated site answers a batch without a
// shell — Decode the script, run each command its own way, and write each
// command's stdout and stderr sections with WriteSection; the backend's
// Parse reads them back as from a real /bin/sh.
func Example_simulatedSite() {
	bs, _, _ := sshbatch.Build([]sshbatch.Command{
		{Argv: []string{"sbatch", "--parsable", "--job-name=a"}, Stdin: "#!/bin/bash\ntrue\n"},
		{Argv: []string{"sbatch", "--parsable", "--partition=nope"}, Stdin: "#!/bin/bash\ntrue\n"},
	}, 0, 0)
	script := bs[0].Argv[2] // what the site receives: /bin/sh -c <script> gridsub-batch

	nonce, cmds, err := sshbatch.Decode(script)
	if err != nil {
		fmt.Println(err)
		return
	}
	var stdout, stderr bytes.Buffer
	for k, c := range cmds {
		out, errOut, code := "", "", 0
		if strings.Contains(strings.Join(c.Argv, " "), "--partition=nope") {
			errOut, code = "sbatch: error: invalid partition specified: nope\n", 1
		} else {
			out = fmt.Sprintf("%d\n", 100+k)
		}
		sshbatch.WriteSection(&stdout, nonce, k, code, []byte(out))
		sshbatch.WriteSection(&stderr, nonce, k, code, []byte(errOut))
	}
	for k, o := range sshbatch.Parse(bs[0].Nonce, len(cmds), stdout.Bytes(), stderr.Bytes()) {
		fmt.Printf("job %d: exit %d, stdout %q, stderr %q\n", k, o.ExitCode, o.Stdout, o.Stderr)
	}
	// Output:
	// job 0: exit 0, stdout "100\n", stderr ""
	// job 1: exit 1, stdout "", stderr "sbatch: error: invalid partition specified: nope\n"
}
