// Package clusters is how TauGrid works with MultiKueue worker clusters:
// the MultiKueue objects a manager needs to dispatch a ClusterQueue's
// workloads to its workers, and which cluster's API reads a run's pods
// (the local one, or the worker its attempt was dispatched to), built
// from the same kubeconfig Secrets Kueue reads.
package clusters

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// KubeconfigKey is the key of a worker's kubeconfig in its Secret, in
// Kueue's namespace (Kueue reads no other).
const KubeconfigKey = "kubeconfig"

// Worker is a worker cluster as the platform declares it.
type Worker struct {
	// Name of the cluster, as Workloads' status.clusterName will say it.
	Name string
	// Secret in Kueue's namespace holding the worker's kubeconfig.
	Secret string
}

// CheckName is the name of the MultiKueue AdmissionCheck (and of its
// MultiKueueConfig) that dispatches ClusterQueue cq's workloads.
func CheckName(cq string) string { return "tau-dispatch-" + cq }

// Cluster is the MultiKueueCluster of a worker.
func Cluster(w Worker) *kueue.MultiKueueCluster {
	return &kueue.MultiKueueCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "MultiKueueCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{
			KubeConfig: &kueue.KubeConfig{Location: w.Secret, LocationType: kueue.SecretLocationType},
		}},
	}
}

// Dispatch is the AdmissionCheck and MultiKueueConfig that send ClusterQueue
// cq's workloads to the named workers; the ClusterQueue names the check.
func Dispatch(cq string, workers []string) (*kueue.AdmissionCheck, *kueue.MultiKueueConfig) {
	name := CheckName(cq)
	check := &kueue.AdmissionCheck{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "AdmissionCheck"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.AdmissionCheckSpec{
			ControllerName: kueue.MultiKueueControllerName,
			Parameters: &kueue.AdmissionCheckParametersReference{
				APIGroup: kueue.GroupVersion.Group, Kind: "MultiKueueConfig", Name: name,
			},
		},
	}
	config := &kueue.MultiKueueConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "MultiKueueConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kueue.MultiKueueConfigSpec{Clusters: workers},
	}
	return check, config
}

// WithDispatch makes ClusterQueue cq dispatch through its MultiKueue check.
func WithDispatch(cq *kueue.ClusterQueue) {
	name := kueue.AdmissionCheckReference(CheckName(cq.Name))
	if cq.Spec.AdmissionChecksStrategy == nil {
		cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{}
	}
	for _, r := range cq.Spec.AdmissionChecksStrategy.AdmissionChecks {
		if r.Name == name {
			return
		}
	}
	cq.Spec.AdmissionChecksStrategy.AdmissionChecks = append(cq.Spec.AdmissionChecksStrategy.AdmissionChecks,
		kueue.AdmissionCheckStrategyRule{Name: name})
}
