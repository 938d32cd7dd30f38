package clusters

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Pods is the API of the cluster that holds a run's pods, as the read side
// uses it: pods, nodes and events through Reader, container logs (streams)
// through Logs.
type Pods struct {
	// Cluster is the worker's name; "" for the local cluster.
	Cluster string
	Reader  client.Reader
	Logs    corev1client.PodsGetter
	// Client writes to a worker what a dispatched attempt needs there
	// besides its workload (its NetworkPolicy fence); nil locally, where
	// the run reconciler creates those itself.
	Client client.Client
}

// Locator says which cluster's API reads a run's pods, given the cluster
// its attempt runs on (TauRun status.workload.cluster, from its Kueue
// Workload's status.clusterName): "" is the local cluster.
type Locator interface {
	PodsOf(ctx context.Context, cluster string) (*Pods, error)
}

// Local is a single cluster: every run's pods are read from it, and a run
// said to be on a worker is an error, never a silent read of the wrong
// cluster.
type Local Pods

// PodsOf returns the local cluster for "".
func (l *Local) PodsOf(_ context.Context, cluster string) (*Pods, error) {
	if cluster != "" {
		return nil, fmt.Errorf("the run's attempt is on worker cluster %q, which this controller is not set up to reach", cluster)
	}
	return (*Pods)(l), nil
}

// DefaultCallTimeout bounds each read of a worker: a worker whose API is
// slow holds up only the runs on it.
const DefaultCallTimeout = 10 * time.Second

// Workers reads a dispatched run's pods from its worker, through a client
// built from the kubeconfig in the worker's Secret (the one Kueue reads).
// It keeps, per worker, only that client, rebuilt when the Secret changes:
// no object of a worker is cached, and each read asks only for one run's
// pods (its namespace and labels).
type Workers struct {
	// Local reads the runs that were not dispatched.
	Local *Pods
	// Manager reads MultiKueueClusters and their Secrets; an uncached
	// reader (the manager's API reader), so no Secret is cached.
	Manager client.Reader
	// Namespace is Kueue's, where the kubeconfig Secrets are.
	Namespace string
	// Scheme of the worker clients: core types at least.
	Scheme *runtime.Scheme
	// CallTimeout bounds each non-streaming call; 0: DefaultCallTimeout.
	CallTimeout time.Duration
	// Metrics counts and times the calls to each worker; nil: none.
	Metrics *Metrics

	mu      sync.Mutex
	clients map[string]*workerClient
}

// workerClient is the client of one worker, built from one version of its
// Secret.
type workerClient struct {
	secretVersion string
	pods          *Pods
}

// PodsOf returns the local cluster for "", or a client of the named worker.
func (w *Workers) PodsOf(ctx context.Context, cluster string) (*Pods, error) {
	if cluster == "" {
		if w.Local == nil {
			return nil, errors.New("no local cluster configured")
		}
		return w.Local, nil
	}
	var mkc kueue.MultiKueueCluster
	if err := w.Manager.Get(ctx, types.NamespacedName{Name: cluster}, &mkc); err != nil {
		return nil, fmt.Errorf("worker cluster %s: %w", cluster, err)
	}
	s, err := KubeconfigSecret(ctx, w.Manager, w.Namespace, &mkc)
	if err != nil {
		return nil, err
	}
	return w.clientFor(cluster, s)
}

// ErrKubeconfigNotInSecret: a MultiKueueCluster whose kubeconfig is not in
// a Secret (Kueue's other location, a file path, is never read here).
var ErrKubeconfigNotInSecret = errors.New("its kubeconfig is not in a Secret")

// KubeconfigSecret reads, through r, the Secret in Kueue's namespace that
// holds the kubeconfig of worker mkc, the one Kueue itself uses.
func KubeconfigSecret(ctx context.Context, r client.Reader, namespace string, mkc *kueue.MultiKueueCluster) (*corev1.Secret, error) {
	kc := mkc.Spec.ClusterSource.KubeConfig
	if kc == nil || kc.LocationType != kueue.SecretLocationType {
		return nil, fmt.Errorf("worker cluster %s: %w", mkc.Name, ErrKubeconfigNotInSecret)
	}
	var s corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: kc.Location}, &s); err != nil {
		return nil, fmt.Errorf("worker cluster %s: its kubeconfig Secret %s: %w", mkc.Name, kc.Location, err)
	}
	return &s, nil
}

// clientFor returns the client built from this version of the Secret,
// building it if need be.
func (w *Workers) clientFor(cluster string, s *corev1.Secret) (*Pods, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.clients[cluster]; c != nil && c.secretVersion == s.ResourceVersion {
		return c.pods, nil
	}
	pods, err := w.build(cluster, s.Data[KubeconfigKey])
	if err != nil {
		return nil, fmt.Errorf("worker cluster %s: kubeconfig Secret %s: %w", cluster, s.Name, err)
	}
	if w.clients == nil {
		w.clients = map[string]*workerClient{}
	}
	w.clients[cluster] = &workerClient{secretVersion: s.ResourceVersion, pods: pods}
	return pods, nil
}

// build makes the clients of one worker: reads time out per call; log
// streams live as long as their context.
func (w *Workers) build(cluster string, kubeconfig []byte) (*Pods, error) {
	cfg, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.WrapTransport = w.Metrics.wrap(cluster)
	reads := rest.CopyConfig(cfg)
	reads.Timeout = w.CallTimeout
	if reads.Timeout <= 0 {
		reads.Timeout = DefaultCallTimeout
	}
	c, err := client.New(reads, client.Options{Scheme: w.Scheme})
	if err != nil {
		return nil, err
	}
	logs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Pods{Cluster: cluster, Reader: c, Logs: logs.CoreV1(), Client: c}, nil
}

// RESTConfig parses a worker's kubeconfig as Kueue accepts one: its current
// context's credentials embedded (client certificate or token data),
// certificates checked; no exec or auth-provider plugin, no file path, no
// insecure TLS. Kueue refuses the same, and a controller must never run a
// command or read a file a kubeconfig names. Errors never quote the file.
func RESTConfig(kubeconfig []byte) (*rest.Config, error) {
	if len(kubeconfig) == 0 {
		return nil, fmt.Errorf("no %q key", KubeconfigKey)
	}
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, errors.New("not a kubeconfig")
	}
	if err := checkKubeconfig(raw); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 20, 40
	return cfg, nil
}

// checkKubeconfig refuses what a controller must not act on.
func checkKubeconfig(c *clientcmdapi.Config) error {
	for name, a := range c.AuthInfos {
		switch {
		case a.Exec != nil || a.AuthProvider != nil:
			return fmt.Errorf("user %q runs a credential plugin: not allowed", name)
		case a.TokenFile != "" || a.ClientCertificate != "" || a.ClientKey != "":
			return fmt.Errorf("user %q reads credentials from files: embed them", name)
		case a.Username != "" || a.Password != "":
			return fmt.Errorf("user %q uses basic authentication: not allowed", name)
		}
	}
	for name, cl := range c.Clusters {
		switch {
		case cl.InsecureSkipTLSVerify:
			return fmt.Errorf("cluster %q skips TLS verification: not allowed", name)
		case cl.CertificateAuthority != "":
			return fmt.Errorf("cluster %q reads its CA from a file: embed it", name)
		}
	}
	return nil
}
