package platform

import (
	"context"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policy "github.com/taugrid/taugrid/policy"
)

// TestPlatformCredentialsBranches: a credentials Secret that does not
// exist stalls the platform (a human must create it) and counts as
// handled; one the API server cannot give now is a transient error,
// retried with backoff, and neither stalls the platform nor counts as
// handled. On the fake client, in milliseconds.
func TestPlatformCredentialsBranches(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := taugridv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	unavailable := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewServiceUnavailable("etcd is busy")
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	cases := map[string]struct {
		faults   *interceptor.Funcs
		wantErr  bool
		stalled  bool
		observed bool
	}{
		"the Secret does not exist":         {nil, false, true, true},
		"the API server cannot give it now": {&unavailable, true, false, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &taugridv1.TauPlatform{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1},
				Spec: taugridv1.TauPlatformSpec{GitSource: taugridv1.GitSource{URL: "https://git.example.com/platform.git",
					SecretRef: &taugridv1.LocalObjectReference{Name: "platform-git"}}, Ref: "main", Path: "."}}
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(p).WithStatusSubresource(p)
			if tc.faults != nil {
				b = b.WithInterceptorFuncs(*tc.faults)
			}
			c := b.Build()
			r := &PlatformReconciler{Client: c, Policies: &policy.PolicyStore{Client: c, Namespace: "taugrid-system"},
				Clock: clocktesting.NewFakePassiveClock(metav1.Now().Time), Recorder: events.NewFakeRecorder(10)}
			_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
			if (err != nil) != tc.wantErr {
				t.Errorf("reconcile: %v; want an error: %v", err, tc.wantErr)
			}
			got := &taugridv1.TauPlatform{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
				t.Fatal(err)
			}
			if s := apimeta.IsStatusConditionTrue(got.Status.Conditions, taugridv1.ConditionStalled); s != tc.stalled {
				t.Errorf("Stalled = %v, want %v (conditions %+v)", s, tc.stalled, got.Status.Conditions)
			}
			if o := got.Status.ObservedGeneration == got.Generation; o != tc.observed {
				t.Errorf("observedGeneration %d at generation %d: handled = %v, want %v", got.Status.ObservedGeneration, got.Generation, o, tc.observed)
			}
		})
	}
}
