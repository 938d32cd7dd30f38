package controlplane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelet serves one node's container logs the way a kubelet does, so that
// the API server's pods/log (tailLines, limitBytes, follow) works in tests
// as in a cluster: the test control plane runs no kubelet. StartKubelet
// creates the Node pointing at it.
type Kubelet struct {
	Node string
	// Queries receives the query of each log request, when a test reads it.
	Queries chan string

	mu   sync.Mutex
	logs map[string]*podLog // "<namespace>/<pod>/<container>"
}

type podLog struct {
	text   string
	closed bool
	grew   chan struct{} // closed and replaced on every append
}

// StartKubelet serves logs for node until the test ends and creates the
// Node with the kubelet's address and port.
func StartKubelet(t testing.TB, c client.Client, node string) *Kubelet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k, err := RunKubelet(ctx, c, node)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// RunKubelet serves logs for node until ctx ends and creates the Node with
// the kubelet's address and port, as StartKubelet does outside a test (the
// demo's worker node).
func RunKubelet(ctx context.Context, c client.Client, node string) (*Kubelet, error) {
	k := &Kubelet{Node: node, Queries: make(chan string, 64), logs: map[string]*podLog{}}
	srv := httptest.NewTLSServer(http.HandlerFunc(k.serve))
	context.AfterFunc(ctx, srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	p, _ := strconv.Atoi(port)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := c.Create(ctx, n); err != nil {
		srv.Close()
		return nil, fmt.Errorf("creating node %s: %w", node, err)
	}
	// On the latest copy: a node-lifecycle controller may taint it first.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
		return c.Status().Update(ctx, n)
	})
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("node %s: writing the kubelet's address: %w", node, err)
	}
	return k, nil
}

func (k *Kubelet) log(ns, pod, container string) *podLog {
	key := ns + "/" + pod + "/" + container
	l := k.logs[key]
	if l == nil {
		l = &podLog{grew: make(chan struct{})}
		k.logs[key] = l
	}
	return l
}

// Write appends to a container's log; followers see it at once.
func (k *Kubelet) Write(ns, pod, container, text string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.log(ns, pod, container)
	l.text += text
	close(l.grew)
	l.grew = make(chan struct{})
}

// Exit ends a container's log: followers' streams end.
func (k *Kubelet) Exit(ns, pod, container string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.log(ns, pod, container)
	l.closed = true
	close(l.grew)
	l.grew = make(chan struct{})
}

// serve answers /containerLogs/<ns>/<pod>/<container>, honouring
// tailLines, limitBytes and follow as the kubelet does.
func (k *Kubelet) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 {
		http.NotFound(w, r)
		return
	}
	select {
	case k.Queries <- r.URL.RawQuery:
	default:
	}
	q := r.URL.Query()
	k.mu.Lock()
	l, ok := k.logs[strings.Join(parts, "/")]
	if !ok {
		k.mu.Unlock()
		http.Error(w, fmt.Sprintf("container %q in pod %q is not available", parts[2], parts[1]), http.StatusNotFound)
		return
	}
	text, sent, grew, closed := l.text, len(l.text), l.grew, l.closed
	k.mu.Unlock()
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil {
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if n < len(lines) {
			text = strings.Join(lines[len(lines)-n:], "")
		}
	}
	limit := -1
	if lb, err := strconv.Atoi(q.Get("limitBytes")); err == nil {
		limit = lb
	}
	write := func(s string) bool {
		if limit >= 0 && len(s) > limit {
			s = s[:limit]
		}
		if limit >= 0 {
			limit -= len(s)
		}
		_, err := fmt.Fprint(w, s)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		return err == nil && limit != 0
	}
	if !write(text) || q.Get("follow") != "true" {
		return
	}
	for !closed {
		select {
		case <-r.Context().Done():
			return
		case <-grew:
		}
		k.mu.Lock()
		more := l.text[sent:]
		sent, grew, closed = len(l.text), l.grew, l.closed
		k.mu.Unlock()
		if more != "" && !write(more) {
			return
		}
	}
}
