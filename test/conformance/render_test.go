package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

const (
	research = "../../examples/research"
	timeout  = 30 * time.Second
	gpu      = corev1.ResourceName("nvidia.com/gpu")
)

var seq atomic.Int64

// tenantWithQuota creates a fresh namespace, ClusterQueue (in the example's
// h200 flavor) and LocalQueue "runs", and returns the example policy with
// team-a moved into that namespace, so each test has its own quota.
func tenantWithQuota(t *testing.T, gpus int64) *render.Policy {
	t.Helper()
	pol, err := render.LoadPolicy(os.DirFS("../../examples/platform"))
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("conformance-%d", seq.Add(1))
	pol.Tenant("team-a").Namespace = ns
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gpu},
				Flavors: []kueue.FlavorQuotas{{Name: "h200", Resources: []kueue.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("1000")},
					{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("100Ti")},
					{Name: gpu, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)},
				}}},
			}},
		},
	}
	lq := &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "runs", Namespace: ns},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(ns)},
	}
	ctx := context.Background()
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, cq, lq} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	return pol
}

// renderTarget renders one of the example research repo's targets as run
// name in the policy's team-a.
func renderTarget(t *testing.T, pol *render.Policy, file, name string) []client.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(research, file))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := render.LoadConfig(file, data)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.RenderConfig(rc, pol, "team-a", render.Run{
		Name: name, Repository: "research", Commit: strings.Repeat("ab", 20), Target: "default", Attempt: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestEveryRenderedObjectPassesServerSideDryRun(t *testing.T) {
	pol := tenantWithQuota(t, 1)
	files, _ := filepath.Glob("../../render/testdata/valid/*.yaml")
	examples := []string{"tau.yaml", "tau/ray.yaml", "tau/ddp.yaml"}
	for i := range examples {
		examples[i] = filepath.Join(research, examples[i])
	}
	for i, path := range append(files, examples...) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := render.LoadConfig(filepath.Base(path), data)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := render.RenderConfig(rc, pol, "team-a", render.Run{
				Name: fmt.Sprintf("dry-%d", i), Repository: "research", Commit: strings.Repeat("cd", 20), Target: "default", Attempt: 1,
				Source: &render.SourceArchive{URL: "http://tau-controller.tau-system.svc:8080/source/x.tar.gz", SHA256: strings.Repeat("e", 64), Image: "ghcr.io/taugrid/tau:v0.1.0"},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if err := env.Client.Create(context.Background(), o, client.DryRunAll); err != nil {
					t.Errorf("the API server refuses %T %s: %v", o, o.GetName(), err)
				}
			}
		})
	}
}

func TestRenderedJobIsAdmittedAndASecondBeyondQuotaWaitsNamingTheGPU(t *testing.T) {
	pol := tenantWithQuota(t, 1)
	first := renderTarget(t, pol, "tau.yaml", "first")[0].(*batchv1.Job)
	create(t, first)
	waitWorkload(t, first, func(wl *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
	waitJob(t, first, func(j *batchv1.Job) bool { return !*j.Spec.Suspend })

	second := renderTarget(t, pol, "tau.yaml", "second")[0].(*batchv1.Job)
	create(t, second)
	wl := waitWorkload(t, second, func(wl *kueue.Workload) bool {
		c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		return c != nil && c.Status == metav1.ConditionFalse && c.Message != ""
	})
	msg := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved).Message
	if !strings.Contains(msg, string(gpu)) {
		t.Errorf("pending reason %q does not name %s", msg, gpu)
	}
	t.Logf("Kueue's reason for the second run: %s", msg)
	if j := getJob(t, second); !*j.Spec.Suspend {
		t.Error("the second Job was unsuspended without quota")
	}
}

func TestRenderedTorchrunJobIsAdmittedAsOneWorkloadForAllNodes(t *testing.T) {
	pol := tenantWithQuota(t, 16)
	objs := renderTarget(t, pol, "tau/ddp.yaml", "ddp")
	create(t, objs...)
	wl := waitWorkload(t, objs[0], func(wl *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
	if n := wl.Spec.PodSets[0].Count; n != 2 {
		t.Errorf("Workload pod set count = %d, want 2 (one per node)", n)
	}
}

func TestRenderedRayJobIsAdmittedAndKubeRayCreatesItsRayCluster(t *testing.T) {
	pol := tenantWithQuota(t, 16)
	rj := renderTarget(t, pol, "tau/ray.yaml", "ray")[0]
	create(t, rj)
	waitWorkload(t, rj, func(wl *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
	waitFor(t, "KubeRay to create the RayCluster", func() (bool, error) {
		var list rayv1.RayClusterList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(rj.GetNamespace())); err != nil {
			return false, err
		}
		for _, rc := range list.Items {
			for _, o := range rc.OwnerReferences {
				if o.Name == rj.GetName() && o.Kind == "RayJob" {
					return true, nil
				}
			}
		}
		return false, nil
	})
}
