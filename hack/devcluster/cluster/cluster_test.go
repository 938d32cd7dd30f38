package cluster

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taugrid/taugrid/test/controlplane"
)

func TestMain(m *testing.M) {
	// controller-runtime warns, with a stack, when its logger is never set.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestUpRunsAQueuedGPUJobToCompletionAndDownLeavesNothing is the demo's whole life
// in a private state directory: up (twice: the second is a no-op), a suspended
// 1-GPU Job admitted by Kueue and completed on a fake node, Kueue killed and
// restarted by up, down with no process left.
func TestUpRunsAQueuedGPUJobToCompletionAndDownLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the kwok end-to-end test starts a whole cluster")
	}
	t.Setenv("TAU_DEV_DIR", t.TempDir())
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out strings.Builder
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output:\n%s\nlogs in %s", out.String(), c.LogDir())
		}
		_ = c.Down(ctx, &out)
	})

	if err := c.Up(ctx, &out); err != nil {
		t.Fatalf("up: %v", err)
	}
	if st := c.Status(ctx); !st.Up() || st.ReadyNodes != len(gpuNodes) {
		t.Fatalf("after up:\n%s", st)
	}
	out.Reset()
	if err := c.Up(ctx, &out); err != nil || !strings.Contains(out.String(), "already up") {
		t.Errorf("second up: err=%v, output %q, want it to say the cluster is already up", err, out.String())
	}

	took, err := c.Smoke(ctx, time.Minute)
	if err != nil {
		t.Fatalf("smoke Job: %v", err)
	}
	t.Logf("smoke Job completed in %s", took)

	// A dead Kueue is restarted by the next up, with its certificates re-issued.
	pid, _ := c.runningPID(controlplane.BinKueue)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing Kueue (pid %d): %v", pid, err)
	}
	for alive(pid) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Up(ctx, &out); err != nil {
		t.Fatalf("up after Kueue died: %v", err)
	}
	if _, err := c.Smoke(ctx, time.Minute); err != nil {
		t.Fatalf("smoke Job after Kueue's restart: %v", err)
	}

	if err := c.Down(ctx, &out); err != nil {
		t.Fatalf("down: %v", err)
	}
	if left := processesUsing(c.Dir); len(left) > 0 {
		t.Errorf("processes left after down: %v", left)
	}
	if st := c.Status(ctx); st.ClusterExists || st.Kueue != 0 || st.KubeRay != 0 {
		t.Errorf("after down:\n%s", st)
	}
}

// BenchmarkDevClusterJobCompletion measures, on a running dev cluster, how long a
// trivial suspended 1-GPU Job takes from creation to admission and to Complete.
// Start the cluster first and point TAU_DEV_KUBECONFIG at its kubeconfig.
func BenchmarkDevClusterJobCompletion(b *testing.B) {
	kubeconfig := os.Getenv("TAU_DEV_KUBECONFIG")
	if kubeconfig == "" {
		b.Skip("TAU_DEV_KUBECONFIG is unset: run `go run ./hack/devcluster up` and set it to the kubeconfig it prints")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: controlplane.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	var admitted, completed []time.Duration
	for b.Loop() {
		times, err := RunJob(context.Background(), cl, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		admitted = append(admitted, times.Admitted)
		completed = append(completed, times.Completed)
	}
	b.ReportMetric(ms(percentile(admitted, 50)), "admitted-p50-ms")
	b.ReportMetric(ms(percentile(completed, 50)), "complete-p50-ms")
	b.ReportMetric(ms(percentile(completed, 99)), "complete-p99-ms")
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
