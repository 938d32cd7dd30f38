package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// MultiKueueSettings are the MultiKueue parts of a manager's Kueue
// Configuration that tests shorten.
type MultiKueueSettings struct {
	// WorkerLostTimeout is how long a workload stays admitted on a worker
	// the manager has lost contact with (Kueue's default: 15 minutes).
	WorkerLostTimeout time.Duration
	// GCInterval is how often remote objects without a local one are
	// collected (Kueue's default: a minute).
	GCInterval time.Duration
}

// configuration is the multiKueue section of Kueue's Configuration; none
// for a nil s.
func (s *MultiKueueSettings) configuration() string {
	if s == nil {
		return ""
	}
	out := "multiKueue:\n"
	if s.GCInterval > 0 {
		out += fmt.Sprintf("  gcInterval: %s\n", s.GCInterval)
	}
	if s.WorkerLostTimeout > 0 {
		out += fmt.Sprintf("  workerLostTimeout: %s\n", s.WorkerLostTimeout)
	}
	return out
}

// KueueNamespace is where Kueue runs, and where a MultiKueue manager reads
// its workers' kubeconfig Secrets.
const KueueNamespace = kueueNamespace

// Fleet is a MultiKueue manager and its workers, each a control plane of
// its own (API server, etcd, Kueue), as Kueue's own integration tests run
// them. The workers run pods (kube-scheduler, the Job controller, kwok);
// the manager runs none: its Kueue gives Jobs spec.managedBy
// kueue.x-k8s.io/multikueue, as its admission webhook does in a cluster,
// and no Job controller runs there.
type Fleet struct {
	Manager *Env
	// Workers by name, each reachable from the manager's Kueue through the
	// kubeconfig in the Secret KubeconfigSecret(name) of KueueNamespace.
	Workers map[string]*Env
}

// FleetOptions says how to start a fleet.
type FleetOptions struct {
	Workers           []string // the workers' names
	KubeRay           bool     // a KubeRay operator in every worker
	CRDDirectoryPaths []string // further CRDs, installed everywhere
	MultiKueue        MultiKueueSettings
}

// KubeconfigSecret is the name of the Secret in the manager's
// KueueNamespace holding worker's kubeconfig, under the key "kubeconfig".
func KubeconfigSecret(worker string) string { return worker + "-kubeconfig" }

// FleetForTest starts a fleet for t and stops it when t ends.
func FleetForTest(t interface {
	Helper()
	Fatalf(string, ...any)
	Cleanup(func())
	Failed() bool
	Logf(string, ...any)
}, opts FleetOptions) *Fleet {
	t.Helper()
	f, err := StartFleet(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the fleet: %v", err)
	}
	t.Cleanup(func() {
		for name, e := range f.all() {
			if t.Failed() {
				t.Logf("%s: control-plane logs kept in %s", name, e.LogDir)
			}
			_ = e.stop(t.Failed())
		}
	})
	return f
}

// StartFleet starts the manager and the workers side by side, registers
// Kueue's Job and RayJob defaulting webhooks in the manager, and stores
// each worker's kubeconfig in the manager. On failure nothing is left
// running.
func StartFleet(ctx context.Context, opts FleetOptions) (_ *Fleet, err error) {
	f := &Fleet{Workers: map[string]*Env{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(opts.Workers)+1)
	settings := opts.MultiKueue
	wg.Go(func() {
		m, err := Start(ctx, Options{Kueue: true, CRDDirectoryPaths: opts.CRDDirectoryPaths, MultiKueue: &settings})
		mu.Lock()
		f.Manager, errs[0] = m, err
		mu.Unlock()
	})
	for i, name := range opts.Workers {
		wg.Go(func() {
			w, err := Start(ctx, Options{Kueue: true, KubeRay: opts.KubeRay, Nodes: true, CRDDirectoryPaths: opts.CRDDirectoryPaths})
			mu.Lock()
			if w != nil {
				f.Workers[name] = w
			}
			errs[i+1] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	defer func() {
		if err != nil {
			for _, e := range f.all() {
				_ = e.stop(true)
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := f.registerKueueDefaulting(ctx); err != nil {
		return nil, err
	}
	for name, w := range f.Workers {
		if err := f.storeKubeconfig(ctx, name, w); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// all is every control plane of the fleet that started, by name.
func (f *Fleet) all() map[string]*Env {
	out := map[string]*Env{}
	for name, w := range f.Workers {
		out[name] = w
	}
	if f.Manager != nil {
		out["manager"] = f.Manager
	}
	return out
}

// StopWorker stops a worker's control plane, as a cluster lost to the
// manager; its logs are kept when keepLogs.
func (f *Fleet) StopWorker(name string, keepLogs bool) error {
	w := f.Workers[name]
	if w == nil {
		return fmt.Errorf("no worker %q", name)
	}
	return w.stop(keepLogs)
}

// storeKubeconfig writes worker's kubeconfig into the manager, as Kueue
// accepts it: certificates embedded, no exec plugin, no token file.
func (f *Fleet) storeKubeconfig(ctx context.Context, name string, w *Env) error {
	cfg, err := clientcmd.Load(w.testEnv.KubeConfig)
	if err != nil {
		return fmt.Errorf("worker %s: its kubeconfig: %w", name, err)
	}
	for user, auth := range cfg.AuthInfos {
		if len(auth.ClientCertificateData) == 0 || auth.Exec != nil || auth.TokenFile != "" {
			return fmt.Errorf("worker %s: kubeconfig user %s does not embed a client certificate", name, user)
		}
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: KubeconfigSecret(name), Namespace: kueueNamespace},
		Data:       map[string][]byte{"kubeconfig": w.testEnv.KubeConfig},
	}
	if err := f.Manager.Client.Create(ctx, s); err != nil {
		return fmt.Errorf("worker %s: storing its kubeconfig in the manager: %w", name, err)
	}
	return nil
}

// kueueDefaultingWebhooks are Kueue's mutating webhooks (their names and
// paths in Kueue's config/components/webhook) that give a Job or RayJob
// of a MultiKueue ClusterQueue its spec.managedBy.
var kueueDefaultingWebhooks = []struct{ name, path, group, resource string }{
	{"mjob.kb.io", "/mutate-batch-v1-job", "batch", "jobs"},
	{"mrayjob.kb.io", "/mutate-ray-io-v1-rayjob", "ray.io", "rayjobs"},
}

// registerKueueDefaulting points the manager's API server at its Kueue's
// Job and RayJob defaulting webhooks, served on loopback with the
// certificates the CRD conversion webhooks already use.
func (f *Fleet) registerKueueDefaulting(ctx context.Context) error {
	k, err := f.Manager.kueueOf()
	if err != nil {
		return err
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kueue-test-defaulting"}}
	for _, w := range kueueDefaultingWebhooks {
		url := fmt.Sprintf("https://127.0.0.1:%d%s", k.WebhookPort, w.path)
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name:                    w.name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: k.certs.CACert},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{w.group}, APIVersions: []string{"v1"}, Resources: []string{w.resource}},
			}},
		})
	}
	if err := f.Manager.Client.Create(ctx, cfg); err != nil {
		return fmt.Errorf("manager: registering Kueue's defaulting webhooks: %w", err)
	}
	return nil
}

// kueueOf is the Kueue this control plane runs.
func (e *Env) kueueOf() (*Kueue, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kueue == nil {
		return nil, errors.New("this control plane runs no Kueue")
	}
	return e.kueue, nil
}
