package controlplane

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// An API server busy on a fresh start answers a large CRD's creation with a
// 504 after its own timeout, having created it or not: installing asks
// again, and a creation that went through is updated, not an error. A
// refusal of another kind is not retried.
func TestABusyAPIServersTimeoutOnACRDIsAskedAgain(t *testing.T) {
	defer func(w time.Duration) { crdRetryWait = w }(crdRetryWait)
	crdRetryWait = time.Millisecond
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "workloads.kueue.x-k8s.io"}}
	gr := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	cases := map[string]struct {
		answers []error // of the creations, in order; the rest go through
		want    bool    // installed
		creates int
	}{
		"a 504 that created nothing":           {answers: []error{apierrors.NewTimeoutError("request did not complete within requested timeout", 0)}, want: true, creates: 2},
		"a 504 that created it: updated":       {answers: []error{apierrors.NewTimeoutError("request did not complete within requested timeout", 0), apierrors.NewAlreadyExists(gr, crd.Name)}, want: true, creates: 2},
		"too busy twice":                       {answers: []error{apierrors.NewTooManyRequests("busy", 0), apierrors.NewServiceUnavailable("busy")}, want: true, creates: 3},
		"a refusal is not retried":             {answers: []error{apierrors.NewForbidden(gr, crd.Name, nil)}, creates: 1},
		"busy every time: it gives up at last": {answers: []error{apierrors.NewServerTimeout(gr, "create", 0), apierrors.NewServerTimeout(gr, "create", 0), apierrors.NewServerTimeout(gr, "create", 0), apierrors.NewServerTimeout(gr, "create", 0), apierrors.NewServerTimeout(gr, "create", 0)}, creates: crdCreateTries},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			creates := 0
			base := fake.NewClientBuilder().WithScheme(NewScheme())
			if len(tc.answers) > 1 && apierrors.IsAlreadyExists(tc.answers[1]) {
				base = base.WithObjects(crd.DeepCopy()) // the 504 created it
				tc.answers = tc.answers[:1]
			}
			c := interceptor.NewClient(base.Build(), interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				creates++
				if creates <= len(tc.answers) {
					return tc.answers[creates-1]
				}
				return c.Create(ctx, o, opts...)
			}})
			err := applyCRD(context.Background(), c, crd)
			if (err == nil) != tc.want || creates != tc.creates {
				t.Errorf("err %v after %d creations; want installed %v after %d", err, creates, tc.want, tc.creates)
			}
		})
	}
}
