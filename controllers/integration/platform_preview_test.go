package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformctrl "github.com/taugrid/taugrid/controllers/platform"
)

// platformOnGitea moves a run fixture's platform repo to the real Gitea
// and has the platform reconciler preview its pull requests there.
type platformOnGitea struct {
	*runFixture
	gitea *controlplane.Gitea
	name  string // owner/name on Gitea
}

func newPlatformOnGitea(t *testing.T, prefix string) *platformOnGitea {
	t.Helper()
	g := sharedGitea(t)
	f := &platformOnGitea{runFixture: newRunFixture(t, prefix), gitea: g, name: prefix + "-platform/platform"}
	ctx := context.Background()
	if err := g.CreateRepo(ctx, f.name); err != nil {
		t.Fatal(err)
	}
	f.plat.repo.git("-C", f.plat.repo.work, "remote", "add", "gitea", g.PushURL(f.name))
	f.plat.repo.git("-C", f.plat.repo.work, "push", "--quiet", "gitea", "main")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-platform-forge", Namespace: "default"},
		Data: map[string][]byte{gitsource.SecretToken: []byte(g.Token)}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	p := f.platform(t)
	base := p.DeepCopy()
	p.Spec.URL = g.CloneURL(f.name)
	p.Spec.Forge = &taugridv1.Forge{Type: taugridv1.ForgeType(forge.Gitea), SecretRef: taugridv1.LocalObjectReference{Name: secret.Name}}
	if err := k8s.Patch(ctx, p, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.plat.r.Posters = &forge.Posters{Reader: k8s, Clock: clock.RealClock{}}
	return f
}

func (f *platformOnGitea) platform(t *testing.T) *taugridv1.TauPlatform {
	t.Helper()
	p := &taugridv1.TauPlatform{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: f.plat.name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// branch commits the platform repo's working copy on branch and pushes
// it to Gitea; it returns the commit.
func (f *platformOnGitea) branch(branch, msg string) string {
	r := f.plat.repo
	r.git("-C", r.work, "checkout", "--quiet", "-B", branch)
	r.git("-C", r.work, "add", "-A")
	r.git("-C", r.work, "commit", "--quiet", "-m", msg)
	r.git("-C", r.work, "push", "--quiet", "--force", "gitea", branch)
	return r.git("-C", r.work, "rev-parse", "HEAD")
}

// openPull opens a pull request of branch into main, once Gitea shows
// the branch at the working copy's head; it returns its number.
func (f *platformOnGitea) openPull(t *testing.T, branch, title, body string) int {
	t.Helper()
	head := f.plat.repo.git("-C", f.plat.repo.work, "rev-parse", branch)
	if err := f.gitea.WaitForBranch(context.Background(), f.name, "main", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.gitea.WaitForBranch(context.Background(), f.name, branch, head); err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Number int `json:"number"`
	}
	err := f.gitea.API(context.Background(), http.MethodPost, "repos/"+f.name+"/pulls",
		map[string]string{"head": branch, "base": "main", "title": title, "body": body}, &pr)
	if err != nil {
		t.Fatal(err)
	}
	return pr.Number
}

// preview is the tau/platform status Gitea shows on commit, and the
// preview comments of pull request number.
func (f *platformOnGitea) preview(t *testing.T, commit string, number int) (controlplane.GiteaStatus, []string) {
	t.Helper()
	ctx := context.Background()
	all, err := f.gitea.CommitStatuses(ctx, f.name, commit)
	if err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(s controlplane.GiteaStatus) bool { return s.Context != platformctrl.PreviewContext })
	if len(all) == 0 {
		t.Fatalf("no %s status on %s", platformctrl.PreviewContext, commit)
	}
	var comments []struct {
		Body string `json:"body"`
	}
	if err := f.gitea.API(ctx, http.MethodGet, fmt.Sprintf("repos/%s/issues/%d/comments", f.name, number), nil, &comments); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, c := range comments {
		bodies = append(bodies, c.Body)
	}
	return all[len(all)-1], bodies
}

// On the real Gitea: a pull request on the platform repo that halves a
// tenant's quota, takes a profile from a tenant whose two queued runs use
// it and puts that tenant's ClusterQueue on a new flavor no node carries
// gets a failing tau/platform status and one comment naming each effect;
// nothing changes in the cluster before merge. A fix on the same branch
// turns it green and edits the same comment. A malformed policy in
// another pull request fails with its file and line.
func TestAPlatformPullRequestShowsItsImpactBeforeMerge(t *testing.T) {
	f := newPlatformOnGitea(t, "pv1")
	p := f.plat.reconcile(t)
	inForce := p.Status.Commit
	if inForce == "" {
		t.Fatalf("no policy in force on Gitea: %+v", p.Status.Conditions)
	}

	// pv1-a holds one GPU: one run runs, two queue behind it, all on
	// the h200-1 profile (the example's default target).
	setGPUQuota(t, f.ns, "1", "0")
	var queued []string
	for i, id := range []string{"first", "second", "third"} {
		f.research.runRef(id, "target: default\n")
		f.poll(t)
		run := f.runOf(t, "refs/tau/runs/"+id)
		want := taugridv1.PhaseQueued
		if i == 0 {
			want = taugridv1.PhaseAdmitted
		} else {
			queued = append(queued, run.Name)
		}
		// Until its status names its Workload, which the preview reads.
		f.reconcileUntil(t, run.Name, want, func(run *taugridv1.TauRun) bool {
			return run.Status.Workload != nil && run.Status.Workload.Workload != ""
		})
	}

	r := f.plat.repo
	r.edit("kueue/cluster-queues.yaml", "nominalQuota: 8\n        borrowingLimit: 0", "nominalQuota: 4\n        borrowingLimit: 0") // pv1-b: 8 → 4 GPUs
	r.edit("kueue/cluster-queues.yaml", "- name: pv1-h200\n", "- name: pv1-b300\n")                                                 // pv1-a's ClusterQueue, the first
	r.write("kueue/b300.yaml", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: pv1-b300\nspec:\n  nodeLabels:\n    nvidia.com/gpu.product: NVIDIA-B300\n")
	r.edit("tenants.yaml", "default_profile: h200-1\n  profiles: [cpu, h200-1, h200-8]", "default_profile: h200-8\n  profiles: [cpu, h200-8]")
	head := f.branch("shrink", "halve pv1-b, move pv1-a to B300")
	number := f.openPull(t, "shrink", "Halve pv1-b, move pv1-a to B300", "The B300 nodes arrive next week.")

	p = f.plat.reconcile(t)
	st, comments := f.preview(t, head, number)
	if st.State != "failure" || !strings.HasPrefix(st.Description, "Strands 2 queued runs (pv1-a 2)") {
		t.Errorf("the pull request's status is %s %q, want a failure that strands 2 queued runs of pv1-a", st.State, st.Description)
	}
	if len(comments) != 1 {
		t.Fatalf("%d comments, want one preview:\n%s", len(comments), strings.Join(comments, "\n----\n"))
	}
	for _, want := range append([]string{"pv1-b", "h200-1", "pv1-b300", "would never start", "tau/accept-stranded"}, queued...) {
		if !strings.Contains(comments[0], want) {
			t.Errorf("the preview does not name %q:\n%s", want, comments[0])
		}
	}
	t.Logf("the preview of #%d:\n%s", number, comments[0])
	// Nothing merged, nothing changed: the policy in force, the live
	// quota and the runs are as they were.
	if p.Status.Commit != inForce {
		t.Errorf("the policy in force moved to %s before merge", p.Status.Commit)
	}
	if q := gpuQuota(t, "pv1-b"); q != "8" {
		t.Errorf("pv1-b's ClusterQueue holds %s GPUs before merge, want 8", q)
	}
	for _, name := range queued {
		if run := f.reconcileRun(t, name, taugridv1.PhaseQueued); run.Status.PolicyCommit != inForce {
			t.Errorf("run %s was rendered under %s, want %s", name, run.Status.PolicyCommit, inForce)
		}
	}

	// The pull request accepts stranding them with a label: the status
	// passes and still says what it strands; taking the label off fails
	// it again.
	ctx := context.Background()
	var label struct {
		ID int64 `json:"id"`
	}
	if err := f.gitea.API(ctx, http.MethodPost, "repos/"+f.name+"/labels", map[string]string{"name": platformctrl.AcceptStranded, "color": "#e11d21"}, &label); err != nil {
		t.Fatal(err)
	}
	labels := fmt.Sprintf("repos/%s/issues/%d/labels", f.name, number)
	if err := f.gitea.API(ctx, http.MethodPost, labels, map[string][]int64{"labels": {label.ID}}, nil); err != nil {
		t.Fatal(err)
	}
	f.plat.reconcile(t)
	if st, _ := f.preview(t, head, number); st.State != "success" || !strings.HasPrefix(st.Description, "Accepted: strands 2 queued runs") {
		t.Errorf("with the label, the status is %s %q, want a success that says it strands 2 queued runs", st.State, st.Description)
	}
	if err := f.gitea.API(ctx, http.MethodDelete, fmt.Sprintf("%s/%d", labels, label.ID), nil, nil); err != nil {
		t.Fatal(err)
	}
	f.plat.reconcile(t)
	if st, _ := f.preview(t, head, number); st.State != "failure" {
		t.Errorf("without the label again, the status is %s %q, want failure", st.State, st.Description)
	}

	// The fix: pv1-a keeps its H200 flavor; the B300 flavor waits for
	// its nodes. Queued runs start as submitted: the preview passes.
	r.edit("kueue/cluster-queues.yaml", "- name: pv1-b300\n", "- name: pv1-h200\n")
	fixed := f.branch("shrink", "keep pv1-a on H200 until the B300 nodes arrive")
	f.plat.reconcile(t)
	st, comments = f.preview(t, fixed, number)
	if st.State != "success" {
		t.Errorf("the fixed pull request's status is %s %q, want success", st.State, st.Description)
	}
	if len(comments) != 1 || strings.Contains(comments[0], "would never start") || !strings.Contains(comments[0], "pv1-b300") {
		t.Errorf("want the one preview comment edited, with no stranded run and the unserved flavor named:\n%s", strings.Join(comments, "\n----\n"))
	}

	// A malformed policy: the file and line, and the policy in force
	// stays.
	r.git("-C", r.work, "checkout", "--quiet", "main")
	r.edit("tenants.yaml", "  queues: [runs]\n", "  queue: [runs]\n")
	broken := f.branch("typo", "a typo")
	typo := f.openPull(t, "typo", "A typo", "")
	p = f.plat.reconcile(t)
	st, comments = f.preview(t, broken, typo)
	if st.State != "failure" || !strings.Contains(st.Description, "tenants.yaml:") {
		t.Errorf("the malformed policy's status is %s %q, want a failure naming tenants.yaml and its line", st.State, st.Description)
	}
	if len(comments) != 1 || !strings.Contains(comments[0], "tenants.yaml:") {
		t.Errorf("the malformed policy's comment does not say where:\n%s", strings.Join(comments, "\n----\n"))
	}
	if p.Status.Commit != inForce {
		t.Errorf("the policy in force moved to %s", p.Status.Commit)
	}
	if len(p.Status.PreviewedHeads) != 2 {
		t.Errorf("previewed heads %v, want the two open pull requests'", p.Status.PreviewedHeads)
	}
}
