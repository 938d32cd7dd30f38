package platform

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/render"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/taugrid/taugrid/policy"
)

// workerQuota is worker-1's own team-a ClusterQueue: 64 GPUs of its own.
const workerQuota = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: team-a\nspec:\n  namespaceSelector: {}\n" +
	"  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: h200\n      resources:\n      - name: nvidia.com/gpu\n        nominalQuota: 64\n"

// loadWorkers is the example platform repo with edits, loaded as the
// reconciler loads it: its worker clusters and kueue/'s objects.
func loadWorkers(t *testing.T, edits map[string]string) (fstest.MapFS, []render.WorkerCluster, []*unstructured.Unstructured) {
	t.Helper()
	tree, pol, objs := loadExample(t, edits)
	return tree, pol.Clusters, objs
}

// loadExample is the example platform repo with edits, loaded as the
// reconciler loads a commit: the policy files and kueue/'s objects.
func loadExample(t testing.TB, edits map[string]string) (fstest.MapFS, *render.Policy, []*unstructured.Unstructured) {
	t.Helper()
	tree := fstest.MapFS{}
	for p, data := range exampleTree(t, edits) {
		tree[p] = &fstest.MapFile{Data: []byte(data)}
	}
	pol, err := render.LoadPolicy(tree)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := policy.LoadQueues(tree, pol)
	if err != nil {
		t.Fatal(err)
	}
	return tree, pol, objs
}

// names is each object as "Kind namespace/name".
func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, u.GetKind()+" "+qualifiedName(u))
	}
	return out
}

// queueSummary says of ClusterQueue cq in objs what a worker's copy
// changes: its cohort, GPU quota and borrowing limit, admission checks.
func queueSummary(objs []*unstructured.Unstructured, cq string) string {
	for _, u := range objs {
		if u.GetKind() != "ClusterQueue" || u.GetName() != cq {
			continue
		}
		cohort, _, _ := unstructured.NestedString(u.Object, "spec", "cohortName")
		checks, _, _ := unstructured.NestedSlice(u.Object, "spec", "admissionChecksStrategy", "admissionChecks")
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
		flavors, _, _ := unstructured.NestedSlice(policy.AsMap(groups[0]), "flavors")
		resources, _, _ := unstructured.NestedSlice(policy.AsMap(flavors[0]), "resources")
		gpu := map[string]any{}
		for _, r := range resources {
			if m := policy.AsMap(r); m["name"] == "nvidia.com/gpu" {
				gpu = m
			}
		}
		return fmt.Sprintf("cohort=%v gpus=%v borrowing=%v checks=%v", cohort, gpu["nominalQuota"], gpu["borrowingLimit"], checks)
	}
	return "none"
}

// TestWorkerObjects covers the plan of what a worker holds: the
// ClusterQueues dispatched to it stripped of what only the manager's
// cohort means, the LocalQueues and namespaces that submit to them, every
// flavor and priority, the worker's own declarations in their place, and a
// closed-to-strangers policy per namespace; and what it refuses.
func TestWorkerObjects(t *testing.T) {
	plan := []string{"Namespace team-a", "ResourceFlavor h200", "WorkloadPriorityClass tau-low", "WorkloadPriorityClass tau-normal",
		"WorkloadPriorityClass tau-high", "ClusterQueue team-a", "LocalQueue team-a/runs", "NetworkPolicy team-a/" + ClosedToStrangersPolicy}
	cases := map[string]struct {
		edits    map[string]string
		want     []string
		teamA    string // the worker's team-a ClusterQueue
		problems string
	}{
		"the manager's team-a queue, without its cohort or cohort limits": {
			edits: map[string]string{"clusters.yaml": oneWorker},
			want:  plan, teamA: "cohort= gpus=8 borrowing=<nil> checks=[]",
		},
		"the worker's own declaration replaces the manager's copy": {
			edits: map[string]string{"clusters.yaml": oneWorker, "kueue/workers/worker-1/queues.yaml": workerQuota},
			want:  plan, teamA: "cohort= gpus=64 borrowing=<nil> checks=[]",
		},
		"a ClusterQueue kueue/ does not declare is refused": {
			edits:    map[string]string{"clusters.yaml": undeclaredWorkerQueue},
			want:     []string{"ResourceFlavor h200", "WorkloadPriorityClass tau-low", "WorkloadPriorityClass tau-normal", "WorkloadPriorityClass tau-high"},
			teamA:    "none",
			problems: `clusters.yaml:4:20: clusters[0].cluster_queues[0]: ClusterQueue "team-z" is not declared in kueue/`,
		},
		"a worker's declaration of a kind kueue/ may not hold is refused": {
			edits: map[string]string{"clusters.yaml": oneWorker,
				"kueue/workers/worker-1/pods.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sneaky\n"},
			teamA:    "none",
			problems: `clusters.yaml:2:9: clusters[0].name: kueue/workers/worker-1/pods.yaml: document 1: /v1, Kind=Pod "sneaky" is not allowed here`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tree, workers, objs := loadWorkers(t, tc.edits)
			got, problems := WorkerObjects(tree, objs, workers[0])
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if s := queueSummary(got, "team-a"); s != tc.teamA {
				t.Errorf("team-a on the worker: %s, want %s", s, tc.teamA)
			}
			if msg := fmt.Sprint(problems); (tc.problems == "") != (len(problems) == 0) || !strings.Contains(msg, tc.problems) {
				t.Errorf("problems %q, want %q", msg, tc.problems)
			}
		})
	}
}

// TestManagerDispatch: the manager keeps every object, gains a
// MultiKueueCluster per worker and an AdmissionCheck and MultiKueueConfig
// per dispatched ClusterQueue, which then names its check; a queue
// dispatched nowhere is unchanged.
func TestManagerDispatch(t *testing.T) {
	_, workers, objs := loadWorkers(t, map[string]string{"clusters.yaml": oneWorker})
	got, err := managerDispatch(workers, objs)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{"MultiKueueCluster worker-1", "AdmissionCheck tau-dispatch-team-a", "MultiKueueConfig tau-dispatch-team-a"}, names(objs)...)
	if diff := cmp.Diff(want, names(got)); diff != "" {
		t.Errorf("the manager's objects (-want +got):\n%s", diff)
	}
	for cq, want := range map[string]string{
		"team-a": "cohort=research gpus=8 borrowing=8 checks=[map[name:tau-dispatch-team-a]]",
		"team-b": "cohort=research gpus=8 borrowing=0 checks=[]",
	} {
		if s := queueSummary(got, cq); s != want {
			t.Errorf("%s on the manager: %s, want %s", cq, s, want)
		}
	}
}
