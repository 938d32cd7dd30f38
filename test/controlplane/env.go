package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options says which components to run besides etcd and kube-apiserver. Kueue's and
// KubeRay's CRDs are always installed, read in place from the pinned modules.
type Options struct {
	Kueue             bool     // the real Kueue controller, frameworks batch/job and ray.io/rayjob
	KubeRay           bool     // the real KubeRay operator
	Nodes             bool     // the real kube-scheduler and Job/GC/TTL controllers, and kwok playing the kubelet of nodes added with AddNodes
	CRDDirectoryPaths []string // further CRD directories (TauGrid's own)
	// MultiKueue, when set, makes this control plane's Kueue a MultiKueue
	// manager with these settings (see StartFleet).
	MultiKueue *MultiKueueSettings
	// ClientQPS is the request rate the scheduler and the Job controller
	// (kube-controller-manager) use towards the API server, their burst
	// twice that; 0 keeps their defaults (20 for the controller manager, 50
	// for the scheduler). A cluster of a thousand nodes runs them higher, as
	// Kubernetes' own scale tests do: at 20 a second the Job controller
	// creates pods for only a few Jobs a second.
	ClientQPS float32
	// NodeLease is how long the lease of a node kwok plays lasts; kwok
	// renews it every quarter of that, as the kubelet does, and the node
	// lifecycle controller's grace is a quarter more. 0 keeps the kubelet's
	// 40 s (a renewal every 10 s). The lease is the one cost a node has on
	// the API server that grows with the nodes, not the work: hack/scale
	// sets it longer, because 1,000 nodes renewing every 10 s are 90
	// requests a second, which a real cluster's control plane serves on
	// cores of its own.
	NodeLease time.Duration
	// KueueJobWorkers is how many Jobs Kueue's Job reconciler works on at
	// once (its Configuration's controller.groupKindConcurrency for
	// Job.batch, Workloads the same); 0 keeps Kueue's shipped 5.
	// hack/scale's -kueue-job-workers measures what more buys.
	KueueJobWorkers int
	// JobSyncs is how many Jobs kube-controller-manager's Job controller
	// syncs at once (--concurrent-job-syncs); 0 keeps this control plane's
	// 10 (Kubernetes ships 5). hack/scale's -job-syncs measures what more
	// buys once the Job controller is the cluster's limit.
	JobSyncs int

	kueueArgs []string // appended to Kueue's command line; tests use them to make it fail
}

// Env is a running control plane.
type Env struct {
	Config     *rest.Config
	Client     client.Client // uses Scheme
	Scheme     *runtime.Scheme
	Kubeconfig string // a kubeconfig file for a system:masters user
	LogDir     string // one <component>.log per component

	dir      string // everything else: data, certificates, configuration
	opts     Options
	kueue    *Kueue // the Kueue running, if any; guarded by mu
	testEnv  *envtest.Environment
	children []*child
	wrappers []*wrapper

	mu       sync.Mutex // guards children, appended to concurrently
	stopOnce sync.Once
	stopErr  error
}

// How long components get to become ready (or, for envtest, to stop).
const (
	apiServerStartTimeout = 60 * time.Second
	apiServerStopTimeout  = 20 * time.Second
	controllerTimeout     = 90 * time.Second
	startAttempts         = 3 // a free port can be taken before a component binds it
)

// ForTest starts a control plane for t and stops it when t ends. It keeps the logs
// of a failed test and says where.
func ForTest(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		keep := t.Failed()
		if keep {
			t.Logf("control-plane logs kept in %s", e.LogDir)
		}
		if err := e.stop(keep); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	return e
}

