package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/chart"

	"github.com/taugrid/taugrid/controllers/admission"
	"github.com/taugrid/taugrid/controllers/forgestatus"
	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	repoctrl "github.com/taugrid/taugrid/controllers/repository"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// forbiddenLog collects every log line of the manager (reconciler errors
// among them) that reports a request the API server refused for want of
// permission. client-go's informers and event broadcaster log through klog,
// a global the test leaves alone: a refused watch shows as a manager that
// never syncs, and refused events as events that never appear.
type forbiddenLog struct {
	mu    sync.Mutex
	lines []string
}

func (f *forbiddenLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		if strings.Contains(args, "forbidden") {
			f.mu.Lock()
			f.lines = append(f.lines, prefix+" "+args)
			f.mu.Unlock()
		}
	}, funcr.Options{})
}

func (f *forbiddenLog) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lines...)
}

// tenantSecretsRole is the chart's ClusterRole that the platform binds in
// each tenant namespace (--tenant-secrets-role).
const tenantSecretsRole = "tau-controller-tenant-secrets"

// installChartRBAC creates the controller's ServiceAccount, roles and
// bindings exactly as the chart renders them, and returns a config that
// acts as that ServiceAccount.
func installChartRBAC(t *testing.T) *rest.Config {
	t.Helper()
	ctx := context.Background()
	r, err := chart.Render(chart.Namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chart.Namespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	n := 0
	for _, u := range r.Kinds("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding") {
		if u.GetName() != "tau-controller" && u.GetName() != tenantSecretsRole {
			continue
		}
		if err := k8s.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		n++
	}
	if n != 6 {
		t.Fatalf("the chart renders %d of the controller's 6 RBAC objects", n)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + chart.Namespace + ":tau-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + chart.Namespace, "system:authenticated"},
	}
	return cfg
}

// startChartManager starts the manager as cmd/tau-controller does (leader
// election, the pod cache filter, real event recorders, the four
// reconcilers, the admission check) on cfg, and waits until it leads.
func startChartManager(t *testing.T, cfg *rest.Config, log logr.Logger) (*server.AnnotationNudger, func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Logger:                  log,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "tau-controller.taugrid.dev",
		LeaderElectionNamespace: chart.Namespace,
		Controller:              config.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: 30 * time.Second},
		Client:                  shared.ClientOptions(), // as cmd/tau-controller
		Cache:                   shared.CacheOptions(),
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
	c, clk := mgr.GetClient(), clock.RealClock{}
	policies := &policy.PolicyStore{Client: c, Git: gitClient, Namespace: chart.Namespace}
	for _, r := range []interface{ SetupWithManager(ctrl.Manager) error }{
		&platformctrl.PlatformReconciler{Client: c, Git: gitClient, Policies: policies, Clock: clk, Recorder: mgr.GetEventRecorder("tau-platform"),
			Secrets:        &platformctrl.SecretsGrant{ClusterRole: tenantSecretsRole, ServiceAccount: "tau-controller", Namespace: chart.Namespace},
			AdmissionCheck: true},
		&admission.Check{Client: c, APIReader: mgr.GetAPIReader(), Clock: clk},
		&admission.Activator{Client: c, Clock: clk},
		&repoctrl.RepositoryReconciler{Client: c, Git: gitClient, Policies: policies, Clock: clk, Recorder: mgr.GetEventRecorder("tau-repository")},
		&runctrl.RunReconciler{Client: c, APIReader: mgr.GetAPIReader(), Scheme: scheme, Files: &policy.GitFiles{Client: c, Git: gitClient},
			Policies: policies, Clock: clk, Recorder: mgr.GetEventRecorder("tau-run")},
		&forgestatus.ForgeReconciler{Client: c, APIReader: mgr.GetAPIReader(), Clock: clk, Recorder: mgr.GetEventRecorder("tau-forge")},
	} {
		if err := r.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	var done sync.WaitGroup
	done.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("the manager was not elected leader in 30s")
	}
	return &server.AnnotationNudger{Client: c, Clock: clk}, func() { cancel(); done.Wait() }
}

