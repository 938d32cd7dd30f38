package integration

import (
	"context"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	"github.com/taugrid/taugrid/policy"
)

// platformFixture is the example platform repo pushed to the test git server
// and a TauPlatform pointing at it.
type platformFixture struct {
	repo *gitRepo
	r    *platformctrl.PlatformReconciler
	name string
}

func newPlatform(t testing.TB) *platformFixture {
	return newPlatformFrom(t, "../../examples/platform")
}

func newPlatformFrom(t testing.TB, dir string) *platformFixture {
	t.Helper()
	integration(t)
	repo := newGitRepo(t, "platform", dir)
	name := strings.TrimSuffix(repo.URL[strings.LastIndex(repo.URL, "/")+1:], ".git")
	p := &taugridv1.TauPlatform{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       taugridv1.TauPlatformSpec{GitSource: taugridv1.GitSource{URL: repo.URL}, Ref: "main", Path: "."},
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return &platformFixture{repo: repo, name: name, r: &platformctrl.PlatformReconciler{
		Client:   k8s,
		Git:      gitClient,
		Policies: &policy.PolicyStore{Client: k8s, Git: gitClient, Namespace: "default"},
		Clock:    clocktesting.NewFakePassiveClock(metav1.Now().Time),
		Recorder: events.NewFakeRecorder(100),
	}}
}

func (f *platformFixture) reconcile(t testing.TB) *taugridv1.TauPlatform {
	t.Helper()
	if _, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: f.name}}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	p := &taugridv1.TauPlatform{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: f.name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func gpuQuota(t testing.TB, cq string) string {
	t.Helper()
	var q kueue.ClusterQueue
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: cq}, &q); err != nil {
		t.Fatalf("ClusterQueue %s: %v", cq, err)
	}
	for _, r := range q.Spec.ResourceGroups[0].Flavors[0].Resources {
		if r.Name == "nvidia.com/gpu" {
			return r.NominalQuota.String()
		}
	}
	return ""
}

// The platform tests share the example repo's cluster-scoped object names
// (ClusterQueues team-a, team-b), so they run in one test, in order.
func TestPlatformRepoDrivesQueuesAndKeepsTheLastGoodPolicy(t *testing.T) {
	f := newPlatform(t)
	ctx := context.Background()
	manual := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "hand-made"}, Spec: kueue.ClusterQueueSpec{
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"cpu"},
			Flavors: []kueue.FlavorQuotas{{Name: "h200", Resources: []kueue.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("1")}}}}}}}}
	if err := k8s.Create(ctx, manual); err != nil {
		t.Fatal(err)
	}

	first := f.repo.git("-C", f.repo.work, "rev-parse", "HEAD")
	p := f.reconcile(t)
	if p.Status.Commit != first || !apimeta.IsStatusConditionTrue(p.Status.Conditions, taugridv1.ConditionReady) {
		t.Fatalf("status after the first commit: commit %q, conditions %+v", p.Status.Commit, p.Status.Conditions)
	}
	if got := gpuQuota(t, "team-a"); got != "8" {
		t.Errorf("team-a GPU quota = %s, want 8 from the repo", got)
	}
	var lq kueue.LocalQueue
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "team-b", Name: "runs"}, &lq); err != nil {
		t.Errorf("the tenant LocalQueue team-b/runs was not created: %v", err)
	}

	t.Run("raising a quota in a new commit updates the ClusterQueue", func(t *testing.T) {
		f.repo.edit("kueue/cluster-queues.yaml", "nominalQuota: 8\n        borrowingLimit: 8", "nominalQuota: 12\n        borrowingLimit: 8")
		second := f.repo.commit("team-a gets 12 GPUs")
		if p := f.reconcile(t); p.Status.Commit != second {
			t.Fatalf("commit in force = %s, want %s; conditions %+v", p.Status.Commit, second, p.Status.Conditions)
		}
		if got := gpuQuota(t, "team-a"); got != "12" {
			t.Errorf("team-a GPU quota = %s, want 12", got)
		}
	})

	t.Run("an object dropped from the repo is pruned; a hand-made one survives", func(t *testing.T) {
		f.repo.edit("kueue/priorities.yaml", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata:\n  name: tau-low\nvalue: 100\ndescription: Preemptible background work.\n---\n", "")
		f.repo.edit("priorities.yaml", "- name: low\n  class: tau-low\n", "")
		f.repo.commit("drop the low priority")
		f.reconcile(t)
		err := k8s.Get(ctx, types.NamespacedName{Name: "tau-low"}, &kueue.WorkloadPriorityClass{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("tau-low was not pruned: %v", err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(manual), &kueue.ClusterQueue{}); err != nil {
			t.Errorf("the hand-made ClusterQueue did not survive: %v", err)
		}
	})

	good := f.repo.git("-C", f.repo.work, "rev-parse", "HEAD")
	broken := map[string]struct {
		file, old, new string
		want           string
	}{
		"a syntax error": {
			"profiles.yaml", "max_gpus: 1\n", "max_gpus: [1\n", "profiles.yaml:",
		},
		"an unknown profile reference": {
			"tenants.yaml", "default_profile: cpu\n", "default_profile: tpu-v5\n", `tenants.yaml:22:20: tenants[1].default_profile: unknown profile "tpu-v5"`,
		},
		"a negative quota Kueue would reject": {
			"kueue/cluster-queues.yaml", `nominalQuota: "96"`, `nominalQuota: "-96"`, "ClusterQueue team-a",
		},
		"a LocalQueue in no tenant's namespace": {
			"kueue/tenants.yaml", "namespace: team-b\nspec:", "namespace: intruder\nspec:", `namespace "intruder" belongs to no tenant`,
		},
	}
	for name, tc := range broken {
		t.Run(name+" leaves the last good policy in force and says where", func(t *testing.T) {
			f.repo.edit(tc.file, tc.old, tc.new)
			f.repo.edit("kueue/cluster-queues.yaml", "nominalQuota: 12\n", "nominalQuota: 13\n")
			bad := f.repo.commit("broken: " + name)
			p := f.reconcile(t)
			stalled := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionStalled)
			if p.Status.Commit != good || p.Status.LastAttemptedCommit != bad {
				t.Errorf("commit in force %s (want %s), last attempted %s (want %s)", p.Status.Commit, good, p.Status.LastAttemptedCommit, bad)
			}
			if stalled == nil || stalled.Status != metav1.ConditionTrue || !strings.Contains(stalled.Message, tc.want) {
				t.Errorf("Stalled condition %+v does not say %q", stalled, tc.want)
			}
			if got := gpuQuota(t, "team-a"); got != "12" {
				t.Errorf("team-a GPU quota = %s: part of a refused commit was applied", got)
			}
			f.repo.git("-C", f.repo.work, "reset", "--quiet", "--hard", good)
			f.repo.git("-C", f.repo.work, "push", "--quiet", "--force", "origin", "main")
		})
	}

	t.Run("a good commit after broken ones clears Stalled", func(t *testing.T) {
		f.repo.edit("limits.yaml", "max_retries: 5", "max_retries: 4")
		fixed := f.repo.commit("fix")
		p := f.reconcile(t)
		if p.Status.Commit != fixed || apimeta.IsStatusConditionTrue(p.Status.Conditions, taugridv1.ConditionStalled) {
			t.Errorf("commit %s, conditions %+v; want %s in force and not stalled", p.Status.Commit, p.Status.Conditions, fixed)
		}
	})
}
