package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The certificates must pass the checks Kueue's rotator (cert-controller's
// ValidCert) makes, or it would replace them with its own and the API server could
// no longer verify the webhook server at 127.0.0.1.
func TestKueueWebhookCertificatesPassTheRotatorsChecksAndNameTheLoopback(t *testing.T) {
	c, err := kueueWebhookCerts()
	if err != nil {
		t.Fatal(err)
	}
	lookahead := time.Now().Add(90 * 24 * time.Hour) // the rotator's default
	tests := map[string]struct {
		cert, key []byte
		name      string
		usages    []x509.ExtKeyUsage
	}{
		"the CA, as the rotator checks it":             {c.CACert, c.CAKey, "kueue-ca", nil},
		"the server certificate for the Service name":  {c.Cert, c.Key, "kueue-webhook-service.kueue-system.svc", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		"the server certificate for the loopback URL":  {c.Cert, c.Key, "127.0.0.1", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		"the server certificate for localhost as well": {c.Cert, c.Key, "localhost", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := tls.X509KeyPair(tc.cert, tc.key); err != nil {
				t.Fatalf("key pair: %v", err)
			}
			if err := verify(c.CACert, tc.cert, tc.name, tc.usages, lookahead); err != nil {
				t.Errorf("verifying: %v", err)
			}
			if block, _ := pem.Decode(tc.key); block == nil || block.Type != "RSA PRIVATE KEY" {
				t.Errorf("key is not PKCS#1 PEM, which the rotator requires")
			}
		})
	}
}

func verify(caPEM, certPEM []byte, name string, usages []x509.ExtKeyUsage, at time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("bad CA")
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	_, err = cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: at, KeyUsages: usages})
	return err
}

func TestKueueCRDsSendOnlyTheRotatorsCRDsToItsConversionWebhook(t *testing.T) {
	k, err := NewKueue("kueue", "kubeconfig", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	crds, err := k.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/convert", k.WebhookPort)
	got := map[string]string{}
	for _, crd := range crds {
		conv := crd.Spec.Conversion
		switch {
		case conv == nil || conv.Strategy == apiextensionsv1.NoneConverter:
			got[crd.Name] = "none"
		case conv.Webhook.ClientConfig.URL != nil && *conv.Webhook.ClientConfig.URL == url &&
			string(conv.Webhook.ClientConfig.CABundle) == string(k.certs.CACert):
			got[crd.Name] = "local webhook"
		default:
			got[crd.Name] = fmt.Sprintf("unexpected %+v", conv)
		}
	}
	want := map[string]string{
		"admissionchecks.kueue.x-k8s.io":            "none",
		"clusterqueues.kueue.x-k8s.io":              "local webhook",
		"cohorts.kueue.x-k8s.io":                    "local webhook",
		"localqueues.kueue.x-k8s.io":                "local webhook",
		"multikueueclusters.kueue.x-k8s.io":         "local webhook",
		"multikueueconfigs.kueue.x-k8s.io":          "none",
		"provisioningrequestconfigs.kueue.x-k8s.io": "none",
		"resourceflavors.kueue.x-k8s.io":            "none",
		"topologies.kueue.x-k8s.io":                 "none",
		"workloadpriorityclasses.kueue.x-k8s.io":    "none",
		"workloads.kueue.x-k8s.io":                  "local webhook",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conversion per CRD (-want +got):\n%s", diff)
	}
}

// Kueue's Job and Workload reconcilers run its shipped 5 workers unless
// the control plane asks for more (hack/scale -kueue-job-workers).
func TestKueuesJobWorkersAreItsShippedFiveUnlessSet(t *testing.T) {
	for workers, want := range map[int]string{0: "5", 20: "20"} {
		k := &Kueue{JobWorkers: workers}
		conf := k.configuration()
		for _, line := range []string{"    Job.batch: " + want + "\n", "    Workload.kueue.x-k8s.io: " + want + "\n", "    Pod: 5\n"} {
			if !strings.Contains(conf, line) {
				t.Errorf("JobWorkers %d: the configuration lacks %q:\n%s", workers, line, conf)
			}
		}
		if strings.Contains(conf, "%!") {
			t.Errorf("JobWorkers %d: a formatting error in the configuration:\n%s", workers, conf)
		}
	}
}
