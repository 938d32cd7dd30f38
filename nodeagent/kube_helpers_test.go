package nodeagent

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taugrid/taugrid/test/controlplane"
)

var (
	envOnce sync.Once
	env     *controlplane.Env
	envErr  error
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	os.Exit(code)
}

// apiServer is one real API server (etcd and kube-apiserver) for the package,
// started on first use. Each test makes its own Nodes.
func apiServer(t testing.TB) kubernetes.Interface {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs the real API server")
	}
	envOnce.Do(func() { env, envErr = controlplane.Start(context.Background(), controlplane.Options{}) })
	if envErr != nil {
		t.Fatalf("starting the control plane: %v", envErr)
	}
	c, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nodeOpt changes a Node before it is created.
type nodeOpt func(*corev1.Node)

func withLabel(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

// withOurTaint: the node already carries the agent's taint, set at taintedAt.
func withOurTaint(taintedAt time.Time) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintKey, Effect: TaintEffect})
		t := taintedAt.UTC().Truncate(time.Second)
		n.Annotations[AnnotationState] = persisted{TaintedAt: &t}.encode()
	}
}

// gpuNode creates an 8-GPU Node named name (labelled as its own breaker group
// unless opts say otherwise) and deletes it when the test ends.
func gpuNode(t testing.TB, c kubernetes.Interface, name string, opts ...nodeOpt) *corev1.Node {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.present": "true",
			"test.taugrid.dev/node": name}, Annotations: map[string]string{}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	created, err := c.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return created
}

// kubeConfig points an agent at node, counting only that node for the breaker
// unless the test says otherwise.
func kubeConfig(node string) func(*Config) {
	return func(c *Config) {
		c.NodeName = node
		c.GPUNodeSelector = "test.taugrid.dev/node=" + node
	}
}

// bootIDs is a boot ID a test can change, as a reboot would.
type bootIDs struct{ v atomic.Value }

func newBootIDs(id string) *bootIDs {
	b := &bootIDs{}
	b.v.Store(id)
	return b
}

func (b *bootIDs) get() (string, error) { return b.v.Load().(string), nil }
func (b *bootIDs) set(id string)        { b.v.Store(id) }

// run starts the agent's loop; it stops when the test ends.
func run(t testing.TB, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// nodeView is what tests read back from a Node.
type nodeView struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
	Tainted bool
}

func viewNode(t testing.TB, c kubernetes.Interface, name string) (nodeView, *corev1.Node) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := nodeView{Tainted: hasTaint(n)}
	if cond := findCondition(n); cond != nil {
		v.Status, v.Reason, v.Message = cond.Status, cond.Reason, cond.Message
	}
	return v, n
}

// waitNode polls the node until ok says so, failing after timeout; it returns
// how long it took.
func waitNode(t testing.TB, c kubernetes.Interface, name string, timeout time.Duration, what string, ok func(nodeView) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		v, _ := viewNode(t, c, name)
		if ok(v) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("node %s: not %s within %s; last seen %+v", name, what, timeout, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func isHealthy(v nodeView) bool   { return v.Status == corev1.ConditionTrue && !v.Tainted }
func isUnhealthy(v nodeView) bool { return v.Status == corev1.ConditionFalse && v.Tainted }

// events lists the Events recorded on the node (this one, by UID: Events
// outlive Nodes of the same name from earlier runs), by reason.
func events(t testing.TB, c kubernetes.Interface, node string) map[string][]string {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.CoreV1().Events(eventNamespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(n.UID)).String()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range list.Items {
		out[e.Reason] = append(out[e.Reason], e.Type)
	}
	return out
}

var (
	metaGet    = metav1.GetOptions{}
	metaUpdate = metav1.UpdateOptions{}
)

// runStoppable starts the agent's loop and returns a function that stops it.
func runStoppable(t testing.TB, a *Agent) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitEvents waits (Events are recorded after the node is written) until the
// node's Events are want, by reason and type.
func waitEvents(t testing.TB, c kubernetes.Interface, node string, want map[string][]string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := events(t, c, node)
		diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b }))
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Events on %s (-want +got):\n%s", node, diff)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
