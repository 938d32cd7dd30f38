package clusters

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig is a worker's kubeconfig with its credentials embedded, as
// change alters it.
func kubeconfig(t *testing.T, change func(*clientcmdapi.Config)) []byte {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["w"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
	c.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key-SECRET")}
	c.Contexts["c"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "u"}
	c.CurrentContext = "c"
	if change != nil {
		change(c)
	}
	data, err := clientcmd.Write(*c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A worker's kubeconfig is used only as Kueue accepts it: nothing runs a
// command, reads a file or skips TLS checks on its say-so, and no error
// quotes its credentials.
func TestAWorkersKubeconfigIsRefusedWhenItWouldRunOrReadAnything(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*clientcmdapi.Config)
		want   string
	}{
		"embedded certificates are used": {},
		"an exec plugin would run a command": {func(c *clientcmdapi.Config) {
			c.AuthInfos["u"].Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh"}
		}, `user "u" runs a credential plugin`},
		"a token file would be read": {func(c *clientcmdapi.Config) { c.AuthInfos["u"].TokenFile = "/var/run/secrets/token" }, "reads credentials from files"},
		"a key file would be read":   {func(c *clientcmdapi.Config) { c.AuthInfos["u"].ClientKey = "/etc/shadow" }, "reads credentials from files"},
		"basic authentication":       {func(c *clientcmdapi.Config) { c.AuthInfos["u"].Password = "SECRET" }, "basic authentication"},
		"insecure TLS":               {func(c *clientcmdapi.Config) { c.Clusters["w"].InsecureSkipTLSVerify = true }, "skips TLS verification"},
		"a CA file":                  {func(c *clientcmdapi.Config) { c.Clusters["w"].CertificateAuthority = "/ca.crt" }, "reads its CA from a file"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := RESTConfig(kubeconfig(t, tc.change))
			if tc.want == "" {
				if err != nil || cfg.Host != "https://10.0.0.1:6443" {
					t.Fatalf("RESTConfig = %v, %v; want the worker's server", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RESTConfig error = %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error quotes a credential: %v", err)
			}
		})
	}
	if _, err := RESTConfig([]byte("{not yaml: [")); err == nil || strings.Contains(err.Error(), "not yaml") {
		t.Errorf("a broken kubeconfig: error %v, want one that does not quote it", err)
	}
	if _, err := RESTConfig(nil); err == nil || !strings.Contains(err.Error(), KubeconfigKey) {
		t.Errorf("a Secret without the key: error %v, want one naming %q", err, KubeconfigKey)
	}
}
