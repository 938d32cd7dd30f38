package main

import (
	"fmt"
	"slices"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/runs"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// With a kubeconfig, tau reads a run from the cluster it was started in
// (the MultiKueue manager, where runs and Workloads are). A run whose
// attempt was dispatched to a worker cluster has its pods, their nodes
// and logs there: tau reads them through the kubeconfig context named
// after that cluster (the name `tau status` shows, the MultiKueueCluster's
// in the platform's clusters.yaml), and says so plainly when there is
// none. It never reads the manager's pods for a dispatched run.

// workerContextError says that a dispatched run's worker has no context
// in the user's kubeconfig, and how to read the run anyway.
type workerContextError struct {
	run, cluster string
	contexts     []string
}

func (e workerContextError) Error() string {
	return fmt.Sprintf("run %s runs on worker cluster %s, and your kubeconfig has no context named %q (it has: %v); "+
		"add one for that cluster under that name (kubectl config set-context %s --cluster=... --user=...), "+
		"or read the run through the TauGrid API (TAU_API_URL and TAU_TOKEN), which reaches the worker itself",
		e.run, e.cluster, e.cluster, e.contexts, e.cluster)
}

// podsOf is the reader and the log source of run's pods: the cluster of
// the kubeconfig for a run that was not dispatched; for one on a worker,
// pods and nodes from the worker's context, events from both, everything
// else from the kubeconfig's cluster.
func (k *kubeSource) podsOf(run *taugridv1.TauRun) (client.Reader, runs.LogSource, error) {
	cluster := ""
	if run.Status.Workload != nil {
		cluster = run.Status.Workload.Cluster
	}
	if cluster == "" {
		return k.c, runs.PodLogs{Pods: k.cs.CoreV1()}, nil
	}
	worker, cs, err := k.workerClient(run.Name, cluster)
	if err != nil {
		return nil, nil, err
	}
	return clusters.Routed(k.c, worker), runs.PodLogs{Pods: cs.CoreV1()}, nil
}

// workerClient is a client of the kubeconfig's context named cluster.
func (k *kubeSource) workerClient(run, cluster string) (client.Client, kubernetes.Interface, error) {
	raw, err := k.rules.Load()
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("reading your kubeconfig: %w", err)}
	}
	if _, ok := raw.Contexts[cluster]; !ok {
		names := make([]string, 0, len(raw.Contexts))
		for name := range raw.Contexts {
			names = append(names, name)
		}
		slices.Sort(names)
		return nil, nil, usageError{workerContextError{run: run, cluster: cluster, contexts: names}}
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, cluster, &clientcmd.ConfigOverrides{}, k.rules).ClientConfig()
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("kubeconfig context %s (worker cluster %s): %w", cluster, cluster, err)}
	}
	cs, err := kubernetes.NewForConfig(cfg) // log streams: no timeout
	if err != nil {
		return nil, nil, err
	}
	reads := rest.CopyConfig(cfg)
	reads.Timeout = k.timeout
	c, err := client.New(reads, client.Options{Scheme: k.c.Scheme()})
	if err != nil {
		return nil, nil, unreachableError{fmt.Errorf("cannot reach worker cluster %s (context %s): %w", cluster, cluster, err)}
	}
	return c, cs, nil
}
