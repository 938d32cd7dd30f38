package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/chart"
)

// as is a client that acts as user in groups (system:authenticated added).
func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOnlyTheControllerCreatesQueuedWorkloadsInATenantNamespace installs
// the chart's ValidatingAdmissionPolicy on the real API server and tries
// the door from every side: a researcher with edit rights creating a Job,
// a RayJob or a RayCluster that names a queue, or labelling an existing
// Job into one, is refused, with the reason; the controller is let in, and
// so are KubeRay's cluster of a RayJob, a Job naming no queue, a platform
// admin of an excepted group, and anything outside the tenant namespaces.
func TestOnlyTheControllerCreatesQueuedWorkloadsInATenantNamespace(t *testing.T) {
	integration(t)
	ctx := context.Background()
	r, err := chart.Render(chart.Namespace, map[string]any{"admissionPolicy": map[string]any{"exceptGroups": []any{"platform-admins"}}})
	if err != nil {
		t.Fatal(err)
	}
	tenant, other := "door-a", "door-elsewhere"
	// Cleanups run last first: this one, after the policy is deleted,
	// waits until the API server no longer applies it.
	t.Cleanup(func() {
		waitFor(t, 30*time.Second, "the policy to be gone", func() bool {
			probe := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{GenerateName: "after-", Namespace: tenant, Labels: map[string]string{render.LabelQueueName: "runs"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
			return k8s.Create(context.Background(), probe, client.DryRunAll) == nil
		})
	})
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		u := r.Find(kind, "tau-queued-workloads")
		if u == nil {
			t.Fatalf("the chart renders no %s", kind)
		}
		if err := k8s.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		// The suite's other tests create queued Jobs as the cluster's
		// admin in namespaces the platform labels: the policy leaves
		// with this test.
		t.Cleanup(func() {
			if err := k8s.Delete(context.Background(), u); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		})
	}
	for ns, labels := range map[string]map[string]string{tenant: {taugridv1.LabelPlatform: "door"}, other: nil} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// Everyone here may write workloads, as `edit` would let them: only
	// the policy stands in the way.
	writer := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "door-workload-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "update", "patch", "get"}},
		{APIGroups: []string{"ray.io"}, Resources: []string{"rayjobs", "rayclusters"}, Verbs: []string{"create", "update", "patch", "get"}}}}
	if err := k8s.Create(ctx, writer); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	controllerUser := "system:serviceaccount:" + chart.Namespace + ":tau-controller"
	for _, ns := range []string{tenant, other} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "door-writers", Namespace: ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: writer.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}, {Kind: rbacv1.UserKind, Name: controllerUser},
				{Kind: rbacv1.UserKind, Name: "kuberay"}, {Kind: rbacv1.GroupKind, Name: "platform-admins"}}}
		if err := k8s.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	alice, controller, admin, kuberay := as(t, "alice"), as(t, controllerUser), as(t, "bob", "platform-admins"), as(t, "kuberay")

	job := func(ns, name string, queued bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
		if queued {
			j.Labels = map[string]string{render.LabelQueueName: "runs"}
		}
		return j
	}
	rayCluster := func(name string, owner *metav1.OwnerReference) *rayv1.RayCluster {
		rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Labels: map[string]string{render.LabelQueueName: "runs"}},
			Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray"}}}}}}}
		if owner != nil {
			rc.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return rc
	}
	refused := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "created by the TauGrid controller only")
	}
	// The policy takes a moment to be compiled and served.
	waitFor(t, 30*time.Second, "the policy to refuse alice's queued Job", func() bool {
		probe := job(tenant, "", true)
		probe.GenerateName = "alice-probe-"
		return refused(alice.Create(ctx, probe))
	})

	err = alice.Create(ctx, job(tenant, "alice-job", true))
	if !refused(err) || !strings.Contains(err.Error(), "not by alice") {
		t.Errorf("alice's queued Job: %v; want it refused, naming her", err)
	}
	rj := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "alice-rayjob", Namespace: tenant, Labels: map[string]string{render.LabelQueueName: "runs"}},
		Spec: rayv1.RayJobSpec{Entrypoint: "python mine.py", RayClusterSpec: &rayCluster("x", nil).Spec}}
	if err := alice.Create(ctx, rj); !refused(err) {
		t.Errorf("alice's queued RayJob: %v; want it refused", err)
	}
	forged := &metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "someones", UID: "forged", Controller: ptr.To(true)}
	if err := alice.Create(ctx, rayCluster("alice-cluster", nil)); !refused(err) {
		t.Errorf("alice's queued RayCluster: %v; want it refused", err)
	}
	// A RayCluster a RayJob controls is not queued by Kueue (its RayJob
	// is): KubeRay makes it from a RayJob the policy let through.
	if err := kuberay.Create(ctx, rayCluster("rayjobs-cluster", forged)); err != nil {
		t.Errorf("KubeRay's cluster of a RayJob: %v; want it let in", err)
	}
	plain := job(tenant, "alice-plain", false)
	if err := alice.Create(ctx, plain); err != nil {
		t.Fatalf("alice's Job that names no queue: %v; want it let in", err)
	}
	labelled := plain.DeepCopy()
	labelled.Labels = map[string]string{render.LabelQueueName: "runs"}
	if err := alice.Patch(ctx, labelled, client.MergeFrom(plain)); !refused(err) {
		t.Errorf("alice labelling her Job into a queue: %v; want it refused", err)
	}
	if err := controller.Create(ctx, job(tenant, "controllers-job", true)); err != nil {
		t.Errorf("the controller's queued Job: %v; want it let in", err)
	}
	if err := admin.Create(ctx, job(tenant, "admins-job", true)); err != nil {
		t.Errorf("an excepted platform admin's queued Job: %v; want it let in (the admission check still stands)", err)
	}
	if err := alice.Create(ctx, job(other, "alice-elsewhere", true)); err != nil {
		t.Errorf("a queued Job outside the tenant namespaces: %v; want it let in", err)
	}
}
