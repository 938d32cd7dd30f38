// Package cluster runs the local TauGrid demo cluster: a kwok cluster built from
// the binaries hack/testbin.sh builds (real etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler; fake GPU nodes whose pods run and
// complete), the real Kueue and KubeRay operator as detached local processes, and
// the platform objects in examples/platform/kueue.
//
// Everything lives in one state directory, so that Down can find and stop it all.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/test/controlplane"
)

// Name is the kwok cluster's name.
const Name = "taugrid"

// controllerTimeout bounds how long Kueue and KubeRay get to become ready.
const controllerTimeout = 90 * time.Second

// Cluster is the dev cluster of one state directory.
type Cluster struct {
	Dir    string // state: kubeconfig, kwok's work dir, pid files, logs
	BinDir string // the binaries hack/testbin.sh built
	Root   string // the TauGrid checkout, for examples/platform
}

// StateDir is $TAU_DEV_DIR, or ${XDG_CACHE_HOME:-~/.cache}/taugrid/dev-cluster.
func StateDir() (string, error) {
	if dir := os.Getenv("TAU_DEV_DIR"); dir != "" {
		return filepath.Abs(dir)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "taugrid", "dev-cluster"), nil
}

// New returns the dev cluster of StateDir, using the binaries of
// controlplane.BinaryDir.
func New() (*Cluster, error) {
	dir, err := StateDir()
	if err != nil {
		return nil, err
	}
	bin, err := controlplane.BinaryDir()
	if err != nil {
		return nil, err
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	return &Cluster{Dir: dir, BinDir: bin, Root: root}, nil
}

// Kubeconfig is the path of the cluster's admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

// LogDir holds one log per component; Down keeps it.
func (c *Cluster) LogDir() string { return filepath.Join(c.Dir, "logs") }

func (c *Cluster) kwokDir() string            { return filepath.Join(c.Dir, "kwok") }
func (c *Cluster) logPath(name string) string { return filepath.Join(c.LogDir(), name+".log") }
func (c *Cluster) binary(name string) string  { return filepath.Join(c.BinDir, name) }
func (c *Cluster) clusterDir() string         { return filepath.Join(c.kwokDir(), "clusters", Name) }
func (c *Cluster) kueueDir() string           { return filepath.Join(c.Dir, "kueue") }
func (c *Cluster) pidPath(name string) string { return filepath.Join(c.Dir, "run", name+".pid") }
func (c *Cluster) exists() bool               { _, err := os.Stat(c.clusterDir()); return err == nil }
func (c *Cluster) controllers() []string {
	return []string{controlplane.BinKueue, controlplane.BinKubeRay}
}
func (c *Cluster) neededBinaries() []string {
	return []string{
		controlplane.BinEtcd, controlplane.BinKubeAPIServer, controlplane.BinControllerManager,
		controlplane.BinScheduler, controlplane.BinKwok, controlplane.BinKwokctl,
		controlplane.BinKueue, controlplane.BinKubeRay,
	}
}

// RESTConfig reads the cluster's kubeconfig.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Client is a client for the cluster with TauGrid's scheme.
func (c *Cluster) Client() (client.Client, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: controlplane.NewScheme()})
}

// Up brings the cluster up. When it is up already it says so and does nothing;
// when it is partly up (a controller died, the machine rebooted) it starts what is
// missing. If it created the cluster and then fails, it tears it down again,
// keeping the logs the error names.
func (c *Cluster) Up(ctx context.Context, out io.Writer) (err error) {
	st := c.Status(ctx)
	if st.Up() {
		fmt.Fprintf(out, "dev cluster is already up\n%s", st.access())
		return nil
	}
	if err := controlplane.RequireBinaries(c.BinDir, c.neededBinaries()...); err != nil {
		return err
	}
	for _, d := range []string{c.LogDir(), filepath.Dir(c.pidPath("x")), c.kueueDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	start := time.Now()
	created, err := c.upKwok(ctx, st, out)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && created {
			fmt.Fprintf(out, "tearing the half-made cluster down (logs stay in %s)\n", c.LogDir())
			err = errors.Join(err, c.Down(context.WithoutCancel(ctx), io.Discard))
		}
	}()
	if err := c.upInCluster(ctx, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "dev cluster up in %s\n%s", time.Since(start).Round(100*time.Millisecond), c.Status(ctx).access())
	return nil
}

// upKwok creates the kwok cluster, or restarts it if it exists but is stopped.
func (c *Cluster) upKwok(ctx context.Context, st Status, out io.Writer) (created bool, err error) {
	switch {
	case !st.ClusterExists:
		fmt.Fprintln(out, "creating the kwok cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok)")
		return true, c.createKwok(ctx)
	case !st.APIServer:
		fmt.Fprintln(out, "restarting the stopped kwok cluster")
		return false, c.kwokctl(ctx, "start", "cluster", "--wait", "2m")
	}
	return false, nil
}

// upInCluster adds the fake nodes, CRDs, controllers and platform objects.
func (c *Cluster) upInCluster(ctx context.Context, out io.Writer) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "adding fake GPU nodes gpu-node-1 to gpu-node-4 (8x NVIDIA-H200 each; block-1: rack-1 has nodes 1 and 2, rack-2 has 3 and 4)")
	if err := ensureNodes(ctx, cl); err != nil {
		return err
	}
	fmt.Fprintln(out, "starting Kueue and the KubeRay operator")
	if err := c.startControllers(ctx, cl); err != nil {
		return err
	}
	fmt.Fprintln(out, "applying examples/platform/kueue")
	return applyPlatform(ctx, cl, filepath.Join(c.Root, "examples", "platform", "kueue"))
}

// Down stops Kueue and KubeRay, deletes the kwok cluster and checks that no
// process of the cluster is left; it removes all state but the logs.
func (c *Cluster) Down(ctx context.Context, out io.Writer) error {
	var errs []error
	for _, name := range c.controllers() {
		errs = append(errs, c.stopDetached(name))
	}
	if c.exists() {
		errs = append(errs, c.kwokctl(ctx, "delete", "cluster"))
	}
	if left := exited(c.Dir, exitGrace); len(left) > 0 {
		killAll(left)
		errs = append(errs, fmt.Errorf("had to kill processes still using %s: %v", c.Dir, left))
	}
	for _, p := range []string{c.Kubeconfig(), c.kwokDir(), c.kueueDir(), filepath.Dir(c.pidPath("x"))} {
		errs = append(errs, os.RemoveAll(p))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "dev cluster down; no process left (logs kept in %s)\n", c.LogDir())
	return nil
}
