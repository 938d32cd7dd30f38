package reconciler

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/render"
)

// neverRetried are the classes retry_on may not name, and why.
var neverRetried = map[FailureClass]string{
	FailureIdleGPUs: "the platform's idle_policy stopped the attempt; a retry would hold the GPUs again",
}

// declaredFailureClasses are the values of every FailureClass constant the
// package declares, read from its source so that a class added anywhere is
// seen here.
func declaredFailureClasses(t *testing.T) []FailureClass {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []FailureClass
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if id, typed := vs.Type.(*ast.Ident); !typed || id.Name != "FailureClass" {
				return true
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					c, _ := strconv.Unquote(lit.Value)
					out = append(out, FailureClass(c))
				}
			}
			return true
		})
	}
	if len(out) < 8 {
		t.Fatalf("found %d FailureClass constants in the source, want at least 8: %v", len(out), out)
	}
	return out
}

// TestTheFailureClassesAreTheOnesRetryOnAccepts ties the reconciler's
// failure classes to tau.yaml's resilience.retry_on: the values render
// validates and the enum of the JSON Schema editors read. A class added on
// one side only would be one a researcher cannot retry, or one that never
// happens.
func TestTheFailureClassesAreTheOnesRetryOnAccepts(t *testing.T) {
	var ours []string
	for _, c := range declaredFailureClasses(t) {
		if _, ok := neverRetried[c]; !ok {
			ours = append(ours, string(c))
		}
	}
	slices.Sort(ours)
	accepted := slices.Sorted(slices.Values(render.FailureClasses))
	if !slices.Equal(ours, accepted) {
		t.Errorf("reconciler classes %v, render.FailureClasses %v", ours, accepted)
	}
	f, _ := reflect.TypeFor[render.Resilience]().FieldByName("RetryOn")
	var enum []string
	for _, part := range strings.Split(f.Tag.Get("jsonschema"), ",") {
		if v, ok := strings.CutPrefix(part, "enum="); ok {
			enum = append(enum, v)
		}
	}
	slices.Sort(enum)
	if !slices.Equal(ours, enum) {
		t.Errorf("reconciler classes %v, the schema's retry_on enum %v", ours, enum)
	}
	for _, c := range render.DefaultRetryOn {
		if !slices.Contains(ours, c) {
			t.Errorf("the default retry_on names %s, which no failure has", c)
		}
	}
}
