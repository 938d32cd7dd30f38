package controlplane

import "fmt"

// KubeRay is the KubeRay operator run as a plain local process against an API server.
// Leader election and metrics are off; its probes listen on a free loopback port.
type KubeRay struct {
	Binary     string // the kuberay-operator executable
	Kubeconfig string // a kubeconfig with system:masters rights
	HealthPort int    // healthz and readyz, on 127.0.0.1
}

// NewKubeRay picks a free loopback port for the operator's probes.
func NewKubeRay(binary, kubeconfig string) (*KubeRay, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return &KubeRay{Binary: binary, Kubeconfig: kubeconfig, HealthPort: port}, nil
}

// Args is the operator's command line, without the binary.
func (r *KubeRay) Args() []string {
	return []string{
		"--kubeconfig=" + r.Kubeconfig,
		"--enable-leader-election=false",
		"--metrics-addr=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", r.HealthPort),
	}
}

// ReadyURL answers 200 OK once the operator's manager is running.
func (r *KubeRay) ReadyURL() string { return fmt.Sprintf("http://127.0.0.1:%d/readyz", r.HealthPort) }
