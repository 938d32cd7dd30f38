package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"

	"github.com/taugrid/taugrid/controllers/admission"
	"github.com/taugrid/taugrid/controllers/forgestatus"
	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	repoctrl "github.com/taugrid/taugrid/controllers/repository"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/policy"
)

// runningManager is a controller-runtime manager with TauGrid's
// reconcilers, as cmd/tau-controller wires them, that a test can stop and
// start again to simulate a controller restart: nothing crosses from one
// instance to the next but what is in the API server and git.
type runningManager struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	// client is the manager's cached client, indexed as the controller's.
	client client.Client
	// nudger is the webhook path's nudger, on the manager's cached client.
	nudger *server.AnnotationNudger
	// clusters is the run reconciler's reader of worker clusters, if any.
	clusters clusters.Locator
}

func startManager(t testing.TB) *runningManager {
	t.Helper()
	return startManagerWith(t, nil)
}

// newSuiteManager is a manager on the suite's API server as
// cmd/tau-controller makes one (its client rate, cache and field indexes),
// with no reconciler yet, and the context that stops it.
func newSuiteManager(t testing.TB) (ctrl.Manager, context.Context, context.CancelFunc) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 100, 200 // as cmd/tau-controller's defaults
	if managerTransport != nil {
		cfg.WrapTransport = managerTransport
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  shared.CacheOptions(), // as cmd/tau-controller's: the suite reads what the controller's cache holds
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, ix := range shared.Indexes() {
		if err := mgr.GetFieldIndexer().IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			t.Fatal(err)
		}
	}
	return mgr, ctx, cancel
}

// startManagerWith starts a manager whose run reconciler adjust changes
// first (nil: none), as cmd/tau-controller's flags would.
func startManagerWith(t testing.TB, adjust func(ctrl.Manager, *controllers)) *runningManager {
	t.Helper()
	mgr, ctx, cancel := newSuiteManager(t)
	c, clk := mgr.GetClient(), clock.RealClock{}
	policies := &policy.PolicyStore{Client: c, Git: gitClient, Namespace: "default"}
	runs := &runctrl.RunReconciler{Client: c, APIReader: mgr.GetAPIReader(), Scheme: scheme, Files: &policy.GitFiles{Client: c, Git: gitClient},
		Policies: policies, Clock: clk, Recorder: events.NewFakeRecorder(1000), DetailInterval: runctrl.DefaultDetailInterval, Indexed: true,
		HoldersKept: runctrl.DefaultHoldersKept}
	adjusted := &controllers{run: runs}
	if adjust != nil {
		adjust(mgr, adjusted)
	}
	recorder := func(name string) events.EventRecorder {
		if adjusted.realEvents {
			return mgr.GetEventRecorder(name)
		}
		return events.NewFakeRecorder(1000)
	}
	steps := []interface{ SetupWithManager(ctrl.Manager) error }{
		&platformctrl.PlatformReconciler{Client: c, Git: gitClient, Policies: policies, Clock: clk, Recorder: recorder("tau-platform"),
			AdmissionCheck: adjusted.admission},
		&repoctrl.RepositoryReconciler{Client: c, Git: gitClient, Policies: policies, Clock: clk, Recorder: recorder("tau-repository")},
		runs,
		&forgestatus.ForgeReconciler{Client: c, APIReader: mgr.GetAPIReader(), Clock: clk, Recorder: recorder("tau-forge"), Posters: adjusted.posters},
	}
	if adjusted.admission {
		// As cmd/tau-controller: the platform puts the check on its
		// ClusterQueues, the admission controller decides it.
		steps = append(steps, &admission.Check{Client: c, APIReader: mgr.GetAPIReader(), Clock: clk}, &admission.Activator{Client: c, Clock: clk})
		if adjusted.run.Clusters != nil {
			// As cmd/tau-controller with MultiKueue: the workers'
			// queues carry the check, decided from here.
			steps = append(steps, &admission.Workers{Manager: c, APIReader: mgr.GetAPIReader(), Namespace: controlplane.KueueNamespace, Scheme: scheme, Clock: clk})
		}
	}
	if adjusted.sealer != nil {
		// As cmd/tau-controller: the run reconciler marks ended attempts,
		// the evidence controller seals them.
		steps = append(steps, adjusted.sealer)
	}
	for _, r := range steps {
		if err := r.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	m := &runningManager{cancel: cancel, client: c, nudger: &server.AnnotationNudger{Client: c, Clock: clk}, clusters: runs.Clusters}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("manager cache did not sync")
	}
	return m
}

