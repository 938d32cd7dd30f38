package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/controllers/shared"
)

// The real API server tells a JSON patch whose test failed (the object
// moved on: the admission check's verdict waits for the next look) from
// one that would make the object invalid (an error), as
// shared.PatchTestFailed reads its answers; neither changes the object.
func TestAPatchTestFailsAsTheAPIServerSaysSo(t *testing.T) {
	integration(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "patch-tests", Namespace: "default"}, Data: map[string]string{"a": "1"}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cm) })
	patch := func(ops string) error {
		return k8s.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(ops)))
	}

	err := patch(`[{"op":"test","path":"/data/a","value":"2"},{"op":"add","path":"/data/b","value":"x"}]`)
	if err == nil || !shared.PatchTestFailed(err) {
		t.Errorf("a patch whose test failed: %v; want a failed test", err)
	}
	err = patch(`[{"op":"test","path":"/data/a","value":"1"},{"op":"add","path":"/data/bad key!","value":"x"}]`)
	if err == nil || shared.PatchTestFailed(err) {
		t.Errorf("a patch that makes the object invalid: %v; want an error that is no failed test", err)
	}
	got := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 1 || got.Data["a"] != "1" {
		t.Errorf("refused patches changed the object: %v", got.Data)
	}
	if err := patch(`[{"op":"test","path":"/data/a","value":"1"},{"op":"add","path":"/data/b","value":"x"}]`); err != nil {
		t.Errorf("a patch whose test passed: %v", err)
	}
}
