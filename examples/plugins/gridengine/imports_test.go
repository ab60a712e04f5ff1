package gridengine

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsOnlyPublicPackages: the plugin is written as a centre would
// write its own, against gridsub's public packages only — the backend
// contract, the SSH batch site and its transport, and the plugin SDK —
// never internal/ or another part of gridsub.
func TestImportsOnlyPublicPackages(t *testing.T) {
	const mod = "github.com/gridsub/gridsub/"
	allowed := map[string]bool{mod + "backends": true, mod + "backends/sshbatch": true, mod + "backends/transport": true,
		mod + "bridge/plugins": true, mod + "examples/plugins/gridengine": true}
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("cmd/*/*.go")
	n := 0
	for _, f := range append(files, more...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n++
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, mod) && !allowed[p] {
				t.Errorf("%s imports %s: only backends, backends/sshbatch, backends/transport and bridge/plugins are the plugin's to use", f, p)
			}
		}
	}
	if n < 5 {
		t.Fatalf("checked %d files", n)
	}
}
