package policy

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/taugrid/taugrid/render"
)

func TestLoadQueuesRefusesWhatKueueOrTenancyWouldNotAllow(t *testing.T) {
	pol, err := render.LoadPolicy(os.DirFS("../examples/platform"))
	if err != nil {
		t.Fatal(err)
	}
	example := func() fstest.MapFS {
		fsys := fstest.MapFS{}
		for _, f := range []string{"flavors.yaml", "cluster-queues.yaml", "priorities.yaml", "tenants.yaml"} {
			data, err := os.ReadFile("../examples/platform/kueue/" + f)
			if err != nil {
				t.Fatal(err)
			}
			fsys["kueue/"+f] = &fstest.MapFile{Data: data}
		}
		return fsys
	}
	cohorts := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: a}\nspec: {parentName: b}\n---\n" +
		"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: b}\nspec: {parentName: c}\n---\n" +
		"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: c}\nspec: {parentName: a}\n"
	tests := map[string]struct {
		file, content string
		want          string
	}{
		"the example as it is":           {},
		"a cycle of cohorts":             {"kueue/cohorts.yaml", cohorts, "cohort a: its parents form a cycle through a"},
		"a kind that is not ours":        {"kueue/extra.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: x, namespace: team-a}\n", `kueue/extra.yaml: document 1: /v1, Kind=Secret "x" is not allowed here`},
		"an object without a name":       {"kueue/extra.yaml", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {}\n", "kueue/extra.yaml: document 1: ResourceFlavor has no metadata.name"},
		"a tenant queue left undeclared": {"kueue/tenants.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n", "tenant team-a submits to LocalQueue team-a/runs, which kueue/ does not declare"},
		"a quota that is not a quantity": {"kueue/more.yaml", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: h200\n      resources:\n      - {name: cpu, nominalQuota: 1e999999999}\n",
			"ClusterQueue q: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: 1e999999999 is not a non-negative quantity"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fsys := example()
			if tc.file != "" {
				fsys[tc.file] = &fstest.MapFile{Data: []byte(tc.content)}
			}
			objs, err := LoadQueues(fsys, pol)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && len(objs) != 10:
				t.Errorf("%d objects, want the example's 10", len(objs))
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}
