package integration

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// firstSeen records when a watch first delivered each object satisfying ok.
type firstSeen struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func watchFirst(b *testing.B, list client.ObjectList, ns string, key func(watch.Event) (string, bool)) (*firstSeen, func()) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), list, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	fs := &firstSeen{seen: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			if k, ok := key(ev); ok {
				fs.mu.Lock()
				if _, dup := fs.seen[k]; !dup {
					fs.seen[k] = time.Now()
				}
				fs.mu.Unlock()
			}
		}
	}()
	return fs, w.Stop
}

func (f *firstSeen) wait(b *testing.B, k string, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		t, ok := f.seen[k]
		f.mu.Unlock()
		if ok {
			return t
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("%s not seen within %s", k, timeout)
	return time.Time{}
}

// BenchmarkNudgeToRun measures, over 100 runs pushed one after another as run
// refs, the time from the webhook nudge to the TauRun created, to its Job
// created, and to Kueue admitting it. Each Job is then completed so quota is
// free for the next. The controller is the real manager on the real API
// server and Kueue; the git server is real.
func BenchmarkNudgeToRun(b *testing.B) {
	f := newRunFixture(b, "rb1")
	m := startManager(b)
	defer m.stop()
	seen, stopRuns := watchFirst(b, &taugridv1.TauRunList{}, f.ns, func(ev watch.Event) (string, bool) {
		r, ok := ev.Object.(*taugridv1.TauRun)
		return r.Spec.Trigger.Ref, ok
	})
	defer stopRuns()
	jobs, stopJobs := watchFirst(b, &batchv1.JobList{}, f.ns, func(ev watch.Event) (string, bool) {
		j, ok := ev.Object.(*batchv1.Job)
		return j.Name, ok
	})
	defer stopJobs()
	admitted, stopWl := watchFirst(b, &kueue.WorkloadList{}, f.ns, func(ev watch.Event) (string, bool) {
		wl, ok := ev.Object.(*kueue.Workload)
		if !ok || len(wl.OwnerReferences) == 0 || !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			return "", false
		}
		return wl.OwnerReferences[0].Name, true
	})
	defer stopWl()

	const n = 100
	var toRun, toJob, toAdmit []time.Duration
	for i := range n {
		ref := f.research.runRef(fmt.Sprintf("b-%03d", i), "target: default\n")
		start := time.Now()
		if err := m.nudger.NudgeRepository(context.Background(), f.repo.Namespace, f.repo.Name, 0); err != nil {
			b.Fatal(err)
		}
		created := seen.wait(b, ref, 30*time.Second)
		name := runs.RunName(f.repo.Name, ref, f.research.git("-C", f.research.work, "rev-parse", "HEAD"), "default")
		job := render.WorkloadName(name, 1)
		jobAt := jobs.wait(b, job, 30*time.Second)
		admitAt := admitted.wait(b, job, 30*time.Second)
		toRun, toJob, toAdmit = append(toRun, created.Sub(start)), append(toJob, jobAt.Sub(start)), append(toAdmit, admitAt.Sub(start))
		completeJob(b, f.ns, job)
	}
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"run", toRun}, {"job", toJob}, {"admitted", toAdmit}} {
		b.ReportMetric(ms(pct(m.ds, 50)), "nudge-to-"+m.name+"-p50-ms")
		b.ReportMetric(ms(pct(m.ds, 99)), "nudge-to-"+m.name+"-p99-ms")
	}
}

// BenchmarkSubmissions measures sustained submissions: 200 TauRuns waiting
// when the controller starts (as after a burst of run refs, or an outage),
// timed from the start until every one has its Job.
func BenchmarkSubmissions(b *testing.B) {
	f := newRunFixture(b, "rb2")
	head := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	const n = 200
	for i := range n {
		ref := fmt.Sprintf("refs/tau/runs/s-%03d", i)
		run := &taugridv1.TauRun{
			ObjectMeta: metav1.ObjectMeta{Name: runs.RunName(f.repo.Name, ref, head, "default"), Namespace: f.ns},
			Spec: taugridv1.TauRunSpec{Repository: f.repo.Name, Commit: head, Target: "default",
				Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: "refs/heads/main"}},
		}
		if err := k8s.Create(context.Background(), run); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	m := startManager(b)
	defer m.stop()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var list batchv1.JobList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) >= n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d Jobs after 5 minutes", len(list.Items), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	b.ReportMetric(float64(n)/took.Seconds(), "submissions/s")
	if mfs, err := crmetrics.Registry.Gather(); err == nil {
		for _, mf := range mfs {
			if mf.GetName() != "controller_runtime_reconcile_time_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				b.Logf("%v: %d reconciles, %.3f s in all", m.GetLabel(), h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkControllerMemory measures the controller's heap with 10,000
// TauRuns in the cluster (TAU_BENCH_RUNS overrides the count): the runs are
// created finished, the manager starts and syncs its caches, and the heap
// in use after a GC is compared with the heap before the manager started.
func BenchmarkControllerMemory(b *testing.B) {
	n := 10_000
	if v := os.Getenv("TAU_BENCH_RUNS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	f := newRunFixture(b, "rb3")
	head := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				createFinishedRun(b, f, head, i)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := startManager(b)
	defer m.stop()
	time.Sleep(5 * time.Second) // let every run be reconciled once
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "controller-heap-MiB")
	b.ReportMetric(float64(n), "TauRuns")
}

func createFinishedRun(b *testing.B, f *runFixture, head string, i int) {
	ref := fmt.Sprintf("refs/tau/runs/m-%05d", i)
	run := &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Name: runs.RunName(f.repo.Name, ref, head, "default"), Namespace: f.ns,
			Labels: map[string]string{render.LabelRepository: f.repo.Name, taugridv1.LabelRefHash: runs.RefHash(ref), taugridv1.LabelCommit: head}},
		Spec: taugridv1.TauRunSpec{Repository: f.repo.Name, Commit: head, Target: "default",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: ref, Requester: "bench@example.com"}},
	}
	if err := k8s.Create(context.Background(), run); err != nil {
		b.Error(err)
		return
	}
	now := metav1.Now()
	run.Status = taugridv1.TauRunStatus{Phase: taugridv1.PhaseSucceeded, Message: "succeeded", TauFile: "tau.yaml",
		Phases:   []taugridv1.PhaseTransition{{Phase: taugridv1.PhasePending, Time: now}, {Phase: taugridv1.PhaseQueued, Time: now}, {Phase: taugridv1.PhaseSucceeded, Time: now}},
		Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: render.WorkloadName(run.Name, 1), Queue: "runs", Admitted: true},
		Attempts: []taugridv1.Attempt{{Number: 1, Workload: render.WorkloadName(run.Name, 1)}}}
	if err := k8s.Status().Update(context.Background(), run); err != nil {
		b.Error(err)
	}
}
