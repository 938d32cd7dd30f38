package controlplane

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
)

// kwokStages is how kwok plays the kubelet of the test cluster's nodes.
//
//go:embed kwok/stages.yaml
var kwokStages []byte

// kwokNodeAnnotation marks the nodes kwok plays the kubelet of.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// GPUProductLabel is the label NVIDIA's GPU feature discovery puts on GPU
// nodes, which the example platform's h200 ResourceFlavor selects.
const GPUProductLabel = "nvidia.com/gpu.product"

// Controllers of kube-controller-manager the test cluster runs: Jobs make
// their pods, owned objects go with their owner, finished Jobs expire, and
// a node is schedulable once Ready (the not-ready taint a new node carries
// is lifted) and tainted again if kwok stops renewing its lease.
const kcmControllers = "job-controller,garbage-collector-controller,ttl-after-finished-controller,node-lifecycle-controller"

// defaultJobSyncs is the Job controller's syncs at once (Options.JobSyncs).
const defaultJobSyncs = 10

// startNodes starts what turns objects into pods on nodes: the real
// kube-scheduler, the real Job, garbage-collector and TTL controllers, and
// kwok as the kubelet of fake nodes. Pods run only where the scheduler put
// them, so a pod no node fits stays Pending with the scheduler's reason.
func (e *Env) startNodes(ctx context.Context, binDir string) error {
	serving, err := e.writeKwokServing()
	if err != nil {
		return err
	}
	stages := filepath.Join(e.dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, append(slices.Clip(kwokStages), serving.clusterLogs()...), 0o644); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() {
		errs[0] = e.runOnFreePort(ctx, BinScheduler, filepath.Join(binDir, BinScheduler), func(port int) ([]string, string) {
			// --v=2: the log says when each pod was tried, placed or left
			// Pending, for a test whose pod did not run.
			return append(append(e.servingArgs(port), "--leader-elect=false", "--v=2"), e.clientRateArgs()...), fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
		})
	})
	wg.Go(func() {
		errs[1] = e.runOnFreePort(ctx, BinControllerManager, filepath.Join(binDir, BinControllerManager), func(port int) ([]string, string) {
			args := append(e.servingArgs(port), "--leader-elect=false", "--controllers="+kcmControllers,
				"--use-service-account-credentials=false", fmt.Sprintf("--concurrent-job-syncs=%d", cmp.Or(e.opts.JobSyncs, defaultJobSyncs)), "--concurrent-gc-syncs=10",
				fmt.Sprintf("--node-monitor-grace-period=%s", e.nodeLease()*5/4))
			return append(args, e.clientRateArgs()...), fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
		})
	})
	wg.Go(func() {
		errs[2] = e.runOnFreePort(ctx, BinKwok, filepath.Join(binDir, BinKwok), func(port int) ([]string, string) {
			return []string{"--kubeconfig=" + e.Kubeconfig, "--config=" + stages,
				"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
				fmt.Sprintf("--server-address=127.0.0.1:%d", port), "--node-ip=127.0.0.1", fmt.Sprintf("--node-port=%d", port),
				"--tls-cert-file=" + serving.cert, "--tls-private-key-file=" + serving.key,
				fmt.Sprintf("--node-lease-duration-seconds=%d", int(e.nodeLease().Seconds())),
			}, fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
		})
	})
	wg.Wait()
	return errors.Join(errs...)
}

// kwokServing is what kwok needs to serve its nodes' kubelet API as a
// kubelet does: the API server's pods/log reaches it at the nodes'
// InternalIP and kubelet port (kwok's own address), over TLS, and it
// answers with a container log for every pod. Without it a log read went
// to an address nothing listens on and came back refused (500) after
// 1.45 s, which no cluster's kubelet does, and throttled every reader of
// logs at scale (hack/scale: the sealer, waiting on 2 such reads a run).
type kwokServing struct {
	cert, key string // the server's certificate, self-signed for 127.0.0.1
	log       string // the container log every pod's containers show, in the CRI's log format
}

