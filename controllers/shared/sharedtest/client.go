// Package sharedtest builds what the controllers' table tests share: a
// fake client as the manager's (the same scheme and field indexes), and a
// fixed clock.
package sharedtest

import (
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Now is the table tests' "now": a fixed instant, so no test depends on
// the date it runs.
var Now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// Clock is a fake clock at Now.
func Clock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(Now) }

// Scheme holds every kind the controllers read or write.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(taugridv1.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(rayv1.AddToScheme(s))
	return s
}

// NewClient is a fake client holding objs, with the manager's field
// indexes (shared.Indexes), the field selectors the controllers send the
// API server (a pod's spec.nodeName, an event's involvedObject.name), and
// the status subresource of every kind whose status a controller patches.
func NewClient(objs ...client.Object) client.WithWatch {
	return Builder(objs...).Build()
}

// Builder is NewClient's builder, for a test that adds interceptors.
func Builder(objs ...client.Object) *fake.ClientBuilder {
	b := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
		WithStatusSubresource(&taugridv1.TauRun{}, &taugridv1.TauRepository{}, &taugridv1.TauPlatform{},
			&kueue.Workload{}, &kueue.AdmissionCheck{}, &batchv1.Job{}, &rayv1.RayJob{}, &corev1.Pod{}, &corev1.Node{})
	for _, ix := range shared.Indexes() {
		b = b.WithIndex(ix.Object, ix.Field, ix.Extract)
	}
	b = b.WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	})
	b = b.WithIndex(&corev1.Event{}, "involvedObject.name", func(o client.Object) []string {
		return []string{o.(*corev1.Event).InvolvedObject.Name}
	})
	return b
}
