package nodeagent

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kwatch "k8s.io/apimachinery/pkg/watch"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// BenchmarkXIDToTaint measures, on the real API server, the time from an XID 79
// reaching NVML's event set to the node carrying the taint (seen through a
// watch, as the scheduler would), then reboots the node (a new boot ID) and
// waits for the taint to clear before the next round. Report p50 and p99 with
// -benchtime=200x.
func BenchmarkXIDToTaint(b *testing.B) {
	c := apiServer(b)
	f := newFakeNVML(b)
	boot := newBootIDs("boot-0")
	gpuNode(b, c, "bench-xid")
	a := newTestAgent(b, f, c, boot.get, func(cfg *Config) {
		kubeConfig("bench-xid")(cfg)
		cfg.PollInterval = 20 * time.Millisecond
		cfg.Recovery.Window = 0
	})
	run(b, a)
	waitNode(b, c, "bench-xid", 10*time.Second, "healthy", isHealthy)
	w, err := c.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "bench-xid").String()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		f.xid(i%8, 79)
		awaitTaint(b, w, true)
		lat = append(lat, time.Since(start))
		boot.set(fmt.Sprintf("boot-%d", i+1))
		awaitTaint(b, w, false)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// awaitTaint waits for a watch event showing the node tainted (or not).
func awaitTaint(b *testing.B, w kwatch.Interface, tainted bool) {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch ended")
			}
			if n, isNode := ev.Object.(*corev1.Node); isNode && hasTaint(n) == tainted {
				return
			}
		case <-timeout:
			b.Fatalf("no watch event with tainted=%v within 10s", tainted)
		}
	}
}

// BenchmarkPollCycle is one cheap-counter cycle over 8 mock H200s: NVML reads
// (each under its deadline), evaluation, decision, verdict, metrics, and the
// comparison with the node that finds nothing to write. cpu-ns/op counts the
// process's CPU time (GC included); pct-core@10s is the share of one core at
// the default 10 s poll interval.
func BenchmarkPollCycle(b *testing.B) {
	benchCycle(b, false)
}

// BenchmarkSlowPollCycle adds the slow readings (inventory, NVLink discovery,
// retired pages, thresholds), done every 5 minutes by default.
func BenchmarkSlowPollCycle(b *testing.B) {
	benchCycle(b, true)
}

// BenchmarkPollCycleWithAttribution adds what utilisation costs: two more
// NVML calls per GPU, the kubelet's PodResources List over a real gRPC unix
// socket (a stand-in kubelet with 40 pods, 8 of them holding a GPU each), the
// attributed series and the minute-by-minute history.
func BenchmarkPollCycleWithAttribution(b *testing.B) {
	benchCycle(b, false, withKubelet)
}

// withKubelet gives the agent a stand-in kubelet with a busy node's pods.
func withKubelet(b *testing.B, f *fakeNVML, d *Deps) {
	k := newStandInKubelet(b)
	var pods []*podresourcesv1.PodResources
	for i := range 40 {
		if i < 8 {
			pods = append(pods, gpuPod(fmt.Sprintf("team-%d", i%3), fmt.Sprintf("r-%d-0", i), "main", "nvidia.com/gpu", f.uuid(i)))
			continue
		}
		pods = append(pods, gpuPod("kube-system", fmt.Sprintf("daemon-%d", i), "main", "cpu"))
	}
	k.setPods(pods...)
	d.PodResources = dialKubelet(b, k)
}

func benchCycle(b *testing.B, slow bool, deps ...func(*testing.B, *fakeNVML, *Deps)) {
	f := newFakeNVML(b)
	d := Deps{}
	for _, fn := range deps {
		fn(b, f, &d)
	}
	a := newTestAgentWith(b, f, d, func(c *Config) { c.CallTimeout = 5 * time.Second; c.NodeName = "gpu-node-1" })
	ctx := context.Background()
	a.poll(ctx, true)
	a.sync(ctx)
	if a.verdict.Status != corev1.ConditionTrue {
		b.Fatalf("verdict %+v, want healthy", a.verdict)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		a.poll(ctx, slow)
		a.sync(ctx)
	}
	b.StopTimer()
	perOp := float64(cpuTime()-cpu0) / float64(b.N)
	b.ReportMetric(perOp, "cpu-ns/op")
	b.ReportMetric(perOp/float64(10*time.Second)*100, "pct-core@10s")
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
