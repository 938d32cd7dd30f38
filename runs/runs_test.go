package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestFindRunByNameIdOrRef: a run is found by its TauRun name, its run id
// or its full ref; of two runs of one ref the newer wins; an id no run has
// is ErrNoRun, and so is one that cannot be a name ("sweep/lr-0.1").
func TestFindRunByNameIdOrRef(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := taugridv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	run := func(name, ref string, created time.Time) client.Object {
		return builders.MakeTauRun(name, "team-a").Trigger(taugridv1.TriggerRunRef, ref).Created(created).
			Labels(map[string]string{taugridv1.LabelRefHash: RefHash(ref)}).Obj()
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		run("research-old", "refs/tau/runs/lr-sweep", t0),
		run("research-new", "refs/tau/runs/lr-sweep", t0.Add(time.Hour)),
		run("research-tag", "refs/tags/run/baseline", t0),
		run("research-nested", "refs/tau/runs/sweep/lr-0.1", t0),
	).Build()
	cases := map[string]struct{ id, want string }{
		"the TauRun's name":        {"research-old", "research-old"},
		"a run id, newest first":   {"lr-sweep", "research-new"},
		"a full ref":               {"refs/tags/run/baseline", "research-tag"},
		"an id that is not a name": {"sweep/lr-0.1", "research-nested"},
		"an id no run has":         {"nope", ""},
		"a path no name can be":    {"../x", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FindRun(context.Background(), c, "team-a", tc.id)
			var none *ErrNoRun
			switch {
			case tc.want == "" && !errors.As(err, &none):
				t.Errorf("FindRun(%q) = %v, %v; want ErrNoRun", tc.id, got, err)
			case tc.want != "" && (err != nil || got.Name != tc.want):
				t.Errorf("FindRun(%q) = %v, %v; want %s", tc.id, got, err, tc.want)
			}
		})
	}
}