// controllers are the reconcilers of a test manager that its adjust
// func may change before they start.
type controllers struct {
	run *runctrl.RunReconciler
	// admission puts TauGrid's admission check on the platform's
	// ClusterQueues and runs the controller that decides it.
	admission bool
	// sealer seals the evidence of the attempts the run reconciler ends;
	// nil runs none.
	sealer *sealing.EvidenceRecorder
	// realEvents gives the platform, repository and forge reconcilers
	// the manager's event recorders, which post Events, as
	// cmd/tau-controller's do (the run reconciler's and the sealer's are
	// adjust's to set).
	realEvents bool
	// posters are the forge reconciler's; nil: its own, which do not pace
	// the forge.
	posters *forge.Posters
}

// stop stops the manager and waits until it has.
func (m *runningManager) stop() {
	m.cancel()
	m.done.Wait()
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitForSaying(t, timeout, what, cond, nil)
}

// waitForSaying is waitFor whose timeout also says what seen, if not nil,
// last saw: why the wait did not end.
func waitForSaying(t testing.TB, timeout time.Duration, what string, cond func() bool, seen func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if seen != nil {
				t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, seen())
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kueueView is what the API server and Kueue hold for namespace ns's
// workloads, for a test that waited on Kueue in vain: its Jobs, its
// Workloads with their conditions, its Events, and the last lines of
// Kueue's log that name it (the control plane's logs go with the package).
func kueueView(ns string) string {
	ctx := context.Background()
	var b strings.Builder
	var jobs batchv1.JobList
	if err := k8s.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		fmt.Fprintf(&b, "\n  jobs: %v", err)
	}
	for _, j := range jobs.Items {
		fmt.Fprintf(&b, "\n  job %s uid %s suspend %v labels %v", j.Name, j.UID, ptr.Deref(j.Spec.Suspend, false), j.Labels)
	}
	var wls kueue.WorkloadList
	if err := k8s.List(ctx, &wls, client.InNamespace(ns)); err != nil {
		fmt.Fprintf(&b, "\n  workloads: %v", err)
	}
	for _, w := range wls.Items {
		fmt.Fprintf(&b, "\n  workload %s owner %v queue %s", w.Name, metav1.GetControllerOf(&w), w.Spec.QueueName)
		for _, c := range w.Status.Conditions {
			fmt.Fprintf(&b, "; %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	var evs corev1.EventList
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		fmt.Fprintf(&b, "\n  events: %v", err)
	}
	for _, e := range evs.Items[max(0, len(evs.Items)-15):] {
		fmt.Fprintf(&b, "\n  event %s %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
	for _, l := range logLines("kueue", 15, func(l string) bool { return strings.Contains(l, ns) }) {
		fmt.Fprintf(&b, "\n  kueue: %s", l)
	}
	return b.String()
}

// logLines is the last n lines of a control-plane component's log that
// match, each cut to 400 bytes, or why the log could not be read.
func logLines(component string, n int, match func(string) bool) []string {
	data, err := os.ReadFile(filepath.Join(env.LogDir, component+".log"))
	if err != nil {
		return []string{fmt.Sprintf("(%v)", err)}
	}
	var mine []string
	for _, l := range strings.Split(string(data), "\n") {
		if match(l) {
			mine = append(mine, l[:min(len(l), 400)])
		}
	}
	return mine[max(0, len(mine)-n):]
}
