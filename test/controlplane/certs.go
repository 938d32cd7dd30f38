package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// webhookCerts is a CA and a serving certificate for Kueue's webhook server, in the
// form Kueue's certificate rotator (open-policy-agent/cert-controller) accepts as
// already valid: RSA keys in PKCS#1, a CA named "kueue-ca", a server certificate for
// the webhook Service's DNS name. It also names 127.0.0.1 and localhost, so the API
// server can reach the webhook server at a loopback URL and verify it.
type webhookCerts struct {
	CACert, CAKey, Cert, Key []byte // PEM
}

var (
	certsOnce sync.Once
	certs     webhookCerts
	certsErr  error
)

// kueueWebhookCerts returns the certificates, generated once per process: RSA key
// generation is the slow part and the same pair serves every local Kueue.
func kueueWebhookCerts() (webhookCerts, error) {
	certsOnce.Do(func() { certs, certsErr = newWebhookCerts(time.Now()) })
	return certs, certsErr
}

func newWebhookCerts(now time.Time) (webhookCerts, error) {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return webhookCerts{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kueue-ca", Organization: []string{"kueue"}},
		DNSNames:              []string{"kueue-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return webhookCerts{}, fmt.Errorf("creating the webhook CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return webhookCerts{}, err
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return webhookCerts{}, err
	}
	dnsName := kueueWebhookService + "." + kueueNamespace + ".svc"
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               pkix.Name{CommonName: dnsName},
		DNSNames:              []string{dnsName, "localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return webhookCerts{}, fmt.Errorf("creating the webhook serving certificate: %w", err)
	}
	return webhookCerts{
		CACert: pemBlock("CERTIFICATE", caDER),
		CAKey:  pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey)),
		Cert:   pemBlock("CERTIFICATE", der),
		Key:    pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)),
	}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
