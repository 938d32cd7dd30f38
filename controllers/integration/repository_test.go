package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
)

func TestATenantCannotRegisterARepositoryItsPolicyDoesNotAllow(t *testing.T) {
	f := newRunFixture(t, "rt4")
	other := newGitRepo(t, "elsewhere/research", "../../examples/research")
	repo := &taugridv1.TauRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "smuggled", Namespace: f.ns},
		Spec:       taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: other.URL}, Platform: f.repo.Spec.Platform},
	}
	if err := k8s.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	other.tag("run/sneaky")
	if _, err := f.repos.Reconcile(context.Background(), requestFor(repo)); err != nil {
		t.Fatal(err)
	}
	got := &taugridv1.TauRepository{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(repo), got); err != nil {
		t.Fatal(err)
	}
	stalled := apimeta.FindStatusCondition(got.Status.Conditions, taugridv1.ConditionStalled)
	if stalled == nil || stalled.Reason != repoctrl.ReasonNotAllowed || !strings.Contains(stalled.Message, "may not register "+other.URL) {
		t.Errorf("Stalled condition = %+v, want %s naming the URL", stalled, repoctrl.ReasonNotAllowed)
	}
	for _, r := range f.listRuns(t) {
		if r.Spec.Repository == "smuggled" {
			t.Errorf("a run was created from a repository the tenant may not use: %s", r.Name)
		}
	}
}

func TestWatchedBranchStartsARunOnlyWhenATauFileChanges(t *testing.T) {
	f := newRunFixture(t, "rt5")
	patch := client.MergeFrom(f.repo.DeepCopy())
	f.repo.Spec.Triggers.Branches = []string{"main"}
	if err := k8s.Patch(context.Background(), f.repo, patch); err != nil {
		t.Fatal(err)
	}
	f.poll(t) // main as it is now is history

	f.research.write("README.md", "notes only\n")
	f.research.commit("docs: no tau file touched")
	f.poll(t)
	if n := len(f.listRuns(t)); n != 0 {
		t.Fatalf("%d runs after a commit that changed no tau file, want 0", n)
	}

	f.research.edit("tau/ray.yaml", "timeout: 12h", "timeout: 6h")
	changed := f.research.commit("shorter ray runs")
	f.poll(t)
	runs := f.listRuns(t)
	if len(runs) != 1 {
		t.Fatalf("%d runs after a commit that changed tau/ray.yaml, want 1", len(runs))
	}
	r := runs[0]
	if r.Spec.Trigger.Kind != taugridv1.TriggerBranchChange || r.Spec.Commit != changed || r.Spec.Target != "ray" {
		t.Errorf("run spec = %+v, want a BranchChange of target ray at %s", r.Spec, changed)
	}
}

func TestASecondRunBeyondQuotaWaitsWithKueuesReasonAndStartsWhenTheFirstEnds(t *testing.T) {
	f := newRunFixture(t, "rt6")
	// Each run asks for 1 GPU; the tenant's ClusterQueue is cut to 1.
	setGPUQuota(t, f.ns, "1", "0")
	f.research.tag("run/one")
	f.research.git("-C", f.research.work, "commit", "--quiet", "--allow-empty", "-m", "another")
	f.research.git("-C", f.research.work, "push", "--quiet", "origin", "main")
	f.research.tag("run/two")
	f.poll(t)
	one, two := f.runOf(t, "refs/tags/run/one"), f.runOf(t, "refs/tags/run/two")
	f.reconcileRun(t, one.Name, taugridv1.PhaseAdmitted)
	waiting := f.reconcileRun(t, two.Name, taugridv1.PhaseQueued)
	deadline := time.Now().Add(20 * time.Second)
	// The first holds the quota for at most its time limit (2h) from its
	// admission: the second starts then at the latest.
	want := regexp.MustCompile(`^queued #1 of 1 in rt6-a: needs 1 more nvidia.com/gpu \(rt6-h200\); rt6-a uses 1/1 \(no borrowing\); starts about \d\d:\d\d UTC$`)
	for !want.MatchString(waiting.Status.Message) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		waiting = f.reconcileRun(t, two.Name, taugridv1.PhaseQueued)
	}
	if !want.MatchString(waiting.Status.Message) {
		t.Fatalf("the waiting run says %q, want %s", waiting.Status.Message, want)
	}
	if w := waiting.Status.Workload; !strings.Contains(w.Reason, "Kueue: couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu") ||
		w.Position == nil || *w.Position != 1 {
		t.Errorf("the long explanation lacks Kueue's words or the position: %+v", w)
	}
	completeJob(t, f.ns, render.WorkloadName(one.Name, 1))
	f.reconcileRun(t, one.Name, taugridv1.PhaseSucceeded)
	f.reconcileRun(t, two.Name, taugridv1.PhaseAdmitted)
}

func requestFor(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
}

// setGPUQuota changes a ClusterQueue's GPU quota behind the platform's back.
func setGPUQuota(t testing.TB, cq, nominal, borrowing string) {
	t.Helper()
	q := &kueue.ClusterQueue{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: cq}, q); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(q.DeepCopy())
	for i, r := range q.Spec.ResourceGroups[0].Flavors[0].Resources {
		if r.Name == "nvidia.com/gpu" {
			q.Spec.ResourceGroups[0].Flavors[0].Resources[i].NominalQuota = resource.MustParse(nominal)
			q.Spec.ResourceGroups[0].Flavors[0].Resources[i].BorrowingLimit = ptr.To(resource.MustParse(borrowing))
		}
	}
	if err := k8s.Patch(context.Background(), q, patch); err != nil {
		t.Fatal(err)
	}
}

func TestAnIdlePollWritesNothing(t *testing.T) {
	f := newRunFixture(t, "rt12")
	before := &taugridv1.TauRepository{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.repo), before); err != nil {
		t.Fatal(err)
	}
	f.poll(t)
	f.poll(t)
	after := &taugridv1.TauRepository{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.repo), after); err != nil {
		t.Fatal(err)
	}
	if before.ResourceVersion != after.ResourceVersion {
		t.Errorf("two idle polls changed the TauRepository (resourceVersion %s to %s): %+v", before.ResourceVersion, after.ResourceVersion, after.Status)
	}
	f.research.tag("run/news")
	f.poll(t)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.repo), after); err != nil {
		t.Fatal(err)
	}
	if before.ResourceVersion == after.ResourceVersion {
		t.Error("a poll that saw a new run tag recorded nothing")
	}
}
