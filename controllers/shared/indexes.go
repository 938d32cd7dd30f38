package shared

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/server"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Index is a field index the manager's cache holds, so that a List with
// client.MatchingFields{Field: v} is answered from the cache.
type Index struct {
	Object  client.Object
	Field   string
	Extract client.IndexerFunc
}

// Indexes are the field indexes the controllers and the servers beside
// them list by. cmd/tau-controller registers them on the manager and the
// table tests' fake client (sharedtest.NewClient) has the same, so a List
// that works in a test works in the cluster.
func Indexes() []Index {
	return []Index{
		{&taugridv1.TauRepository{}, server.IndexRepositoryURL, server.RepositoryURL},
		{&taugridv1.TauRepository{}, server.IndexWebhookPath, server.WebhookPathOf},
		{&taugridv1.TauPlatform{}, server.IndexPlatformWebhookPath, server.PlatformWebhookPathOf},
		{&kueue.Workload{}, IndexWorkloadOwner, WorkloadOwner},
	}
}

// IndexWorkloadOwner indexes Kueue Workloads by "Kind/name" of the object
// that controls them (a Job, a RayJob).
const IndexWorkloadOwner = "taugrid.dev/workload-owner"

// WorkloadOwner extracts IndexWorkloadOwner.
func WorkloadOwner(o client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{ref.Kind + "/" + ref.Name}
	}
	return nil
}
