package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// standInKubelet serves the kubelet's real PodResources gRPC service on a unix
// socket, answering List with whatever pods the test set.
type standInKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	socket string
	srv    *grpc.Server

	mu    sync.Mutex
	pods  []*podresourcesv1.PodResources
	lists int
}

func newStandInKubelet(t testing.TB) *standInKubelet {
	t.Helper()
	// A short path: unix socket paths are limited to 108 bytes, and
	// t.TempDir is named after the test.
	dir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	k := &standInKubelet{socket: filepath.Join(dir, "kubelet.sock"), srv: grpc.NewServer()}
	l, err := net.Listen("unix", k.socket)
	if err != nil {
		t.Fatal(err)
	}
	podresourcesv1.RegisterPodResourcesListerServer(k.srv, k)
	go func() { _ = k.srv.Serve(l) }()
	t.Cleanup(k.srv.Stop)
	return k
}

// List answers as the kubelet does: every pod with its containers' devices.
func (k *standInKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lists++
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

// setPods replaces the pods the kubelet reports.
func (k *standInKubelet) setPods(pods ...*podresourcesv1.PodResources) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods = pods
}

// gpuPod is a pod whose container ctr holds devices of one resource.
func gpuPod(ns, name, ctr, resource string, ids ...string) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: []*podresourcesv1.ContainerResources{{
		Name: ctr, Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}},
	}}}
}

// dialKubelet connects the agent's client to the stand-in.
func dialKubelet(t testing.TB, k *standInKubelet) PodResources {
	t.Helper()
	c, closer, err := DialPodResources(k.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	return c
}

// TestOnceAttributesEachGPUToTheContainerTheKubeletGaveItTo: four GPUs held by
// one training pod, one time-sliced replica held by another tenant, a NIC and
// a MIG slice (neither a GPU NVML lists) ignored, the rest free; one held GPU
// reads idle.
func TestOnceAttributesEachGPUToTheContainerTheKubeletGaveItTo(t *testing.T) {
	f := newFakeNVML(t)
	k := newStandInKubelet(t)
	k.setPods(
		gpuPod("team-a", "r-7f3a-0", "main", "nvidia.com/gpu", f.uuid(0), f.uuid(1), f.uuid(2), f.uuid(3)),
		gpuPod("team-b", "notebook", "lab", "nvidia.com/gpu.shared", f.uuid(4)+"::1"),
		gpuPod("team-c", "net", "main", "example.com/rdma", f.uuid(5)),
		gpuPod("team-c", "slice", "main", "nvidia.com/mig-1g.18gb", "MIG-"+f.uuid(6)),
	)
	f.set(func(f *fakeNVML) { f.util[2] = 3; f.memUsed[0] = 40 << 30 })
	a := newTestAgentWith(t, f, Deps{PodResources: dialKubelet(t, k)})
	rep, err := a.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, g := range rep.GPUs {
		held := "free"
		if g.HeldBy != nil {
			held = g.HeldBy.Namespace + "/" + g.HeldBy.Pod + "/" + g.HeldBy.Container
		}
		got[g.Index] = fmt.Sprintf("%d%% %s", *g.UtilizationPct, held)
	}
	want := map[int]string{
		0: "97% team-a/r-7f3a-0/main", 1: "97% team-a/r-7f3a-0/main", 2: "3% team-a/r-7f3a-0/main",
		3: "97% team-a/r-7f3a-0/main", 4: "97% team-b/notebook/lab", 5: "97% free", 6: "97% free", 7: "97% free",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("utilisation and holder per GPU (-want +got):\n%s", diff)
	}
	if rep.Attribution != "" {
		t.Errorf("attribution error %q, want none", rep.Attribution)
	}
	if g := rep.GPUs[0]; *g.MemoryUsedBytes != 40<<30 || *g.MemoryTotalBytes == 0 {
		t.Errorf("GPU 0 memory %d/%d, want 40 GiB of the H200's", *g.MemoryUsedBytes, *g.MemoryTotalBytes)
	}
}

// TestAGoneKubeletLeavesGPUsUnattributedAndSaysWhy: the health verdict does not
// depend on the kubelet, and no GPU is attributed to a pod that may be gone.
func TestAGoneKubeletLeavesGPUsUnattributedAndSaysWhy(t *testing.T) {
	f := newFakeNVML(t)
	k := newStandInKubelet(t)
	k.setPods(gpuPod("team-a", "r-1", "main", "nvidia.com/gpu", f.uuid(0)))
	client := dialKubelet(t, k)
	k.srv.Stop()
	a := newTestAgentWith(t, f, Deps{PodResources: client}, func(c *Config) { c.CallTimeout = 500 * time.Millisecond })
	rep, err := a.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Attribution, "kubelet PodResources List") {
		t.Errorf("attribution %q, want the List failure", rep.Attribution)
	}
	for _, g := range rep.GPUs {
		if g.HeldBy != nil {
			t.Errorf("GPU %d attributed to %+v with the kubelet gone", g.Index, *g.HeldBy)
		}
	}
	if rep.Verdict.Status != "True" {
		t.Errorf("verdict %+v, want healthy: the kubelet is not a GPU", rep.Verdict)
	}
}

