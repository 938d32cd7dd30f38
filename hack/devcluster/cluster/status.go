package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/test/controlplane"
)

// Status is what runs of the dev cluster.
type Status struct {
	Kubeconfig    string
	LogDir        string
	ClusterExists bool // kwok has the cluster, running or not
	APIServer     bool // kube-apiserver answers /readyz
	ReadyNodes    int  // Ready fake GPU nodes
	Kueue         int  // pid, 0 when not running
	KubeRay       int  // pid, 0 when not running
}

// Up reports whether everything runs.
func (s Status) Up() bool { return s.APIServer && s.Kueue != 0 && s.KubeRay != 0 }

func (s Status) String() string {
	var b strings.Builder
	state := map[bool]string{true: "up", false: "down"}
	fmt.Fprintf(&b, "dev cluster: %s\n", state[s.Up()])
	fmt.Fprintf(&b, "  kwok cluster %q: exists=%t api-server=%s ready-gpu-nodes=%d\n", Name, s.ClusterExists, state[s.APIServer], s.ReadyNodes)
	fmt.Fprintf(&b, "  kueue: %s\n  kuberay-operator: %s\n", pidState(s.Kueue), pidState(s.KubeRay))
	fmt.Fprintf(&b, "  kubeconfig: %s\n  logs: %s\n", s.Kubeconfig, s.LogDir)
	return b.String()
}

// access tells the user how to reach the cluster.
func (s Status) access() string {
	return fmt.Sprintf("kubeconfig: %s\n  export KUBECONFIG=%s\nlogs: %s\n", s.Kubeconfig, s.Kubeconfig, s.LogDir)
}

func pidState(pid int) string {
	if pid == 0 {
		return "not running"
	}
	return fmt.Sprintf("running (pid %d)", pid)
}

// Status looks at what runs. It never fails: what it cannot reach is down.
func (c *Cluster) Status(ctx context.Context) Status {
	st := Status{Kubeconfig: c.Kubeconfig(), LogDir: c.LogDir(), ClusterExists: c.exists()}
	st.Kueue, _ = c.runningPID(controlplane.BinKueue)
	st.KubeRay, _ = c.runningPID(controlplane.BinKubeRay)
	if !st.ClusterExists {
		return st
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cfg, err := c.RESTConfig()
	if err != nil {
		return st
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return st
	}
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return st
	}
	st.APIServer = true
	if cl, err := c.Client(); err == nil {
		st.ReadyNodes = readyGPUNodes(ctx, cl)
	}
	return st
}

func readyGPUNodes(ctx context.Context, cl client.Client) int {
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes, client.HasLabels{controlplane.GPUProductLabel}); err != nil {
		return 0
	}
	n := 0
	for _, node := range nodes.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}
