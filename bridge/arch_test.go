package bridge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOneCallerPerSideEffect checks the pipeline's rule that the submit
// stage (submitAll) is the only function that submits to a site and the
// cancel stage (sendCancel) the only one that cancels there: every other
// part of the broker hands them requests.
func TestOneCallerPerSideEffect(t *testing.T) {
	want := map[string]string{"Submit": "submitAll", "SubmitBatch": "submitAll", "Cancel": "sendCancel"}
	callers := map[string][]string{}
	fset := token.NewFileSet()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if _, side := want[sel.Sel.Name]; !side || !remote(sel.X) {
					return true
				}
				callers[sel.Sel.Name] = append(callers[sel.Sel.Name], fset.Position(call.Pos()).String()+" in "+fn.Name.Name)
				if fn.Name.Name != want[sel.Sel.Name] {
					t.Errorf("%s: %s calls %s; only %s may", fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name, want[sel.Sel.Name])
				}
				return true
			})
		}
	}
	for _, m := range []string{"Submit", "Cancel"} {
		if len(callers[m]) != 1 {
			t.Errorf("%d calls of %s on a backend, want 1: %v", len(callers[m]), m, callers[m])
		}
	}
}

// remote reports whether x is a backend: a SiteConfig's Backend field, or
// a batch submitter (bs).
func remote(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "Backend"
	case *ast.Ident:
		return slices.Contains([]string{"bs", "be"}, x.Name)
	}
	return false
}

// TestOnlyTheLedgerRecords checks that features and stages change and
// record a job only through the ledger's transitions (note, record,
// commit, save, saveLater, endAs, requeueAs…): outside ledger.go and
// ledger_writes.go nothing calls the ledger's helpers addEvent and
// persist, nor writes to the Store itself except through putNew.
func TestOnlyTheLedgerRecords(t *testing.T) {
	helpers := []string{"addEvent", "persist"}
	ledgerFiles := []string{"ledger.go", "ledger_writes.go"}
	fset := token.NewFileSet()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var callee string
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				callee = fn.Sel.Name
				if (callee == "Put" || callee == "PutCharged") && isStore(fn.X) && !slices.Contains(ledgerFiles, name) {
					t.Errorf("%s: writes to the Store directly; only the ledger's transitions write a job", fset.Position(call.Pos()))
				}
			case *ast.Ident:
				callee = fn.Name
			}
			if !slices.Contains(helpers, callee) {
				return true
			}
			seen[callee]++
			if !slices.Contains(ledgerFiles, name) {
				t.Errorf("%s: calls the ledger's %s; use its transitions (note, record, commit, save, saveLater…)", fset.Position(call.Pos()), callee)
			}
			return true
		})
	}
	for _, h := range helpers {
		if seen[h] == 0 {
			t.Errorf("no call of %s found: the test no longer sees the ledger's helpers", h)
		}
	}
}

// isStore reports whether x names the ledger's Store (store, or x.store).
func isStore(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "store"
	case *ast.Ident:
		return x.Name == "store"
	}
	return false
}
