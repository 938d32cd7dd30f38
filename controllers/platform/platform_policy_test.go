package platform

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Policy files the policy table edits the example platform repo with.
const (
	// brokenTenants misspells a tenant's field.
	brokenTenants = "tenants:\n- name: team-a\n  namespace: team-a\n  queue: [runs]\n"
	// strayQueue is a LocalQueue in a namespace no tenant owns.
	strayQueue = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: stray\n  namespace: team-z\nspec:\n  clusterQueue: team-a\n"
	// fabric is a Topology of racks of hosts; fabricFlavor places the
	// h200 flavor's pods on it.
	fabric       = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata:\n  name: fabric\nspec:\n  levels:\n  - nodeLabel: example.com/rack\n  - nodeLabel: kubernetes.io/hostname\n"
	fabricFlavor = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: h200\nspec:\n  nodeLabels:\n    nvidia.com/gpu.product: NVIDIA-H200\n  topologyName: fabric\n"
	// oneWorker dispatches team-a's ClusterQueue to worker-1.
	oneWorker = "clusters:\n- name: worker-1\n  kubeconfig_secret: worker-1-kubeconfig\n  cluster_queues: [team-a]\n"
	// undeclaredWorkerQueue dispatches a ClusterQueue kueue/ lacks.
	undeclaredWorkerQueue = "clusters:\n- name: worker-1\n  kubeconfig_secret: worker-1-kubeconfig\n  cluster_queues: [team-z]\n"
)

