package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/taugrid/taugrid/test/controlplane"
)

// createKwok creates the kwok cluster with every component taken from BinDir, so
// kwokctl never downloads anything, and writes the admin kubeconfig.
func (c *Cluster) createKwok(ctx context.Context) error {
	return c.kwokctl(ctx, "create", "cluster",
		"--runtime", "binary",
		"--etcd-binary", c.binary(controlplane.BinEtcd),
		"--kube-apiserver-binary", c.binary(controlplane.BinKubeAPIServer),
		"--kube-controller-manager-binary", c.binary(controlplane.BinControllerManager),
		"--kube-scheduler-binary", c.binary(controlplane.BinScheduler),
		"--kwok-controller-binary", c.binary(controlplane.BinKwok),
		"--disable-qps-limits",
		"--kubeconfig", c.Kubeconfig(),
		"--wait", "2m",
	)
}

// kwokctl runs kwokctl on this cluster, with its work dir inside Dir and its
// output appended to kwokctl.log.
func (c *Cluster) kwokctl(ctx context.Context, args ...string) error {
	logPath := c.logPath(controlplane.BinKwokctl)
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "+ kwokctl %v\n", args)

	cmd := exec.CommandContext(ctx, c.binary(controlplane.BinKwokctl), append([]string{"--name", Name}, args...)...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.kwokDir())
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return &controlplane.ComponentError{Component: "kwokctl " + args[0] + " " + args[1], LogPath: logPath, Err: err}
	}
	return nil
}
