package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// crdCreateTries bounds the creations of one CRD the API server answers
// busy (applyCRD).
const crdCreateTries = 5

// crdRetryWait grows by itself between those creations.
var crdRetryWait = time.Second

// InstallCRDs creates (or updates) crds, all at once, and waits until the API
// server serves each of their versions, i.e. until they are Established. Creating
// them in parallel roughly halves the time: the API server's work on each large
// CRD (KubeRay's embed several PodTemplateSpecs) is what a test waits for.
func InstallCRDs(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return err
	}
	errs := make([]error, len(crds))
	var wg sync.WaitGroup
	for i, crd := range crds {
		wg.Go(func() { errs[i] = applyCRD(context.Background(), c, crd) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// A ceiling, not a wait: on a quiet machine they are served in seconds.
	opts := envtest.CRDInstallOptions{MaxTime: 2 * time.Minute, PollInterval: 50 * time.Millisecond}
	if err := envtest.WaitForCRDs(cfg, crds, opts); err != nil {
		return fmt.Errorf("waiting for CRDs to be served: %w", err)
	}
	return nil
}

// applyCRD creates crd, or replaces the spec of the one that exists. On a
// loaded machine the API server may answer a large CRD's creation with a
// timeout (504, after its own minute) or "too busy", having created it or
// not: the creation is asked again, a few times, and one that did happen
// shows as AlreadyExists and is updated to the same spec.
func applyCRD(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) error {
	var err error
	busy := func(err error) bool {
		return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
	}
	for try := 0; try < crdCreateTries; try++ {
		if err = c.Create(ctx, crd.DeepCopy()); !busy(err) {
			break
		}
		time.Sleep(time.Duration(try+1) * crdRetryWait)
	}
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		return nil
	}
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var existing apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), &existing); err != nil {
			return err
		}
		existing.Spec = crd.Spec
		return c.Update(ctx, &existing)
	})
	if err != nil {
		return fmt.Errorf("updating CRD %s: %w", crd.Name, err)
	}
	return nil
}

// ReadCRDs reads every CRD in the given directories or files, in place. Each
// directory is parsed once per process (Kueue's take a noticeable part of a
// second); callers get their own copies.
func ReadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		cached, err := readCRDsOnce(path)
		if err != nil {
			return nil, err
		}
		for _, crd := range cached {
			crds = append(crds, crd.DeepCopy())
		}
	}
	return crds, nil
}

type crdsResult struct {
	crds []*apiextensionsv1.CustomResourceDefinition
	err  error
}

var crdCache sync.Map // path -> func() crdsResult, from sync.OnceValue

func readCRDsOnce(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	read, _ := crdCache.LoadOrStore(path, sync.OnceValue(func() crdsResult {
		opts := envtest.CRDInstallOptions{Paths: []string{path}, ErrorIfPathMissing: true}
		if err := envtest.ReadCRDFiles(&opts); err != nil {
			return crdsResult{err: fmt.Errorf("reading CRDs from %s: %w", path, err)}
		}
		return crdsResult{crds: opts.CRDs}
	}))
	r := read.(func() crdsResult)()
	return r.crds, r.err
}

// preloadCRDs reads Kueue's and KubeRay's CRDs, and those in extraDirs, into the
// cache, errors left for the real read to report.
func preloadCRDs(extraDirs []string) {
	dirs := extraDirs
	for _, dir := range []func() (string, error){KueueCRDDir, KubeRayCRDDir} {
		if d, err := dir(); err == nil {
			dirs = append(dirs, d)
		}
	}
	var wg sync.WaitGroup
	for _, d := range dirs {
		wg.Go(func() { _, _ = readCRDsOnce(d) })
	}
	wg.Wait()
}

// StandardCRDs returns Kueue's CRDs, with conversion pointed at kueue (plain when
// kueue is nil), and KubeRay's, read from the pinned modules.
func StandardCRDs(kueue *Kueue) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	rayDir, err := KubeRayCRDDir()
	if err != nil {
		return nil, err
	}
	ray, err := ReadCRDs(rayDir)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	if kueue != nil {
		crds, err = kueue.CRDs()
	} else {
		var dir string
		if dir, err = KueueCRDDir(); err == nil {
			crds, err = ReadCRDs(dir)
		}
	}
	if err != nil {
		return nil, err
	}
	return append(crds, ray...), nil
}