// Start starts etcd and kube-apiserver, installs the CRDs, then starts Kueue and
// KubeRay as opts asks, and returns once all of them are ready. On failure nothing
// it started is left running, and the error names the component and its log.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	binDir, err := binaryDirFor(opts)
	if err != nil {
		return nil, err
	}
	sweepStale()
	dir, err := os.MkdirTemp("", workDirPrefix)
	if err != nil {
		return nil, err
	}
	e := &Env{dir: dir, LogDir: filepath.Join(dir, "logs"), Scheme: NewScheme(), opts: opts}
	defer func() {
		if err != nil {
			// Keep the logs the error points at; stop the rest.
			_ = e.stop(true)
		}
	}()
	if err := e.writeOwner(); err != nil {
		return nil, err
	}
	// Parse the CRDs and make Kueue's certificates while the API server starts.
	go preloadCRDs(opts.CRDDirectoryPaths)
	go kueueWebhookCerts() //nolint:errcheck // cached; the real call reports errors
	if err := e.startAPIServer(binDir); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	var kueue *Kueue
	if opts.Kueue {
		if kueue, err = e.newKueue(binDir, opts.kueueArgs); err != nil {
			return nil, err
		}
	}
	if err := e.installCRDs(kueue, opts.CRDDirectoryPaths); err != nil {
		return nil, err
	}
	if err := e.startControllers(ctx, binDir, kueue, opts.KubeRay); err != nil {
		return nil, err
	}
	if opts.Nodes {
		if err := e.startNodes(ctx, binDir); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// binaryDirFor finds the binaries opts needs, and setpriv.
func binaryDirFor(opts Options) (string, error) {
	dir, err := BinaryDir()
	if err != nil {
		return "", err
	}
	var names []string
	if opts.Kueue {
		names = append(names, BinKueue)
	}
	if opts.KubeRay {
		names = append(names, BinKubeRay)
	}
	if opts.Nodes {
		names = append(names, BinScheduler, BinControllerManager, BinKwok)
	}
	if err := RequireBinaries(dir, names...); err != nil {
		return "", err
	}
	if len(deathSigPrefix) > 0 {
		if _, err := exec.LookPath(deathSigPrefix[0]); err != nil {
			return "", fmt.Errorf("%s (util-linux) is needed to tie etcd and kube-apiserver to the test process: %w",
				deathSigPrefix[0], err)
		}
	}
	return dir, nil
}

// startAPIServer starts etcd and kube-apiserver through envtest, each behind a
// wrapper that gives it a parent-death signal (envtest sets none).
func (e *Env) startAPIServer(binDir string) error {
	if err := os.MkdirAll(e.LogDir, 0o755); err != nil {
		return err
	}
	etcd, err := e.newWrapper(binDir, BinEtcd)
	if err != nil {
		return err
	}
	api, err := e.newWrapper(binDir, BinKubeAPIServer)
	if err != nil {
		return err
	}
	apiServer := &envtest.APIServer{Path: api.path, Out: api.log, Err: api.log, CertDir: filepath.Join(e.dir, "apiserver")}
	// As kubeadm sets it: a node's kubelet is reached at its InternalIP
	// (kwok's nodes also report a Hostname nothing resolves).
	apiServer.Configure().Set("kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname")
	e.testEnv = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{Path: etcd.path, Out: etcd.log, Err: etcd.log,
				DataDir: filepath.Join(e.dir, "etcd")},
			APIServer: apiServer,
		},
		Scheme:                   e.Scheme,
		UseExistingCluster:       ptr.To(false),
		BinaryAssetsDirectory:    binDir,
		ControlPlaneStartTimeout: apiServerStartTimeout,
		ControlPlaneStopTimeout:  apiServerStopTimeout,
	}
	for _, d := range []string{"etcd", "apiserver"} {
		if err := os.MkdirAll(filepath.Join(e.dir, d), 0o700); err != nil {
			return err
		}
	}
	cfg, err := e.testEnv.Start()
	if err != nil {
		return blameControlPlane(err, etcd, api)
	}
	e.Config = cfg
	e.Kubeconfig = filepath.Join(e.dir, "kubeconfig")
	return os.WriteFile(e.Kubeconfig, e.testEnv.KubeConfig, 0o600)
}

// blameControlPlane names the component envtest's error is about.
func blameControlPlane(err error, etcd, api *wrapper) error {
	switch {
	case strings.Contains(err.Error(), BinKubeAPIServer):
		return &ComponentError{Component: BinKubeAPIServer, LogPath: api.logPath, Err: err}
	case strings.Contains(err.Error(), BinEtcd):
		return &ComponentError{Component: BinEtcd, LogPath: etcd.logPath, Err: err}
	}
	return fmt.Errorf("etcd and kube-apiserver (logs: %s, %s): %w", etcd.logPath, api.logPath, err)
}

// installCRDs installs, in one go, Kueue's CRDs (with conversion pointed at kueue
// if it is to run), KubeRay's, and those under extraDirs.
func (e *Env) installCRDs(kueue *Kueue, extraDirs []string) error {
	crds, err := StandardCRDs(kueue)
	if err != nil {
		return err
	}
	if len(extraDirs) > 0 {
		extra, err := ReadCRDs(extraDirs...)
		if err != nil {
			return err
		}
		crds = append(crds, extra...)
	}
	return InstallCRDs(e.Config, crds)
}

