package integration

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/test/controlplane"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The shared fixtures of the integration tests: one real control plane
// (API server, etcd, Kueue), one real git server, one gitsource client.
var (
	env       *controlplane.Env
	k8s       client.Client
	scheme    *runtime.Scheme
	gitServer *httptest.Server
	gitRoot   string
	gitClient *gitsource.Client
)

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "taugrid-reconciler-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	gitRoot = filepath.Join(dir, "repos")
	gitServer = httptest.NewServer(outages{next: &gittest.HTTPServer{Root: gitRoot}})
	defer gitServer.Close()
	if gitClient, err = gitsource.NewClient(gitsource.Options{CacheDir: filepath.Join(dir, "cache")}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = controlplane.Start(context.Background(), controlplane.Options{Kueue: true, KubeRay: true, CRDDirectoryPaths: []string{"../../api/crds"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "reconciler: starting the control plane:", err)
		return 1
	}
	defer env.Stop()
	defer stopCluster()
	defer stopFleet()
	scheme = env.Scheme
	if err := taugridv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8s, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// integration skips a test in -short mode, where no control plane starts.
func integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real control plane; run without -short")
	}
}
