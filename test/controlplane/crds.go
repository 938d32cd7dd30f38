package controlplane

import (
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// InstallCRDs creates (or updates) crds and waits until the API server serves each
// of their versions, i.e. until they are Established.
func InstallCRDs(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	if err := envtest.CreateCRDs(cfg, crds); err != nil {
		return err
	}
	opts := envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 50 * time.Millisecond}
	if err := envtest.WaitForCRDs(cfg, crds, opts); err != nil {
		return fmt.Errorf("waiting for CRDs to be served: %w", err)
	}
	return nil
}

// ReadCRDs reads every CRD in the given directories or files, in place.
func ReadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	opts := envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		return nil, fmt.Errorf("reading CRDs from %v: %w", paths, err)
	}
	return opts.CRDs, nil
}
