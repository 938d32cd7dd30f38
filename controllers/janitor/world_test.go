package janitor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// The table tests of the janitor: Sweep on the fake client (sharedtest),
// once in each mode, in milliseconds. What the API server and Kueue do
// with what it deletes (the garbage collector, a pod's grace) is in
// controllers/integration/janitor_test.go.

const ns = "team-a"

// idleAfter is the janitor's IdleAfter in these tests.
const idleAfter = 10 * time.Minute

// ago is the instant d before sharedtest.Now.
func ago(d time.Duration) time.Time { return sharedtest.Now.Add(-d) }

// janitorWorld is a janitor on the fake client; it records every delete
// sent, with the grace period asked for, if any.
type janitorWorld struct {
	j       *Janitor
	c       client.Client
	events  *events.FakeRecorder
	deleted []string
}

// newJanitor is a janitor in mode over a cluster holding objs, with
// workers as its MultiKueue workers (nil: one cluster).
func newJanitor(t testing.TB, mode JanitorMode, workers clusters.Locator, objs ...client.Object) *janitorWorld {
	t.Helper()
	w := &janitorWorld{events: events.NewFakeRecorder(100)}
	w.c = sharedtest.Builder(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.deleted = append(w.deleted, describeDelete(c, obj, opts))
			return c.Delete(ctx, obj, opts...)
		}}).Build()
	metrics, err := NewJanitorMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w.j = &Janitor{Client: w.c, Clock: sharedtest.Clock(), Recorder: w.events, Log: logr.Discard(), Mode: mode,
		IdleAfter: idleAfter, Metrics: metrics, Clusters: workers}
	return w
}

// describeDelete is "Kind namespace/name", and " grace=N" when the delete
// asks for a grace period.
func describeDelete(c client.Client, obj client.Object, opts []client.DeleteOption) string {
	kind := "?"
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
		kind = gvk.Kind
	}
	s := kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	o := &client.DeleteOptions{}
	o.ApplyOptions(opts)
	if o.GracePeriodSeconds != nil {
		s += fmt.Sprintf(" grace=%d", *o.GracePeriodSeconds)
	}
	return s
}

// drain is the events recorded since the last drain.
func (w *janitorWorld) drain() []string {
	return sharedtest.Drain(w.events)
}

// action is what a mode says it did with a finding.
// checkSweep sweeps and checks what was found, what was deleted (only in
// release mode), the events and the metric.
func (w *janitorWorld) checkSweep(t *testing.T, mode JanitorMode, want []Finding, released []string) {
	t.Helper()
	found, err := w.j.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, found); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	var wantDeleted []string
	if mode == JanitorRelease {
		wantDeleted = released
	}
	if diff := cmp.Diff(wantDeleted, w.deleted); diff != "" {
		t.Errorf("deletes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantEvents(want, mode), w.drain()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkMetrics(t, w.j.Metrics, want, action(mode))
}

func action(mode JanitorMode) string {
	if mode == JanitorRelease {
		return "released"
	}
	return "reported"
}

// wantEvents is the Warning event each finding gets in mode, on the object
// the janitor acts on.
func wantEvents(found []Finding, mode JanitorMode) []string {
	var out []string
	for _, f := range found {
		out = append(out, "Warning "+f.Reason+" "+action(mode)+": "+f.Message)
	}
	return out
}

// checkMetrics checks that the findings metric counts found, by reason,
// under action.
func checkMetrics(t *testing.T, m *prometheus.CounterVec, found []Finding, action string) {
	t.Helper()
	want := map[string]float64{}
	for _, f := range found {
		want[f.Reason]++
	}
	got := map[string]float64{}
	for reason := range want {
		got[reason] = testutil.ToFloat64(m.WithLabelValues(reason, action))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("taugrid_janitor_findings_total{action=%q} (-want +got):\n%s", action, diff)
	}
	if n := testutil.CollectAndCount(m); n != len(want) {
		t.Errorf("%d series of findings, want %d", n, len(want))
	}
}

// workers is a clusters.Locator of MultiKueue workers: each a fake client,
// or an error for one that cannot be reached.
type workers map[string]any

func (w workers) PodsOf(_ context.Context, cluster string) (*clusters.Pods, error) {
	switch c := w[cluster].(type) {
	case client.Client:
		return &clusters.Pods{Cluster: cluster, Reader: c, Client: c}, nil
	case error:
		return nil, c
	}
	return nil, errors.New("no worker cluster " + cluster)
}
