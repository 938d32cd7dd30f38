package integration

import (
	"context"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// From the attacker's side: tenant B's pods, and tenant A's other runs,
// cannot connect to tenant A's Ray cluster. The API server stores the
// policy; a network plugin enforces it, so the test checks the object the
// plugin would read: whom it selects and whom it lets in.
func TestARayRunsPodsLetInOnlyTheirOwnRun(t *testing.T) {
	a := newRunFixture(t, "nf1")
	a.research.runRef("ray", "target: ray\n")
	a.research.runRef("other", "target: default\n")
	a.poll(t)
	ray, other := a.runOf(t, "refs/tau/runs/ray"), a.runOf(t, "refs/tau/runs/other")
	a.reconcileRun(t, ray.Name, taugridv1.PhaseQueued)
	a.reconcileRun(t, other.Name, taugridv1.PhaseQueued)

	rj := &rayv1.RayJob{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: render.WorkloadName(ray.Name, 1)}, rj); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: render.WorkloadName(ray.Name, 1)}, np); err != nil {
		t.Fatalf("the Ray run has no NetworkPolicy: %v", err)
	}
	if !metav1.IsControlledBy(np, ray) {
		t.Errorf("the NetworkPolicy is not owned by its run, so it would outlive it")
	}
	own := []labels.Set{rj.Spec.RayClusterSpec.HeadGroupSpec.Template.Labels, rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Labels,
		rj.Spec.SubmitterPodTemplate.Labels}
	for _, l := range own {
		if !selects(t, np.Spec.PodSelector, l) {
			t.Errorf("the policy does not fence a Ray pod labelled %v", l)
		}
		if !admits(t, np, a.ns, l) {
			t.Errorf("the policy shuts out the run's own pod %v", l)
		}
	}
	// Pods of tenant B (labelled like a run of theirs, even claiming this
	// run's labels) and of tenant A's other run.
	strangers := map[string]struct {
		ns     string
		labels labels.Set
	}{
		"tenant B's run":                       {"nf1-b", labels.Set{render.LabelRun: "research-ray-x", render.LabelManagedBy: render.ManagedBy}},
		"tenant B's pod with this run's label": {"nf1-b", labels.Set{render.LabelRun: ray.Name, render.LabelManagedBy: render.ManagedBy}},
		"tenant A's other run":                 {a.ns, labels.Set{render.LabelRun: other.Name, render.LabelManagedBy: render.ManagedBy}},
		"an unlabelled pod of tenant A":        {a.ns, labels.Set{}},
	}
	for name, s := range strangers {
		if admits(t, np, s.ns, s.labels) {
			t.Errorf("%s can connect to the Ray cluster", name)
		}
	}
}

func selects(t *testing.T, sel metav1.LabelSelector, l labels.Set) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(l)
}

// admits evaluates an ingress policy's peers for a pod in ns with labels l,
// as a network plugin does: a podSelector alone means the policy's own
// namespace; namespaceSelectors are matched against the namespace's name
// label only (enough for the policies TauGrid renders).
func admits(t *testing.T, np *networkingv1.NetworkPolicy, ns string, l labels.Set) bool {
	t.Helper()
	nsLabels := labels.Set{corev1.LabelMetadataName: ns}
	for _, rule := range np.Spec.Ingress {
		for _, peer := range rule.From {
			nsOK := peer.NamespaceSelector == nil && ns == np.Namespace ||
				peer.NamespaceSelector != nil && selects(t, *peer.NamespaceSelector, nsLabels)
			podOK := peer.PodSelector == nil || selects(t, *peer.PodSelector, l)
			if peer.IPBlock == nil && nsOK && podOK {
				return true
			}
		}
	}
	return false
}

// From the attacker's side: a push that names the repository's own
// webhook secret, or another team's Secret, in env_secret submits nothing
// and says which field and why.
func TestARunCannotReadTheRepositorysCredentialsOrUnlistedSecrets(t *testing.T) {
	f := newRunFixture(t, "nf2")
	ctx := context.Background()
	patch := client.MergeFrom(f.repo.DeepCopy())
	f.repo.Spec.Webhook = &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: "wandb-hook"}}
	if err := k8s.Patch(ctx, f.repo, patch); err != nil {
		t.Fatal(err)
	}
	steal := func(secret string) string {
		return "schema_version: 1\nentrypoint: train.py\nruntime:\n  image: python:3.12-slim\n  env_secret:\n    LOOT: " + secret + ":token\n"
	}
	f.research.write("tau/hook.yaml", steal("wandb-hook"))
	f.research.write("tau/other.yaml", steal("nf2-b-token"))
	f.research.commit("steal")
	f.research.runRef("hook", "target: hook\n")
	f.research.runRef("other", "target: other\n")
	f.poll(t)
	for ref, want := range map[string]string{
		"refs/tau/runs/hook":  `tau/hook.yaml:6:11: runtime.env_secret.LOOT: Secret "wandb-hook" holds this repository's credentials; runs may never read it`,
		"refs/tau/runs/other": `tau/other.yaml:6:11: runtime.env_secret.LOOT: Secret "nf2-b-token" is not one tenant nf2-a's runs may read (tenants[].secrets in the platform repo)`,
	} {
		run := f.reconcileRun(t, f.runOf(t, ref).Name, taugridv1.PhaseFailed)
		if !strings.Contains(run.Status.Message, want) {
			t.Errorf("%s: %q, want %q", ref, run.Status.Message, want)
		}
		if run.Status.Workload != nil {
			t.Errorf("%s submitted %s although it names a Secret it may not read", ref, run.Status.Workload.Name)
		}
	}
}
