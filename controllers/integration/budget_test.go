package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// managerTransport, when set, wraps the transport of the next test
// manager's API client (newSuiteManager): a test counts what TauGrid
// sends.
var managerTransport func(http.RoundTripper) http.RoundTripper

// apiRequests counts a client's API requests by verb and resource
// ("create jobs.batch", "patch tauruns.taugrid.dev/status", "watch pods"),
// and the writes the API server refused for a stale copy (409), with what
// cmd/tau-controller counts them by: its taugrid_api_requests_total.
type apiRequests struct {
	reg  *prometheus.Registry
	m    *clusters.APIRequests
	from map[[3]string]float64
}

func newAPIRequests(t *testing.T) *apiRequests {
	t.Helper()
	a := &apiRequests{reg: prometheus.NewRegistry()}
	var err error
	if a.m, err = clusters.NewAPIRequests(a.reg); err != nil {
		t.Fatal(err)
	}
	return a
}

// read is the metric now, by verb, resource and code.
func (a *apiRequests) read(t *testing.T) map[[3]string]float64 {
	t.Helper()
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[3]string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var k [3]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "verb":
					k[0] = l.GetValue()
				case "resource":
					k[1] = l.GetValue()
				case "code":
					k[2] = l.GetValue()
				}
			}
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}

// start counts from now on.
func (a *apiRequests) start(t *testing.T) { a.from = a.read(t) }

// counts is what was counted since start, by "verb resource": all of it,
// and what was refused with 409.
func (a *apiRequests) counts(t *testing.T) (n, conflict map[string]int) {
	n, conflict = map[string]int{}, map[string]int{}
	for k, v := range a.read(t) {
		d := int(v - a.from[k])
		if d == 0 {
			continue
		}
		n[k[0]+" "+k[1]] += d
		if k[2] == "409" {
			conflict[k[0]+" "+k[1]] += d
		}
	}
	return n, conflict
}

// The budget of one short run's whole life (pushed, queued, admitted,
// its pod Pending, then Running, then exited 0, Succeeded): what TauGrid
// sends the API server for it, by what it is. A change that sends more
// fails here, as an allocation budget fails a benchmark; a change that
// sends less lowers the budget.
//
// The manager runs as cmd/tau-controller's does, its running attempts' GPUs
// read from the node agents, each found in the controller's cache of the
// agents' pods (run.AgentPods): no request a reading.
//
// What one run's life sends today (2026-12-07): 12 for the run itself,
// the TauRun created and its status written 5 times (Queued, Admitted,
// Running, Succeeded, sealed), its Job and NetworkPolicy created, 2
// Events (the submission, the end), the admission check's patch of the
// Workload's status, and the pod's log; and 3 for the poll that found it,
// not per run: the repository's nudge and status, the poll's one
// RunRequested Event. What the manager writes once at its start (the AdmissionCheck's
// and the platform's status) is not counted. 26 before Admitted, Running
// and Sealed stopped being Events and the sealer read the Job from the
// cache; 22 (start-up writes counted, by a race) before the sealer read
// the events in one list, not one per object; 18 before it read them
// from its book of the cluster's events (sealing.EventBook), not a list;
// 17 before the agents' pods were cached (a pod list a GPU reading, sent
// only once the controller's token for the agents was one the API server
// takes from no one: gpus.Audience). The seal also read the attestation
// key's Secret, with a client this count did not see (17 then): the key is
// now read from a watch of it alone (sealing.KeySecretCache), and counted.
// 16 before the admission check judged the Job from the cache, reading it
// whole only when its generation or labels are not as the run recorded.
// The run's pod fetches its source, as cmd/tau-controller's pods do: the
// init container's log is read from its termination message, which tau
// fetch-source writes with all it printed, so the one log read is the
// training container's (2 before, and at scale, hack/scale: 1.92-2.00).
const (
	runRequestBudget = 15
	runWriteBudget   = 6 // the TauRun's creation and its status writes
)

