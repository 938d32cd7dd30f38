package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkHarnessWarmStart measures Start (etcd, kube-apiserver, CRDs, Kueue)
// plus Stop, with the binaries already built.
func BenchmarkHarnessWarmStart(b *testing.B) {
	needsControlPlane(b)
	var starts []time.Duration
	for b.Loop() {
		begin := time.Now()
		env, err := Start(context.Background(), Options{Kueue: true})
		if err != nil {
			b.Fatal(err)
		}
		starts = append(starts, time.Since(begin))
		if err := env.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ms(percentile(starts, 50)), "start-p50-ms")
}

const admissionJobs = 100

// BenchmarkJobAdmission measures how long Kueue takes to admit (unsuspend) a
// suspended Job, from just before Create to the watch event showing it unsuspended:
// one Job at a time (sequential), and 100 created at once (burst).
func BenchmarkJobAdmission(b *testing.B) {
	env := sharedEnv(b)
	for _, mode := range []string{"sequential", "burst"} {
		b.Run(mode, func(b *testing.B) {
			var all []time.Duration
			for b.Loop() {
				tn := bigTenant(b, env.Client)
				all = append(all, admitJobs(b, env, tn, mode == "burst")...)
			}
			b.ReportMetric(ms(percentile(all, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(all, 99)), "p99-ms")
		})
	}
}

// bigTenant is a tenant whose quota fits all the benchmark's Jobs at once.
func bigTenant(b *testing.B, c client.Client) tenant {
	tn := newTenant()
	cq := tn.clusterQueue(admissionJobs)
	cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse(fmt.Sprint(admissionJobs))
	create(b, c, tn.namespace(), tn.resourceFlavor(), cq, tn.localQueue())
	return tn
}

// admitJobs creates admissionJobs Jobs, one after the other's admission or all at
// once, and returns each one's time to admission.
func admitJobs(b *testing.B, env *Env, tn tenant, burst bool) []time.Duration {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &batchv1.JobList{}, client.InNamespace(tn.Namespace))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	admitted := admissionTimes(w)

	var mu sync.Mutex
	created := map[string]time.Time{}
	submit := func(name string) {
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		create(b, env.Client, tn.suspendedJob(name, 1))
	}
	var latencies []time.Duration
	for i := range admissionJobs {
		name := fmt.Sprintf("job-%d", i)
		submit(name)
		if burst {
			continue
		}
		latencies = append(latencies, waitAdmitted(b, admitted, name).Sub(created[name]))
	}
	if burst {
		for i := range admissionJobs {
			name := fmt.Sprintf("job-%d", i)
			latencies = append(latencies, waitAdmitted(b, admitted, name).Sub(created[name]))
		}
	}
	return latencies
}

// admissionTimes reports, per Job name, when the watch first saw it unsuspended.
func admissionTimes(w watch.Interface) *sync.Map {
	var seen sync.Map // name -> time.Time
	go func() {
		for ev := range w.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if ok && job.Spec.Suspend != nil && !*job.Spec.Suspend {
				seen.LoadOrStore(job.Name, time.Now())
			}
		}
	}()
	return &seen
}

func waitAdmitted(b *testing.B, admitted *sync.Map, name string) time.Time {
	deadline := time.Now().Add(admissionTimeout)
	for time.Now().Before(deadline) {
		if at, ok := admitted.Load(name); ok {
			return at.(time.Time)
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("job %s not admitted within %s", name, admissionTimeout)
	return time.Time{}
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