// newKueue sets up a Kueue: ports, configuration, certificates.
func (e *Env) newKueue(binDir string, extraArgs []string) (*Kueue, error) {
	k, err := NewKueue(filepath.Join(binDir, BinKueue), e.Kubeconfig, filepath.Join(e.dir, "kueue"))
	if err != nil {
		return nil, err
	}
	k.ExtraArgs = extraArgs
	if e.opts.MultiKueue != nil || e.opts.KueueJobWorkers > 0 {
		k.MultiKueue, k.JobWorkers = e.opts.MultiKueue, e.opts.KueueJobWorkers
		if err := k.writeFiles(); err != nil {
			return nil, fmt.Errorf("kueue: writing its configuration: %w", err)
		}
	}
	return k, nil
}

// startControllers starts Kueue (unless nil) and KubeRay side by side and waits
// for both.
func (e *Env) startControllers(ctx context.Context, binDir string, kueue *Kueue, kubeRay bool) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	if kueue != nil {
		wg.Go(func() { errs[0] = e.startKueue(ctx, binDir, kueue) })
	}
	if kubeRay {
		wg.Go(func() { errs[1] = e.startKubeRay(ctx, binDir) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startKueue creates Kueue's certificate Secret and starts it. If one of its ports
// was taken meanwhile, it retries with new ones, re-pointing the CRDs.
func (e *Env) startKueue(ctx context.Context, binDir string, k *Kueue) error {
	if err := k.Prepare(ctx, e.Client); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := e.run(ctx, BinKueue, k.Binary, k.Args(), k.ReadyURL())
		if err == nil {
			e.mu.Lock()
			e.kueue = k
			e.mu.Unlock()
		}
		if err == nil || attempt == startAttempts || !addrInUse(err) {
			return err
		}
		if k, err = e.newKueue(binDir, k.ExtraArgs); err != nil {
			return err
		}
		crds, err := k.CRDs()
		if err != nil {
			return err
		}
		if err := InstallCRDs(e.Config, crds); err != nil {
			return fmt.Errorf("kueue: re-pointing its CRDs: %w", err)
		}
	}
}

// startKubeRay starts the KubeRay operator, with a new port if one was taken.
func (e *Env) startKubeRay(ctx context.Context, binDir string) error {
	for attempt := 1; ; attempt++ {
		r, err := NewKubeRay(filepath.Join(binDir, BinKubeRay), e.Kubeconfig)
		if err != nil {
			return err
		}
		err = e.run(ctx, BinKubeRay, r.Binary, r.Args(), r.ReadyURL())
		if err == nil || attempt == startAttempts || !addrInUse(err) {
			return err
		}
	}
}

// run starts a component and waits until readyURL answers. A component that fails
// is stopped and its log kept.
func (e *Env) run(ctx context.Context, name, path string, args []string, readyURL string) error {
	logPath := filepath.Join(e.LogDir, name+".log")
	c, err := startChild(name, logPath, path, args...)
	if err != nil {
		return err
	}
	if err := c.waitReady(ctx, readyURL, controllerTimeout); err != nil {
		c.kill()
		return err
	}
	e.mu.Lock()
	e.children = append(e.children, c)
	e.mu.Unlock()
	return nil
}

// Stop stops every component, waits for them to exit, and removes the control
// plane's files (its logs too, unless TAU_KEEP_LOGS is set). It is idempotent.
func (e *Env) Stop() error {
	return e.stop(os.Getenv("TAU_KEEP_LOGS") != "")
}

func (e *Env) stop(keepLogs bool) error {
	e.stopOnce.Do(func() {
		var errs []error
		// Nothing here holds state worth a graceful shutdown: kill every process
		// group at once, which takes milliseconds where SIGTERM takes seconds.
		e.mu.Lock()
		children := e.children
		e.mu.Unlock()
		for _, c := range children {
			c.kill()
		}
		for _, w := range e.wrappers {
			w.kill()
		}
		// envtest then reaps what it started and removes its own files.
		if e.testEnv != nil {
			if err := e.testEnv.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
			}
		}
		for _, w := range e.wrappers {
			_ = w.log.Close()
		}
		errs = append(errs, e.removeFiles(keepLogs))
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// removeFiles deletes the work directory, or all of it but the logs.
func (e *Env) removeFiles(keepLogs bool) error {
	if !keepLogs {
		return os.RemoveAll(e.dir)
	}
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, entry := range entries {
		if entry.Name() != filepath.Base(e.LogDir) {
			errs = append(errs, os.RemoveAll(filepath.Join(e.dir, entry.Name())))
		}
	}
	return errors.Join(errs...)
}