// awaitStartupWrites backdates the platform's and the repository's last
// poll, and waits until the manager's first polls have written them again
// and its activator has marked the admission check Active: what a manager
// writes once at its start, counted or not by a race, is then behind the
// count, and the run's own poll (its nudge) is in it.
func awaitStartupWrites(t *testing.T, f *runFixture, plat *platformFixture) {
	t.Helper()
	ctx := context.Background()
	since := time.Now().Add(-30 * time.Minute) // backdatePolls' hour ago is before it
	waitFor(t, 60*time.Second, "the manager's first polls and the admission check's activation", func() bool {
		p, r, ac := &taugridv1.TauPlatform{}, &taugridv1.TauRepository{}, &kueue.AdmissionCheck{}
		if k8s.Get(ctx, client.ObjectKey{Name: plat.name}, p) != nil || k8s.Get(ctx, client.ObjectKeyFromObject(f.repo), r) != nil ||
			k8s.Get(ctx, client.ObjectKey{Name: platformctrl.PolicyCheckName(plat.name)}, ac) != nil {
			return false
		}
		polled := func(at *metav1.Time) bool { return at != nil && at.After(since) }
		return polled(p.Status.LastPollTime) && polled(r.Status.LastPollTime) &&
			apimeta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive)
	})
}