// TestUtilizationSeriesFollowTheHolderAndStayOnePerGPU runs the agent while
// pods come and go on its GPUs, scraping /metrics: each GPU has exactly one
// utilisation series, labelled with its current holder.
func TestUtilizationSeriesFollowTheHolderAndStayOnePerGPU(t *testing.T) {
	f := newFakeNVML(t)
	k := newStandInKubelet(t)
	reg := prometheus.NewRegistry()
	a := newTestAgentWith(t, f, Deps{PodResources: dialKubelet(t, k), Registry: reg})
	srv := httptest.NewServer(a.Handler(reg, trustingGuard(t)))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	series := regexp.MustCompile(`(?m)^taugrid_gpu_utilization_ratio\{.*$`)
	scrape := func() []string {
		a.poll(ctx, false)
		_, body := get(t, srv.URL+"/metrics")
		out := series.FindAllString(body, -1)
		sort.Strings(out)
		return out
	}
	for round := range 20 {
		k.setPods(gpuPod("team-a", fmt.Sprintf("r-%d-0", round), "main", "nvidia.com/gpu", f.uuid(round%8)))
		got := scrape()
		if len(got) != 8 {
			t.Fatalf("round %d: %d utilisation series, want 8 (one per GPU):\n%s", round, len(got), strings.Join(got, "\n"))
		}
	}
	f.set(func(f *fakeNVML) { f.util[3] = 4 })
	k.setPods(gpuPod("team-b", "r-x-0", "main", "nvidia.com/gpu", f.uuid(3)))
	got := scrape()
	want := fmt.Sprintf(`taugrid_gpu_utilization_ratio{container="main",gpu="3",namespace="team-b",pod="r-x-0",uuid=%q} 0.04`, f.uuid(3))
	if !slices.Contains(got, want) {
		t.Errorf("no series %s in\n%s", want, strings.Join(got, "\n"))
	}
	free := fmt.Sprintf(`taugrid_gpu_utilization_ratio{container="",gpu="0",namespace="",pod="",uuid=%q} 0.97`, f.uuid(0))
	if !slices.Contains(got, free) {
		t.Errorf("no series %s (a free GPU) in\n%s", free, strings.Join(got, "\n"))
	}
}

// TestGPUsEndpointKeepsAMinuteByMinuteHistoryAndShowsATenantOnlyItsOwn: the
// agent's clock is the test's; /gpus?namespace= shows one tenant nothing of
// another's GPUs or of the minutes another tenant held a GPU.
func TestGPUsEndpointKeepsAMinuteByMinuteHistoryAndShowsATenantOnlyItsOwn(t *testing.T) {
	f := newFakeNVML(t)
	k := newStandInKubelet(t)
	clk := clocktesting.NewFakeClock(time.Date(2031, 5, 4, 10, 0, 0, 0, time.UTC))
	a := newTestAgentWith(t, f, Deps{PodResources: dialKubelet(t, k), Clock: clk},
		func(c *Config) { c.UtilizationWindow = 10 * time.Minute })
	srv := httptest.NewServer(a.Handler(prometheus.NewRegistry(), trustingGuard(t)))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	k.setPods(gpuPod("team-b", "before", "main", "nvidia.com/gpu", f.uuid(1)))
	for range 6 { // one minute held by team-b
		a.poll(ctx, false)
		clk.Step(10 * time.Second)
	}
	k.setPods(gpuPod("team-a", "r-1-0", "main", "nvidia.com/gpu", f.uuid(0), f.uuid(1)))
	for i := range 12 * 6 { // 12 minutes held by team-a: the window keeps 10
		f.set(func(f *fakeNVML) { f.util[0] = uint32(10 * (i % 2)) }) // 0%, 10%, 0%, ...
		a.poll(ctx, false)
		clk.Step(10 * time.Second)
	}
	var rep UsageReport
	_, body := get(t, srv.URL+"/gpus?namespace=team-a")
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(rep.GPUs) != 2 {
		t.Fatalf("team-a sees %d GPUs, want its 2: %s", len(rep.GPUs), body)
	}
	g0 := rep.GPUs[0]
	if n := len(g0.History); n < 10 || n > 11 {
		t.Errorf("GPU 0 has %d points, want the 10-minute window's 10 or 11", n)
	}
	for _, p := range g0.History {
		if p.Samples != 6 || p.Pct != 5 || p.Holder.Namespace != "team-a" {
			t.Errorf("GPU 0 point %+v, want 6 samples averaging 5%% held by team-a", p)
		}
	}
	_, body = get(t, srv.URL+"/gpus?namespace=team-c")
	if err := json.Unmarshal([]byte(body), &rep); err != nil || len(rep.GPUs) != 0 {
		t.Errorf("team-c, holding nothing, sees %s", body)
	}
}

// newTestAgentWith is newTestAgent with more of Deps.
func newTestAgentWith(t testing.TB, f *fakeNVML, d Deps, mutate ...func(*Config)) *Agent {
	t.Helper()
	cfg := testConfig()
	cfg.NodeName = ""
	for _, m := range mutate {
		m(&cfg)
	}
	d.NVML = f
	d.BootID = func() (string, error) { return "boot-1", nil }
	a, err := New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	a.once = true // no background XID watch: the tests drive the cycles
	return a
}
