package runs

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taugrid/taugrid/test/controlplane"
)

// k8s reads and writes a real API server (no Kueue, no nodes: the read
// side only reads), for the tests of what pure functions cannot show.
var k8s client.Client

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	env, err := controlplane.Start(context.Background(), controlplane.Options{CRDDirectoryPaths: []string{"../api/crds"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "runs: starting the control plane:", err)
		return 1
	}
	defer env.Stop()
	k8s = env.Client
	return m.Run()
}

// integration skips a test in -short mode, where no control plane starts.
func integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real control plane; run without -short")
	}
}

// createNamespace creates a namespace named prefix and a random suffix.
func createNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
