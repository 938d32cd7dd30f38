package controlplane

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where Kueue's internal certificate management looks for its webhook Secret (the
// Configuration's defaults, spelled out).
const (
	kueueNamespace      = "kueue-system"
	kueueWebhookService = "kueue-webhook-service"
	kueueWebhookSecret  = "kueue-webhook-server-cert"
)

// kueueConvertedCRDs are the CRDs Kueue's certificate rotator injects its CA into.
// It requires each to have a conversion webhook, or it never reports ready.
var kueueConvertedCRDs = map[string]bool{
	"localqueues.kueue.x-k8s.io":        true,
	"clusterqueues.kueue.x-k8s.io":      true,
	"workloads.kueue.x-k8s.io":          true,
	"cohorts.kueue.x-k8s.io":            true,
	"multikueueclusters.kueue.x-k8s.io": true,
}

// Kueue is the Kueue controller run as a plain local process against an API server.
//
// It runs with Kueue's internal certificate management enabled, because that is the
// only mode in which Kueue v0.17 does not read metrics certificates from the fixed
// path /etc/kueue/metrics/certs (which only root can create). The rotator is handed
// a CA and serving certificate it accepts as valid (see webhookCerts), so it changes
// nothing; the webhook server serves them at 127.0.0.1:WebhookPort, and the
// conversion webhooks of Kueue's CRDs point there. No admission webhook is
// registered with the API server: create Jobs already suspended.
//
// Metrics are off and the visibility API is disabled (it would need certificates
// under /visibility, again root only).
type Kueue struct {
	Binary      string // the kueue executable
	Kubeconfig  string // a kubeconfig with system:masters rights
	Dir         string // holds the Configuration and the webhook certificates
	HealthPort  int    // healthz and readyz, on 127.0.0.1
	WebhookPort int    // webhook and CRD conversion server, on 127.0.0.1

	// ExtraArgs are appended to the command line (tests use them to make Kueue fail).
	ExtraArgs []string
	// MultiKueue, when set, configures Kueue's MultiKueue admission check
	// controller (on by default in v0.17: the feature is beta).
	MultiKueue *MultiKueueSettings
	// JobWorkers is the concurrency of Kueue's Job and Workload
	// reconcilers; 0 is Kueue's shipped 5.
	JobWorkers int

	certs webhookCerts
}

// NewKueue picks free loopback ports and writes Kueue's Configuration and webhook
// certificates under dir.
func NewKueue(binary, kubeconfig, dir string) (*Kueue, error) {
	certs, err := kueueWebhookCerts()
	if err != nil {
		return nil, err
	}
	k := &Kueue{Binary: binary, Kubeconfig: kubeconfig, Dir: dir, certs: certs}
	if k.HealthPort, err = freePort(); err != nil {
		return nil, err
	}
	if k.WebhookPort, err = freePort(); err != nil {
		return nil, err
	}
	if err := k.writeFiles(); err != nil {
		return nil, fmt.Errorf("kueue: writing its configuration: %w", err)
	}
	return k, nil
}

func (k *Kueue) certDir() string    { return filepath.Join(k.Dir, "webhook-certs") }
func (k *Kueue) configPath() string { return filepath.Join(k.Dir, "kueue-config.yaml") }

func (k *Kueue) writeFiles() error {
	if err := os.MkdirAll(k.certDir(), 0o700); err != nil {
		return err
	}
	files := map[string][]byte{
		filepath.Join(k.certDir(), "tls.crt"): k.certs.Cert,
		filepath.Join(k.certDir(), "tls.key"): k.certs.Key,
		k.configPath():                        []byte(k.configuration()),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// configuration is Kueue's Configuration file (config.kueue.x-k8s.io/v1beta2).
func (k *Kueue) configuration() string {
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
  webhookServiceName: %s
  webhookSecretName: %s
controller:
  # Kueue's shipped configuration (config/components/manager): without it
  # each of its reconcilers has one worker, and at 10,000 Jobs Kueue
  # unsuspended the Jobs of admitted Workloads minutes late (hack/scale).
  groupKindConcurrency:
    Job.batch: %[7]d
    Pod: 5
    Workload.kueue.x-k8s.io: %[7]d
    LocalQueue.kueue.x-k8s.io: 1
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 1
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 500
  burst: 1000
integrations:
  frameworks:
  - batch/job
  - ray.io/rayjob
`, kueueNamespace, k.HealthPort, k.WebhookPort, k.certDir(), kueueWebhookService, kueueWebhookSecret, cmp.Or(k.JobWorkers, 5)) + k.MultiKueue.configuration()
}

// Args is Kueue's command line, without the binary.
func (k *Kueue) Args() []string {
	args := []string{
		"--config=" + k.configPath(),
		"--kubeconfig=" + k.Kubeconfig,
		"--feature-gates=VisibilityOnDemand=false",
	}
	return append(args, k.ExtraArgs...)
}

// ReadyURL answers 200 OK once Kueue's certificates are in place and its manager,
// webhook server included, is running.
func (k *Kueue) ReadyURL() string { return fmt.Sprintf("http://127.0.0.1:%d/readyz", k.HealthPort) }

// CRDs reads Kueue's CRDs from the pinned module and points the conversion webhooks
// of those the certificate rotator manages at this process.
func (k *Kueue) CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := KueueCRDDir()
	if err != nil {
		return nil, err
	}
	crds, err := ReadCRDs(dir)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/convert", k.WebhookPort)
	for _, crd := range crds {
		if !kueueConvertedCRDs[crd.Name] {
			continue
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: k.certs.CACert},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	}
	return crds, nil
}

// Prepare creates the namespace and the certificate Secret Kueue's rotator reads
// before it starts its controllers. It is idempotent.
func (k *Kueue) Prepare(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kueueWebhookSecret, Namespace: kueueNamespace},
		Data: map[string][]byte{
			"ca.crt": k.certs.CACert, "ca.key": k.certs.CAKey,
			"tls.crt": k.certs.Cert, "tls.key": k.certs.Key,
		},
	}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kueue: creating namespace %s: %w", kueueNamespace, err)
	}
	err := c.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		// Left by an earlier Kueue with other certificates: ours must win.
		var existing corev1.Secret
		if err = c.Get(ctx, client.ObjectKeyFromObject(secret), &existing); err == nil {
			existing.Data = secret.Data
			err = c.Update(ctx, &existing)
		}
	}
	if err != nil {
		return fmt.Errorf("kueue: writing Secret %s/%s: %w", kueueNamespace, kueueWebhookSecret, err)
	}
	return nil
}
