package shared

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Two pods decoded apart share the text they repeat once cached, and each
// reads exactly as it did.
func TestTheCacheSharesWhatObjectsRepeat(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		// Built from bytes, as a decoder builds them: no two share memory.
		s := func(v string) string { return string([]byte(v)) }
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: s(name), Namespace: s("team-a"), Labels: map[string]string{s("taugrid.dev/run"): s(name), s("app.kubernetes.io/managed-by"): s("taugrid")}},
			Spec: corev1.PodSpec{NodeName: s("gpu-node-0007"), Containers: []corev1.Container{{Name: s("main"),
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceName(s("nvidia.com/gpu")): resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: s("PodCompleted")}}},
		}
	}
	a, b := pod("research-1"), pod("research-2")
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := CacheTransform(p); err != nil {
			t.Fatal(err)
		}
	}
	if !equality.Semantic.DeepEqual(a, wantA) || !equality.Semantic.DeepEqual(b, wantB) {
		t.Fatalf("the cached pods read differently:\n%+v\n%+v", a, b)
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	for what, pair := range map[string][2]string{
		"namespace":       {a.Namespace, b.Namespace},
		"node":            {a.Spec.NodeName, b.Spec.NodeName},
		"a label's value": {a.Labels["app.kubernetes.io/managed-by"], b.Labels["app.kubernetes.io/managed-by"]},
		"a container":     {a.Spec.Containers[0].Name, b.Spec.Containers[0].Name},
		"a condition":     {a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s %q: two copies", what, pair[0])
		}
	}
	for k := range a.Labels {
		for l := range b.Labels {
			if k == l && !same(k, l) {
				t.Errorf("label key %q: two copies", k)
			}
		}
	}
	if same(a.Name, b.Name) {
		t.Errorf("the names share memory, yet differ")
	}
}

// Maps that repeat from object to object (what a pod asks for, where its
// workload was admitted) are one map once cached; maps that differ, or
// that hold the same amount written another way, stay apart; and each
// object reads exactly as it did.
func TestCachedObjectsShareTheMapsTheyRepeat(t *testing.T) {
	s := func(v string) string { return string([]byte(v)) }
	wl := func(run string, cpu resource.Quantity) *kueue.Workload {
		return &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: s("job-" + run), Labels: map[string]string{s("kueue.x-k8s.io/job-uid"): s(run)}},
			Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: s("main"), Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceName(s("nvidia.com/gpu")): resource.MustParse("1")}}}}}}}}},
			Status: kueue.WorkloadStatus{Admission: &kueue.Admission{ClusterQueue: "team-a", PodSetAssignments: []kueue.PodSetAssignment{{
				Name:          "main",
				Flavors:       map[corev1.ResourceName]kueue.ResourceFlavorReference{corev1.ResourceName(s("nvidia.com/gpu")): kueue.ResourceFlavorReference(s("h200"))},
				ResourceUsage: corev1.ResourceList{corev1.ResourceName(s("cpu")): cpu, corev1.ResourceName(s("memory")): resource.MustParse("32Gi")},
			}}}},
		}
	}
	// c's CPUs read "8" too, but as a binary amount: what is computed
	// from it (a sum, a half) is written otherwise.
	a, b, c := wl("run-1", resource.MustParse("8")), wl("run-2", resource.MustParse("8")), wl("run-3", *resource.NewQuantity(8, resource.BinarySI))
	want := []*kueue.Workload{a.DeepCopy(), b.DeepCopy(), c.DeepCopy()}
	for i, w := range []*kueue.Workload{a, b, c} {
		if _, err := CacheTransform(w); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(w, want[i]) {
			t.Fatalf("the cached workload reads differently:\n%+v\nwant\n%+v", w, want[i])
		}
	}
	one := func(x, y any) bool { return reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer() }
	pa, pb, pc := a.Status.Admission.PodSetAssignments[0], b.Status.Admission.PodSetAssignments[0], c.Status.Admission.PodSetAssignments[0]
	for what, shared := range map[string]bool{
		"the pod set's GPUs": one(a.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Limits, b.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Limits),
		"the flavors":        one(pa.Flavors, pb.Flavors),
		"the resource usage": one(pa.ResourceUsage, pb.ResourceUsage),
		"the flavors of c":   one(pa.Flavors, pc.Flavors),
	} {
		if !shared {
			t.Errorf("%s: two maps of the same entries", what)
		}
	}
	if one(a.Labels, b.Labels) {
		t.Errorf("the labels of two runs are one map: %v", a.Labels)
	}
	if one(pa.ResourceUsage, pc.ResourceUsage) {
		t.Errorf("8 CPUs, decimal and binary, are one map: the second would read as the first")
	}
	// A reader's copy is its own: changing it changes no other object.
	cp := a.DeepCopy()
	cp.Status.Admission.PodSetAssignments[0].ResourceUsage["cpu"] = resource.MustParse("64")
	if q := pb.ResourceUsage["cpu"]; q.String() != "8" {
		t.Errorf("a copy's change reached another cached workload: cpu %s", q.String())
	}
}