// h200Node is a node of the h200 flavor with labels besides the flavor's.
func h200Node(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200", "kubernetes.io/hostname": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// TestPlatformPolicyBranches covers reconcilePolicy: when a commit is
// judged (a new commit, a new generation) and when the last verdict
// stands; and each check that refuses a commit before anything but its
// tenant namespaces is applied (the policy files, kueue/'s documents,
// Topologies against the nodes, worker clusters), with the last good
// policy staying in force. Main points at commit b, the example platform
// repo with edits.
func TestPlatformPolicyBranches(t *testing.T) {
	goodA := platform().InForce(sha("a")).Judged(sha("a"), 1).
		PlatformCondition(taugridv1.ConditionReady, metav1.ConditionTrue, ReasonPolicyApplied, "policy at aaaaaaaaaaaa in force")
	applied := []string{"Ready=True/PolicyApplied"}
	refusedFirst := []string{"Ready=False/InvalidPolicy", "Stalled=True/InvalidPolicy"}
	refusedLater := []string{"Ready=True/PolicyApplied", "Stalled=True/InvalidPolicy"}
	cases := map[string]struct {
		platform   *taugridv1.TauPlatform
		edits      map[string]string
		objs       []client.Object
		multiKueue string
		archiveErr error
		want       []string // conditions
		commit     string   // in force after
		message    string   // in the Stalled condition, if any
		events     []string
		archives   int
		applies    int // apply calls, dry runs included
	}{
		"nothing new: the commit and generation judged stand, nothing read or applied": {
			platform: platform().InForce(sha("b")).Judged(sha("b"), 1).
				PlatformCondition(taugridv1.ConditionReady, metav1.ConditionTrue, ReasonPolicyApplied, "policy at bbbbbbbbbbbb in force").Obj(),
			want: applied, commit: sha("b"),
		},
		"a new generation judges the same commit again": {
			platform: platform().PlatformGeneration(2).InForce(sha("b")).Judged(sha("b"), 1).Obj(),
			want:     applied, commit: sha("b"), events: []string{"Normal PolicyApplied"}, archives: 1, applies: 18,
		},
		// Two archives: b, and a for the change's impact preview, which a
		// commit gone from git leaves out (platform_impact_test.go).
		"a new commit is applied in place of the last": {
			platform: goodA.Obj(),
			want:     applied, commit: sha("b"), events: []string{"Normal PolicyApplied"}, archives: 2, applies: 18,
		},
		"an archive over the size limit is refused; no policy is in force yet": {
			platform:   platform().Obj(),
			archiveErr: &gitsource.Error{Op: "archive", URL: platformURL, Kind: gitsource.ErrTooLarge},
			want:       refusedFirst,
			message:    "commit bbbbbbbbbbbb refused (no policy is in force yet):\ngit archive " + platformURL + ": over a size limit",
			events:     []string{"Warning InvalidPolicy"}, archives: 1,
		},
		"an invalid policy file is refused; the last good policy stays in force": {
			platform: goodA.Obj(),
			edits:    map[string]string{"tenants.yaml": brokenTenants},
			want:     refusedLater, commit: sha("a"),
			message: "commit bbbbbbbbbbbb refused (the policy at aaaaaaaaaaaa stays in force):\ntenants.yaml:4:3: tenants[0].queue",
			events:  []string{"Warning InvalidPolicy"}, archives: 1,
		},
		"a LocalQueue in a namespace no tenant owns is refused": {
			platform: goodA.Obj(),
			edits:    map[string]string{"kueue/stray.yaml": strayQueue},
			want:     refusedLater, commit: sha("a"),
			message: `LocalQueue team-z/stray: namespace "team-z" belongs to no tenant in tenants.yaml`,
			events:  []string{"Warning InvalidPolicy"}, archives: 1,
		},
		"a Topology the nodes of its flavor lack a level of is refused, naming them": {
			platform: goodA.Obj(),
			edits:    map[string]string{"kueue/topology.yaml": fabric, "kueue/flavors.yaml": fabricFlavor},
			objs:     []client.Object{h200Node("gpu-1", nil), h200Node("gpu-2", map[string]string{"example.com/rack": "r1"})},
			want:     refusedLater, commit: sha("a"),
			message: "kueue/topology.yaml:1: Topology fabric: level example.com/rack: 1 of the 2 nodes of flavor h200 lack this label: gpu-1",
			events:  []string{"Warning InvalidPolicy"}, archives: 1,
		},
		"a Topology every node of its flavor describes is applied with the queues": {
			platform: goodA.Obj(),
			edits:    map[string]string{"kueue/topology.yaml": fabric, "kueue/flavors.yaml": fabricFlavor},
			objs:     []client.Object{h200Node("gpu-1", map[string]string{"example.com/rack": "r1"})},
			want:     applied, commit: sha("b"), events: []string{"Normal PolicyApplied"}, archives: 2, applies: 20,
		},
		"worker clusters on a controller that is no MultiKueue manager are refused": {
			platform: goodA.Obj(),
			edits:    map[string]string{"clusters.yaml": oneWorker},
			want:     refusedLater, commit: sha("a"),
			message: "clusters.yaml:2:3: clusters[0]: this controller is not a MultiKueue manager",
			events:  []string{"Warning InvalidPolicy"}, archives: 1,
		},
		"a worker dispatching a ClusterQueue kueue/ lacks is refused": {
			platform:   goodA.Obj(),
			edits:      map[string]string{"clusters.yaml": undeclaredWorkerQueue},
			multiKueue: "kueue-system",
			want:       refusedLater, commit: sha("a"),
			message: `clusters[0].cluster_queues[0]: ClusterQueue "team-z" is not declared in kueue/`,
			events:  []string{"Warning InvalidPolicy"}, archives: 1,
		},
		"a worker whose kubeconfig Secret is missing cannot be reached, and nothing is applied": {
			platform:   goodA.Obj(),
			edits:      map[string]string{"clusters.yaml": oneWorker},
			multiKueue: "kueue-system",
			want:       refusedLater, commit: sha("a"),
			message: "clusters[0].kubeconfig_secret: worker worker-1 cannot be reached: its kubeconfig Secret kueue-system/worker-1-kubeconfig",
			events:  []string{"Warning InvalidPolicy"}, archives: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, nil, append(tc.objs, tc.platform)...)
			w.r.MultiKueueNamespace = tc.multiKueue
			w.git.push(sha("b"), exampleTree(t, tc.edits))
			w.git.archiveErr = tc.archiveErr
			w.mustReconcile(t)
			p := w.platform(t)
			if diff := cmp.Diff(tc.want, conditions(p)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got := condition(p, taugridv1.ConditionStalled); !strings.Contains(got, tc.message) || (tc.message == "") != (got == "") {
				t.Errorf("Stalled says %q, want it to say %q", got, tc.message)
			}
			if p.Status.Commit != tc.commit {
				t.Errorf("commit in force = %q, want %q", p.Status.Commit, tc.commit)
			}
			if p.Status.LastAttemptedCommit != sha("b") || p.Status.ObservedGeneration != p.Generation {
				t.Errorf("last attempted %q at observed generation %d; want %q at %d", p.Status.LastAttemptedCommit, p.Status.ObservedGeneration, sha("b"), p.Generation)
			}
			if diff := cmp.Diff(tc.events, reasons(w.drain())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if len(w.git.archives) != tc.archives || len(w.applied) != tc.applies {
				t.Errorf("archived %d commits and applied %d times (%v); want %d and %d", len(w.git.archives), len(w.applied), w.applied, tc.archives, tc.applies)
			}
		})
	}
}
