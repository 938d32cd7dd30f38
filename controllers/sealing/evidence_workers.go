package sealing

import (
	"context"

	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/runs"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// attemptCluster is where one attempt's pods are read: the local cluster,
// or the worker it was dispatched to, through the client built from that
// worker's kubeconfig Secret (clusters.Workers), never cached.
type attemptCluster struct {
	// name is the worker's; "" for the local cluster.
	name string
	// pods reads the attempt's pods and nodes; nil when the worker could
	// not be reached (noted in the bundle).
	pods client.Reader
	// secrets reads the Secrets the worker's pods use, to mask their
	// values (the worker's copies may differ from the manager's); nil
	// locally.
	secrets client.Reader
	// events reads the events of the run, its Job and Workload (the
	// manager's) and of its pods (the worker's); nil: none recorded.
	events client.Reader
	// book, when synced, holds the local cluster's events: read instead
	// of events.
	book *EventBook
	// logs reads the containers' logs; nil: none recorded.
	logs runs.LogSource
}

// ClusterOf finds attempt n's cluster. A worker that cannot be reached
// leaves the bundle without its pods, nodes, events of the worker and
// logs, and says so: the manager's record is sealed all the same.
func (e *EvidenceRecorder) ClusterOf(ctx context.Context, c *Collection) attemptCluster {
	name := c.Run.Status.Attempts[c.Attempt-1].Cluster
	if name == "" || e.Clusters == nil {
		if name != "" {
			c.note("attempt %d ran on worker cluster %s, which this controller is not set up to read: its pods, nodes and logs are not recorded", c.Attempt, name)
			return attemptCluster{name: name, events: e.APIReader}
		}
		return attemptCluster{pods: e.Client, events: e.APIReader, book: e.Events, logs: e.Logs}
	}
	p, err := e.Clusters.PodsOf(ctx, name)
	if err != nil {
		c.note("worker cluster %s could not be read, so its pods, nodes, events and logs are not recorded: %s", name, c.Masker.Mask(err.Error()))
		return attemptCluster{name: name, events: e.APIReader}
	}
	at := attemptCluster{name: name, pods: p.Reader, secrets: p.Reader}
	if e.APIReader != nil {
		at.events = clusters.Routed(e.APIReader, p.Reader)
	}
	if e.Logs != nil {
		at.logs = runs.PodLogs{Pods: p.Logs}
	}
	return at
}