// TestTheChartsRBACRunsAPlatformARepositoryAndARun starts the controller
// under the chart's ServiceAccount, with only the chart's ClusterRole and
// Role bound, and takes a platform, a research repository and a run
// through to Succeeded: leader election, every watch, the platform's
// namespaces and Kueue objects (server-side apply, dry run, prune), the
// run's Job, status patches, events and the webhook path's nudge. Nothing
// may be refused.
func TestTheChartsRBACRunsAPlatformARepositoryAndARun(t *testing.T) {
	integration(t)
	ctx := context.Background()
	cfg := installChartRBAC(t)
	forbidden := &forbiddenLog{}
	nudger, stop := startChartManager(t, cfg, forbidden.logger())
	defer stop()

	platformDir := examplePlatformCopy(t, "rb")
	platformRepo := newGitRepo(t, "platform", platformDir)
	plat := &taugridv1.TauPlatform{ObjectMeta: metav1.ObjectMeta{Name: "rbac"},
		Spec: taugridv1.TauPlatformSpec{GitSource: taugridv1.GitSource{URL: platformRepo.URL}, Ref: "main", Path: "."}}
	if err := k8s.Create(ctx, plat); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the platform Ready", func() bool {
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(plat), plat)
		return apimeta.IsStatusConditionTrue(plat.Status.Conditions, taugridv1.ConditionReady)
	})

	research := newGitRepo(t, "rb-a/research", "../../examples/research")
	hook := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "rb-a"}, Data: map[string][]byte{"token": []byte("s3cret")}}
	if err := k8s.Create(ctx, hook); err != nil {
		t.Fatal(err)
	}
	repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: "research", Namespace: "rb-a"},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: research.URL}, Platform: plat.Name,
			Interval: metav1.Duration{Duration: time.Minute},
			Webhook:  &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: hook.Name}}}}
	if err := k8s.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the repository's first poll, its webhook Secret read", func() bool {
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(repo), repo)
		return repo.Status.LastPollTime != nil && repo.Status.WebhookPath != ""
	})
	research.tag("run/rbac")
	if err := nudger.NudgeRepository(ctx, repo.Namespace, repo.Name, 0); err != nil {
		t.Fatalf("nudging as the controller: %v", err)
	}
	run := waitRunPhase(t, "rb-a", taugridv1.PhaseAdmitted, taugridv1.PhaseRunning)
	completeJob(t, "rb-a", render.WorkloadName(run.Name, 1))
	waitRunPhase(t, "rb-a", taugridv1.PhaseSucceeded)
	waitEvent(t, chart.Namespace, "tau-controller.taugrid.dev", "LeaderElection")
	waitEvent(t, "rb-a", run.Name, "")

	if lines := forbidden.get(); len(lines) > 0 {
		t.Errorf("the chart's RBAC refused %d requests:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	controllerMayNotReachBeyondTheTenants(t, cfg)
}

// controllerMayNotReachBeyondTheTenants acts as the controller (cfg) the
// way a confused or taken-over one would: a Secret in a namespace no
// tenant names is refused, and so is binding itself any other role.
func controllerMayNotReachBeyondTheTenants(t *testing.T, cfg *rest.Config) {
	t.Helper()
	ctx := context.Background()
	as, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"rb-stranger", "kube-system"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "crown-jewels", Namespace: ns}, Data: map[string][]byte{"k": []byte("v")}}
		if err := k8s.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := as.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}); !apierrors.IsForbidden(err) {
			t.Errorf("the controller read Secret %s/%s: %v, want forbidden", ns, s.Name, err)
		}
	}
	if err := as.Get(ctx, client.ObjectKey{Namespace: "rb-a", Name: "hook"}, &corev1.Secret{}); err != nil {
		t.Errorf("the controller cannot read its tenant's Secret: %v", err)
	}
	escalate := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate", Namespace: "rb-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tau-controller", Namespace: chart.Namespace}}}
	if err := as.Create(ctx, escalate); !apierrors.IsForbidden(err) {
		t.Errorf("the controller bound itself ClusterRole cluster-admin in a tenant namespace: %v, want forbidden", err)
	}
}

// waitRunPhase waits until the namespace's one TauRun is in one of phases.
func waitRunPhase(t *testing.T, ns string, phases ...taugridv1.RunPhase) *taugridv1.TauRun {
	t.Helper()
	var found *taugridv1.TauRun
	waitFor(t, 60*time.Second, "the run in "+ns+" to reach "+string(phases[0]), func() bool {
		var list taugridv1.TauRunList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
			return false
		}
		for _, p := range phases {
			if list.Items[0].Status.Phase == p {
				found = &list.Items[0]
				return true
			}
		}
		return false
	})
	return found
}

// waitEvent waits for an event about the named object, with the reason if
// one is given, through either events API: the recorders could write it.
func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	waitFor(t, 30*time.Second, "an event about "+ns+"/"+name, func() bool {
		var core corev1.EventList
		var ev eventsv1.EventList
		if k8s.List(context.Background(), &core, client.InNamespace(ns)) != nil ||
			k8s.List(context.Background(), &ev, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range core.Items {
			if e.InvolvedObject.Name == name && (reason == "" || e.Reason == reason) {
				return true
			}
		}
		for _, e := range ev.Items {
			if e.Regarding.Name == name && (reason == "" || e.Reason == reason) {
				return true
			}
		}
		return false
	})
}