// backdatePolls sets the platform's and the repository's last poll an hour
// back, so that the manager's first polls must write them.
func backdatePolls(t *testing.T, f *runFixture, plat *platformFixture) {
	t.Helper()
	ago := metav1.NewTime(time.Now().Add(-time.Hour))
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"status":{"lastPollTime":%q}}`, ago.UTC().Format(time.RFC3339))))
	for _, o := range []client.Object{&taugridv1.TauPlatform{ObjectMeta: metav1.ObjectMeta{Name: plat.name}}, &taugridv1.TauRepository{ObjectMeta: f.repo.ObjectMeta}} {
		if err := k8s.Status().Patch(context.Background(), o, patch); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOneRunsWholeLifeStaysWithinItsAPIRequestBudget runs one run through
// its life on the control plane with nodes, the manager's requests counted
// from the end of its start-up writes (awaitStartupWrites) to the run's
// end, and fails when they exceed the budget, or when any write is refused
// for a stale copy.
func TestOneRunsWholeLifeStaysWithinItsAPIRequestBudget(t *testing.T) {
	onCluster(t)
	// The tenant's pods run as a ServiceAccount of their own, as a
	// platform's do: the source init container's token is that account's
	// (no admission plugin here names the namespace's default one).
	dir := examplePlatformCopy(t, "bud")
	tenants := filepath.Join(dir, "tenants.yaml")
	data, err := os.ReadFile(tenants)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tenants, bytes.Replace(data, []byte("  namespace: bud-a\n"), []byte("  namespace: bud-a\n  service_account: tau-runner\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	plat := newPlatformFrom(t, dir)
	plat.r.AdmissionCheck = true
	f := newRunFixtureWith(t, "bud", plat)
	if err := k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tau-runner", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	addNode(t, controlplane.GPUNode("bud-gpu"))
	backdatePolls(t, f, plat)
	counted := newAPIRequests(t)
	managerTransport = counted.m.Wrap
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// As cmd/tau-controller: Events posted, the admission check decided,
	// evidence sealed, signed with the key read from its watch.
	var keys *sealing.AttestationKeys
	m := startManagerWith(t, func(mgr ctrl.Manager, c *controllers) {
		c.admission, c.realEvents = true, true
		c.run.Recorder = mgr.GetEventRecorder("tau-run")
		// A change that only adds detail (a message, the nodes) is written
		// --status-detail-interval after the last write: how many such
		// writes a run sends depends on how long each phase lasts, which
		// on a loaded machine is longer (make test once counted 7 status
		// patches, not 5). Here detail waits for the next phase's write, so
		// the count is the writes a run's life must send; the pacing
		// itself is controllers/run's detail tests'.
		c.run.DetailInterval = time.Hour
		// Its pods fetch the run's source, as cmd/tau-controller's do:
		// the init container's log is its termination message.
		c.run.Sources = &server.Sources{Client: mgr.GetClient(), Git: gitClient, BaseURL: "http://tau-controller:9090", FetchImage: "ghcr.io/taugrid/tau:v0.1.0"}
		c.sealer = newSealer(t, mgr, c.run, st, mgr.GetEventRecorder("tau-evidence"))
		keys = c.sealer.Attestations.(*sealing.AttestationKeys)
		// The running attempt's GPUs read, its node's agent looked for in
		// the agents' cache (there is none here: the reading says so).
		agents, err := runctrl.AgentPods(mgr.GetConfig(), mgr.GetScheme(), "bud-agents")
		if err != nil {
			t.Fatal(err)
		}
		if err := mgr.Add(agents); err != nil {
			t.Fatal(err)
		}
		c.run.GPUUsage = &runctrl.NodeAgents{Reader: agents, Namespace: "bud-agents"}
	})
	managerTransport = nil
	defer m.stop()
	awaitStartupWrites(t, f, plat)
	awaitAttestationKey(t, keys) // as cmd/tau-controller, at its start
	counted.start(t)

	f.research.runRef("one", "target: default\n")
	// As a forge's webhook: the manager's repository reconciler makes the run.
	if err := m.nudger.NudgeRepository(context.Background(), f.repo.Namespace, f.repo.Name, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the run to be made", func() bool { return len(f.listRuns(t)) == 1 })
	run := f.runOf(t, "refs/tau/runs/one")
	run = awaitPhase(t, run, taugridv1.PhaseRunning, 60*time.Second, "the run to run")
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(f.ns), client.MatchingLabels{render.LabelRun: run.Name}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("%d pods of the run (%v), want 1", len(pods.Items), err)
	}
	exitPodOn(t, k8s, &pods.Items[0], 0)
	awaitPhase(t, run, taugridv1.PhaseSucceeded, 60*time.Second, "the run to succeed")
	waitFor(t, 30*time.Second, "the run's evidence to be sealed", func() bool {
		has, _ := evidence.Has(context.Background(), st, evidence.Key{Namespace: f.ns, Run: run.Name, Attempt: 1})
		return has && !shared.Sealing(getRun(t, run.Namespace, run.Name))
	})
	time.Sleep(2 * time.Second) // what the end still sends
	if a := getRun(t, run.Namespace, run.Name).Status.Attempts; len(a) != 1 || a[0].GPUUsage == nil {
		t.Errorf("the running attempt's GPUs were not read: %+v", a)
	}
	// The source fetch's log is in the bundle, from its termination
	// message; only the training container's was read from the kubelet.
	var from []string
	for _, l := range sealedRecord(t, st, evidence.Key{Namespace: f.ns, Run: run.Name, Attempt: 1}).Logs {
		from = append(from, fmt.Sprintf("%s from %q (%d bytes)", l.Container, l.From, l.Bytes))
	}
	if want := []string{`tau-source from "terminationMessage" (57 bytes)`, `main from "" (129 bytes)`}; !slices.Equal(from, want) {
		t.Errorf("the bundle's logs: %q, want %q", from, want)
	}

	n, conflicts := counted.counts(t)
	var evs eventsv1.EventList
	if err := k8s.List(context.Background(), &evs, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		t.Logf("event %s %s/%s %s: %s", e.ReportingController, e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
	}
	total, runWrites := 0, 0
	var lines []string
	for _, what := range slices.Sorted(maps.Keys(n)) {
		if strings.HasPrefix(what, "watch ") {
			continue // an informer's, once per process, not per run
		}
		total += n[what]
		if strings.Contains(what, "tauruns.") && !strings.HasPrefix(what, "get ") && !strings.HasPrefix(what, "list ") && !strings.HasPrefix(what, "watch ") {
			runWrites += n[what]
		}
		lines = append(lines, fmt.Sprintf("%4d %s", n[what], what))
	}
	t.Logf("one run's life: %d API requests, %d writes of the TauRun:\n%s", total, runWrites, strings.Join(lines, "\n"))
	if total > runRequestBudget {
		t.Errorf("one run's life sent %d API requests; the budget is %d", total, runRequestBudget)
	}
	if runWrites > runWriteBudget {
		t.Errorf("one run's life wrote its TauRun %d times; the budget is %d", runWrites, runWriteBudget)
	}
	if len(conflicts) > 0 {
		t.Errorf("writes refused for a stale copy (409): %v; want none", conflicts)
	}
}
