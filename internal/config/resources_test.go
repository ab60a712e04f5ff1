package config

import (
	"errors"
	"strings"
	"testing"
)

// A site's memory, GPUs and account are read and bounded, each error
// naming its key.
func TestSiteNodeShapeAndAccount(t *testing.T) {
	ok := "sites:\n  - {name: A, kind: sim, nodes: 4, cores_per_node: 8, mem_per_node: 16GiB, gpus_per_node: 2, account: proj-42}\n"
	c, err := Parse("r.yaml", []byte(ok), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sites[0]; s.MemPerNode != 16<<30 || s.GPUsPerNode != 2 || s.Account != "proj-42" {
		t.Fatalf("site %+v", s)
	}
	site := func(kv string) string { return "sites:\n  - {name: A, kind: sim, nodes: 4, " + kv + "}\n" }
	for _, tc := range []struct{ src, key, says string }{
		{site("mem_per_node: 2PiB"), "sites[0].mem_per_node", ""},
		{site("gpus_per_node: 5000"), "sites[0].gpus_per_node", "from 0 to 1024"},
		{site("gpus_per_node: -1"), "sites[0].gpus_per_node", "from 0 to 1024"},
		{site("account: '-x'"), "sites[0].account", "letters, digits"},
	} {
		_, err := Parse("r.yaml", []byte(tc.src), env(map[string]string{"HOME": "/h"}))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "r.yaml: "+tc.key+": ") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v", tc.src, err)
		}
	}
}