// kwokLog is what every container kwok plays shows as its log.
var kwokLog = []string{
	"starting on a node kwok plays: no process runs here",
	"the pod's phases are kwok's stages (test/controlplane/kwok/stages.yaml)",
	"done",
}

// writeKwokServing writes kwok's serving certificate and key and the
// containers' log into the control plane's directory.
func (e *Env) writeKwokServing() (kwokServing, error) {
	s := kwokServing{cert: filepath.Join(e.dir, "kwok-serving.crt"), key: filepath.Join(e.dir, "kwok-serving.key"),
		log: filepath.Join(e.dir, "kwok-container.log")}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		return s, fmt.Errorf("kwok's serving certificate: %w", err)
	}
	// A fixed time: the log's lines are the same on any date.
	var log strings.Builder
	for _, line := range kwokLog {
		fmt.Fprintf(&log, "2026-01-01T00:00:00.000000000Z stdout F %s\n", line)
	}
	return s, errors.Join(os.WriteFile(s.cert, certPEM, 0o600), os.WriteFile(s.key, keyPEM, 0o600),
		os.WriteFile(s.log, []byte(log.String()), 0o644))
}

// clusterLogs is the kwok configuration document that serves s.log as
// every container's log, appended to the stages.
func (s kwokServing) clusterLogs() []byte {
	return fmt.Appendf(nil, `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: every-container
spec:
  logs:
  - logsFile: %q
    previousLogsFile: %q
`, s.log, s.log)
}

// nodeLease is Options.NodeLease, or the kubelet's 40 s.
func (e *Env) nodeLease() time.Duration {
	if e.opts.NodeLease > 0 {
		return e.opts.NodeLease
	}
	return 40 * time.Second
}

// clientRateArgs set the scheduler's and the controller manager's request
// rate (Options.ClientQPS); none keeps their defaults.
func (e *Env) clientRateArgs() []string {
	if e.opts.ClientQPS <= 0 {
		return nil
	}
	return []string{fmt.Sprintf("--kube-api-qps=%g", e.opts.ClientQPS), fmt.Sprintf("--kube-api-burst=%d", int(2*e.opts.ClientQPS))}
}

// servingArgs are the flags kube-scheduler and kube-controller-manager share:
// the cluster and the loopback port their health checks answer on.
func (e *Env) servingArgs(port int) []string {
	return []string{"--kubeconfig=" + e.Kubeconfig, "--authentication-kubeconfig=" + e.Kubeconfig,
		"--authorization-kubeconfig=" + e.Kubeconfig, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(e.dir, "serving-certs")}
}

// runOnFreePort starts a component on a free port, with a new one if the
// port was taken meanwhile.
func (e *Env) runOnFreePort(ctx context.Context, name, path string, argsFor func(port int) ([]string, string)) error {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		args, ready := argsFor(port)
		err = e.run(ctx, name, path, args, ready)
		if err == nil || attempt == startAttempts || !addrInUse(err) {
			return err
		}
	}
}

// hostSlot is taugridv1.ResourceHostSlot; the harness imports nothing of
// TauGrid's API.
const hostSlot = "taugrid.dev/host"

// GPUNode is a node shaped like an 8x H200 server (224 CPUs, 2 TiB of
// memory), labelled as NVIDIA's GPU feature discovery labels one, which
// kwok plays the kubelet of. It offers one taugrid.dev/host slot, as
// tau-nodeagent advertises on the GPU nodes it runs on. Change its capacity
// to make other shapes.
func GPUNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("224"),
		corev1.ResourceMemory: resource.MustParse("2Ti"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      resource.MustParse("8"),
		hostSlot:              resource.MustParse("1"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				GPUProductLabel:          "NVIDIA-H200",
				"nvidia.com/gpu.count":   "8",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
}

// AddNodes creates nodes for kwok to run; they are Ready within a second.
func (e *Env) AddNodes(ctx context.Context, nodes ...*corev1.Node) error {
	for _, n := range nodes {
		if err := e.Client.Create(ctx, n); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	return nil
}
