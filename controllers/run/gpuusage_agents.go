package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/taugrid/taugrid/api/gpus"
	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where the node agents are, as the chart deploys them: a DaemonSet's pods
// labelled so, whose container port named "metrics" serves /gpus.
const (
	NodeAgentLabel    = "app.kubernetes.io/name"
	NodeAgentName     = "tau-nodeagent"
	nodeAgentPortName = "metrics"
	// AgentTimeout bounds one agent's answer; agentParallel bounds the
	// agents asked at once for one attempt.
	AgentTimeout  = 5 * time.Second
	agentParallel = 8
	// maxReportBytes bounds one answer: an hour of 8 GPUs is under 100 KiB.
	maxReportBytes = 4 << 20
)

// MetricGPUUsageReads counts the controller's reads of node agents, by result.
const MetricGPUUsageReads = "taugrid_gpu_usage_reads_total"

// The agents serve /gpus only to callers RBAC lets get it.

// +kubebuilder:rbac:urls=/gpus,verbs=get

// NodeAgents reads GPU utilisation from the node agents. The agent of a
// node is its tau-nodeagent pod in Namespace, reached at the pod's IP and
// its "metrics" container port: the port the chart configures, read from
// the pod itself. Agents' pods are not TauGrid's runs' and not in the
// manager's cache; Reader finds one node's agent by a field selector on
// spec.nodeName: in cmd/tau-controller, AgentPods, a cache of the agents'
// pods alone, so a reading sends the API server nothing (a pod list a
// reading when it was looked up there: 1.8 a run in hack/scale). An
// address the cache still holds for a moment after its pod is gone gets
// only a token no API server takes (below), and an answer must name its
// node.
//
// Agents answer only callers the cluster vouches for: each request carries
// Token, the controller's own ServiceAccount token for the agents'
// audience (gpus.Audience), which the agent checks with a TokenReview for
// that audience and a SubjectAccessReview (get on /gpus, which the chart's
// ClusterRole grants the controller). The API server takes that token
// from no one, so whoever answers at an agent's address gets nothing it
// can act as the controller with.
type NodeAgents struct {
	Reader    client.Reader
	Namespace string
	// Token is the bearer token of every request: in a pod, the token
	// the chart projects for gpus.Audience (NodeAgentTokenFile), read
	// again as the kubelet rotates it. nil: none (an agent answers 401).
	Token oauth2.TokenSource
	// HTTP asks the agents; nil: a client with agentTimeout that follows no
	// redirect (the token is for the agent, no one else).
	HTTP *http.Client
	// Reads counts reads by result (ok, error, no-agent); nil counts none.
	Reads *prometheus.CounterVec
}

// NodeAgentTokenFile is where the chart has the kubelet project the
// controller's ServiceAccount token for gpus.Audience, which it rotates
// before it expires.
const NodeAgentTokenFile = "/var/run/secrets/taugrid.dev/node-agent/token"

// ServiceAccountToken reads the token at path, again at most a minute after
// it last did (client-go's cached file token source, as its in-cluster
// config does), so a rotated token is picked up.
func ServiceAccountToken(path string) oauth2.TokenSource {
	return transport.NewCachedFileTokenSource(path)
}

// NewGPUUsageReads registers the reads counter.
func NewGPUUsageReads(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricGPUUsageReads,
		Help: "Reads of the node agents' /gpus by the controller, by result (ok, error, no-agent)."}, []string{"result"})
	return c, reg.Register(c)
}

// Reports asks the agents of nodes for namespace's GPUs, agentParallel at a
// time, each within agentTimeout.
func (n *NodeAgents) Reports(ctx context.Context, namespace string, nodes []string) (map[string]*gpus.Report, []string) {
	var (
		mu     sync.Mutex
		out    = map[string]*gpus.Report{}
		unread []string
		wg     sync.WaitGroup
		slots  = make(chan struct{}, agentParallel)
	)
	for _, node := range nodes {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			rep, result := n.report(ctx, namespace, node)
			n.count(result)
			mu.Lock()
			defer mu.Unlock()
			if rep == nil {
				unread = append(unread, node)
				return
			}
			out[node] = rep
		})
	}
	wg.Wait()
	slices.Sort(unread)
	return out, unread
}

func (n *NodeAgents) count(result string) {
	if n.Reads != nil {
		n.Reads.WithLabelValues(result).Inc()
	}
}

// report reads one node's agent; nil and the result label when it cannot.
func (n *NodeAgents) report(ctx context.Context, namespace, node string) (*gpus.Report, string) {
	addr, err := n.agentOf(ctx, node)
	switch {
	case err != nil:
		return nil, "error"
	case addr == "":
		return nil, "no-agent"
	}
	ctx, cancel := context.WithTimeout(ctx, AgentTimeout)
	defer cancel()
	u := url.URL{Scheme: "http", Host: addr, Path: gpus.Path, RawQuery: url.Values{"namespace": {namespace}}.Encode()}
	req, err := n.request(ctx, u)
	if err != nil {
		return nil, "error"
	}
	hc := n.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: AgentTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "error"
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "error"
	}
	rep := &gpus.Report{}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReportBytes)).Decode(rep); err != nil || rep.Node != node {
		return nil, "error" // an answer from another node's agent is no answer
	}
	return rep, "ok"
}

// request is the GET of u, with the controller's token.
func (n *NodeAgents) request(ctx context.Context, u url.URL) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil || n.Token == nil {
		return req, err
	}
	tok, err := n.Token.Token()
	if err != nil {
		return nil, fmt.Errorf("reading the controller's ServiceAccount token: %w", err)
	}
	tok.SetAuthHeader(req)
	return req, nil
}

// AgentPods is a cache of the node agents' pods only: those in namespace
// labelled as the chart labels them, indexed by spec.nodeName for
// NodeAgents.Reader, and slimmed to what agentOf reads. It is a runnable
// (add it to the manager, which starts it). A pod that goes away is out of
// it when its watch says so; agentOf skips one being deleted or not
// Running.
func AgentPods(cfg *rest.Config, scheme *runtime.Scheme, namespace string) (cache.Cache, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {
			Namespaces: map[string]cache.Config{namespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{NodeAgentLabel: NodeAgentName}),
			Transform:  slimAgentPod,
		},
	}})
	if err != nil {
		return nil, err
	}
	err = c.IndexField(context.Background(), &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	})
	return c, err
}

// slimAgentPod keeps of an agent's pod what agentOf reads: its name,
// labels, deletion, node, phase, IP and its containers' ports.
func slimAgentPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
		ResourceVersion: p.ResourceVersion, Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP}}
	for _, c := range p.Spec.Containers {
		slim.Spec.Containers = append(slim.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
	}
	return slim, nil
}

// agentOf is the address of the running agent pod on node, "" if none.
func (n *NodeAgents) agentOf(ctx context.Context, node string) (string, error) {
	var pods corev1.PodList
	if err := n.Reader.List(ctx, &pods, client.InNamespace(n.Namespace), client.MatchingLabels{NodeAgentLabel: NodeAgentName},
		client.MatchingFields{"spec.nodeName": node}); err != nil {
		return "", fmt.Errorf("finding the node agent on %s: %w", node, err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		if port := metricsPort(&p); port > 0 {
			return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port))), nil
		}
	}
	return "", nil
}

// metricsPort is the agent container's "metrics" port.
func metricsPort(p *corev1.Pod) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == nodeAgentPortName {
				return port.ContainerPort
			}
		}
	}
	return 0
}
