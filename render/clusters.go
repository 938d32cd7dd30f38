package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClustersFile is the policy file that declares MultiKueue worker
// clusters: the platform's manager cluster dispatches the named
// ClusterQueues' workloads to them.
const ClustersFile = "clusters.yaml"

// WorkerCluster is a worker cluster as the platform repo declares it.
type WorkerCluster struct {
	// Name of the cluster: its MultiKueueCluster, and what a dispatched
	// run's status.workload.cluster says.
	Name string `json:"name"`
	// KubeconfigSecret is the Secret, in Kueue's namespace of the manager,
	// holding the worker's kubeconfig (key "kubeconfig").
	KubeconfigSecret string `json:"kubeconfig_secret"`
	// ClusterQueues are the manager's ClusterQueues (declared in kueue/)
	// whose workloads may be dispatched to this worker.
	ClusterQueues []string `json:"cluster_queues"`

	check *checker
	index int
}

// Refuse locates a problem with the worker found outside its file (a
// worker that cannot be reached, a ClusterQueue kueue/ does not declare,
// something a tenant uses that the worker lacks) at field of its entry in
// clusters.yaml ("" for the entry itself).
func (w WorkerCluster) Refuse(field, format string, args ...any) *FieldError {
	path := fmt.Sprintf("clusters[%d]", w.index)
	if field != "" {
		path += "." + field
	}
	fe := &FieldError{File: ClustersFile, Line: 1, Col: 1, Path: path, Msg: fmt.Sprintf(format, args...)}
	if w.check != nil {
		at := w.check.at(path)
		fe.Line, fe.Col = at.line, at.col
	}
	return fe
}

// Dispatches reports whether the worker takes ClusterQueue cq's workloads.
func (w WorkerCluster) Dispatches(cq string) bool {
	for _, q := range w.ClusterQueues {
		if q == cq {
			return true
		}
	}
	return false
}

func validateClusters(c *checker, workers []WorkerCluster) {
	names := map[string]bool{}
	for i := range workers {
		w := &workers[i]
		w.check, w.index = c, i
		at := fmt.Sprintf("clusters[%d]", i)
		c.uniqueLabel(at+".name", w.Name, names)
		if w.Name != "" {
			c.dnsLabel(at+".name", w.Name, 63)
		}
		switch {
		case w.KubeconfigSecret == "":
			c.errorf(at+".kubeconfig_secret", "required: the Secret in Kueue's namespace holding the worker's kubeconfig")
		case len(validation.IsDNS1123Subdomain(w.KubeconfigSecret)) > 0:
			c.errorf(at+".kubeconfig_secret", "%q is not a Secret name", w.KubeconfigSecret)
		}
		if len(w.ClusterQueues) == 0 {
			c.errorf(at+".cluster_queues", "required: the ClusterQueues (from kueue/) whose workloads this worker runs")
		}
		seen := map[string]bool{}
		for j, q := range w.ClusterQueues {
			c.uniqueLabel(fmt.Sprintf("%s.cluster_queues[%d]", at, j), q, seen)
		}
	}
}
