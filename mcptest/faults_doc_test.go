package mcptest_test

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient/mcptest"
)

// Every FaultKind is documented where go doc shows it: with a comment of its own (go doc -all,
// go doc mcptest.Kind), and by a line of FaultKind's comment (go doc mcptest.FaultKind, which
// shows the constants only as a summary); and String names each kind as in Go source.
func TestFaultKindsAreDocumentedAndNamed(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "faults.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := doc.NewFromFiles(fset, []*ast.File{f}, "github.com/northstar-mcp/mcpclient/mcptest")
	if err != nil {
		t.Fatal(err)
	}
	var kind *doc.Type
	for _, typ := range pkg.Types {
		if typ.Name == "FaultKind" {
			kind = typ
		}
	}
	if kind == nil || len(kind.Consts) != 1 {
		t.Fatalf("FaultKind and its one block of constants not found in faults.go")
	}
	var names []string
	for _, spec := range kind.Consts[0].Decl.Specs {
		spec := spec.(*ast.ValueSpec)
		name := spec.Names[0].Name
		names = append(names, name)
		if !strings.HasPrefix(spec.Doc.Text(), name+" ") {
			t.Errorf("%s: doc comment %q, want one that begins with its name", name, spec.Doc.Text())
		}
		if !strings.Contains(kind.Doc, "  - "+name+": ") {
			t.Errorf("%s: not listed in FaultKind's comment", name)
		}
	}
	for i, name := range names {
		if got := mcptest.FaultKind(i + 1).String(); got != name {
			t.Errorf("FaultKind(%d).String() = %q, want %q", i+1, got, name)
		}
	}
	for _, k := range []mcptest.FaultKind{0, mcptest.FaultKind(len(names) + 1), -1} {
		if got, want := k.String(), fmt.Sprintf("FaultKind(%d)", int(k)); got != want {
			t.Errorf("String of a number naming no kind: %q, want %q", got, want)
		}
	}
}
