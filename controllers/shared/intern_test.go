package shared

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
