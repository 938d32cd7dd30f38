package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/bits"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// runTimes is what the watches saw of one run, each the first time seen.
type runTimes struct {
	requested, created, admittedRun, runRunning, runDone time.Time
	clusterTimes
	phase   taugridv1.RunPhase
	message string // the TauRun's last status message
	writes  writeLog
}

// clusterTimes is what the watches saw of a run's Job, Workload and pod,
// each the first time seen: where a run waits between them says whose
// turn it is (see stages.go).
type clusterTimes struct {
	job, jobStarted, jobDone    time.Time // created; unsuspended by Kueue; Complete or Failed
	admittedWl, wlFinished      time.Time // Kueue's Workload admitted; Finished
	podCreated, podScheduled    time.Time // by the Job controller; bound by the scheduler
	podRunning, podDue, podDone time.Time // kwok's Running; when the harness is to end it; Succeeded or Failed
}

// recorder keeps the times, keyed by TauRun name once the run exists and
// by request (namespace/repository + ref) before.
type recorder struct {
	mu        sync.Mutex
	runs      map[string]*runTimes    // by TauRun name
	requested map[string]time.Time    // by namespace/repository ref
	byJob     map[string]string       // Job name -> TauRun name
	early     map[string]clusterTimes // by Job name: workload or pod seen before the run named it
	ended     []string                // TauRun names in the order they ended
}

func newRecorder() *recorder {
	return &recorder{runs: map[string]*runTimes{}, requested: map[string]time.Time{}, byJob: map[string]string{}, early: map[string]clusterTimes{}}
}

func first(t *time.Time, now time.Time) {
	if t.IsZero() {
		*t = now
	}
}

func (r *recorder) request(key string, at time.Time) {
	r.mu.Lock()
	r.requested[key] = at
	r.mu.Unlock()
}

// run records a TauRun event.
func (r *recorder) run(tr *taugridv1.TauRun, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.runs[tr.Name]
	if t == nil {
		t = &runTimes{created: now, requested: r.requested[tr.Namespace+"/"+tr.Spec.Repository+" "+tr.Spec.Trigger.Ref]}
		r.runs[tr.Name] = t
		job := render.WorkloadName(tr.Name, 1)
		r.byJob[job] = tr.Name
		if e, ok := r.early[job]; ok {
			t.clusterTimes = e
			delete(r.early, job)
		}
	}
	t.phase, t.message = tr.Status.Phase, tr.Status.Message
	t.writes.note(tr)
	switch tr.Status.Phase {
	case taugridv1.PhaseAdmitted:
		first(&t.admittedRun, now)
	case taugridv1.PhaseRunning:
		first(&t.admittedRun, now)
		first(&t.runRunning, now)
	case taugridv1.PhaseSucceeded, taugridv1.PhaseFailed, taugridv1.PhaseCancelled:
		first(&t.admittedRun, now)
		first(&t.runRunning, now)
		if t.runDone.IsZero() {
			t.runDone = now
			r.ended = append(r.ended, tr.Name)
		}
	}
}

// job records something seen of a run's Job, its Workload or its pod.
func (r *recorder) job(name string, now time.Time, set func(*clusterTimes, time.Time)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run, ok := r.byJob[name]; ok {
		set(&r.runs[run].clusterTimes, now)
		return
	}
	e := r.early[name]
	set(&e, now)
	r.early[name] = e
}

// watchAll follows TauRuns, Jobs, Workloads and TauGrid's pods in every
// namespace until ctx ends; a watch the server closes is opened again.
func (h *harness) watchAll(ctx context.Context, wc client.WithWatch) {
	managed := client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}
	go h.watches.follow(ctx, wc, "TauRuns", &taugridv1.TauRunList{}, nil, func(ev watch.Event, now time.Time) {
		if tr, ok := ev.Object.(*taugridv1.TauRun); ok {
			h.rec.run(tr, now)
		}
	})
	go h.watches.follow(ctx, wc, "Jobs", &batchv1.JobList{}, managed, func(ev watch.Event, now time.Time) {
		j, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		done := slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
			return (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue
		})
		started := j.Spec.Suspend == nil || !*j.Spec.Suspend
		h.rec.job(j.Name, now, func(t *clusterTimes, now time.Time) {
			first(&t.job, now)
			if started {
				first(&t.jobStarted, now)
			}
			if done {
				first(&t.jobDone, now)
			}
		})
	})
	go h.watches.follow(ctx, wc, "Workloads", &kueue.WorkloadList{}, nil, func(ev watch.Event, now time.Time) {
		wl, ok := ev.Object.(*kueue.Workload)
		if !ok || len(wl.OwnerReferences) == 0 {
			return
		}
		admitted := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
		finished := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
		if !admitted && !finished {
			return
		}
		h.rec.job(wl.OwnerReferences[0].Name, now, func(t *clusterTimes, now time.Time) {
			if admitted {
				first(&t.admittedWl, now)
			}
			if finished {
				first(&t.wlFinished, now)
			}
		})
	})
	go h.watches.follow(ctx, wc, "pods", &corev1.PodList{}, managed, func(ev watch.Event, now time.Time) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.DeletionTimestamp != nil {
			return
		}
		h.rec.job(p.Labels["job-name"], now, func(t *clusterTimes, now time.Time) {
			first(&t.podCreated, now)
			if p.Spec.NodeName != "" {
				first(&t.podScheduled, now)
			}
			switch p.Status.Phase {
			case corev1.PodRunning:
				if t.podRunning.IsZero() {
					t.podRunning = now
					t.podDue = h.complete(p, now)
				}
			case corev1.PodSucceeded, corev1.PodFailed:
				first(&t.podDone, now)
			}
		})
	})
}

// follow watches list, with bookmarks, and hands each event to f with the
// time it arrived. The first watch starts with the objects there are (an
// added event each; the harness starts it before the runs are requested). A watch the server ends is opened again from
// the last resourceVersion seen, so nothing is missed or sent twice; only
// a resourceVersion the server no longer keeps (410 Gone) starts it over
// from the objects as they are. Every restart is counted under name: a
// watch opened again from nothing replays every object, late, and a
// watcher the API server finds too slow is closed by it.
func (s *watchStats) follow(ctx context.Context, wc client.WithWatch, name string, list client.ObjectList, opts client.ListOption, f func(watch.Event, time.Time)) {
	rv := ""
	for ctx.Err() == nil {
		lo := []client.ListOption{&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}}}
		if opts != nil {
			lo = append(lo, opts)
		}
		w, err := wc.Watch(ctx, list, lo...)
		if err != nil {
			s.count(name, func(c *watchCount) { c.failed++ })
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			switch ev.Type {
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
					rv = ""
					s.count(name, func(c *watchCount) { c.gone++ })
				}
				continue
			case watch.Bookmark:
			default:
				f(ev, now)
				s.count(name, func(c *watchCount) { c.saw(ev.Object, now) })
			}
			if m, err := apimeta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				rv = m.GetResourceVersion()
			}
		}
		w.Stop()
		s.count(name, func(c *watchCount) { c.ended++ })
	}
}

// watchStats counts each of the harness's watches' events and restarts.
type watchStats struct {
	mu sync.Mutex
	by map[string]*watchCount
}

// watchCount is one watch's events and restarts since the last report;
// late is how many events came more than lateEvent after the last write
// their object records (its managedFields, kept to the second), and
// latest the latest of them: a watch that falls behind would make the
// harness's lags its own.
type watchCount struct {
	events, ended, gone, failed, late int
	latest                            time.Duration
}

const lateEvent = 5 * time.Second

func (c *watchCount) saw(o runtime.Object, now time.Time) {
	c.events++
	m, err := apimeta.Accessor(o)
	if err != nil {
		return
	}
	var written time.Time
	for _, f := range m.GetManagedFields() {
		if f.Time != nil && f.Time.After(written) {
			written = f.Time.Time
		}
	}
	if d := now.Sub(written); !written.IsZero() && d > lateEvent+time.Second {
		c.late++
		c.latest = max(c.latest, d)
	}
}

func (s *watchStats) count(name string, f func(*watchCount)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*watchCount{}
	}
	c := s.by[name]
	if c == nil {
		c = &watchCount{}
		s.by[name] = c
	}
	f(c)
}

// take reports the counts since the last take, and forgets them.
func (s *watchStats) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(s.by)) {
		c := s.by[name]
		part := fmt.Sprintf("%s %d events (%d over %s after their write, the latest %s)", name, c.events, c.late, lateEvent, c.latest.Round(time.Second))
		if c.ended+c.gone+c.failed > 0 {
			part += fmt.Sprintf(", ended by the server %d, too old to resume %d, failed to open %d", c.ended, c.gone, c.failed)
		}
		parts = append(parts, part)
	}
	s.by = nil
	return strings.Join(parts, "; ")
}

// runTime is a pod's run time, spread evenly between the configured
// bounds by a hash of its name, so a rerun of the same size spreads alike.
func (h *harness) runTime(name string) time.Duration {
	f := fnv.New32a()
	f.Write([]byte(name))
	span := uint64(h.cfg.maxRun - h.cfg.minRun)
	at, _ := bits.Mul64(uint64(f.Sum32())<<32, span) // span * hash / 2^32, without overflow
	return h.cfg.minRun + time.Duration(at)
}

// complete ends a running pod after its run time, as its kubelet would
// report a training process that exited 0: kwok runs pods, the harness
// decides when they end. It returns when the pod is due to end.
func (h *harness) complete(p *corev1.Pod, runningAt time.Time) time.Time {
	key := client.ObjectKeyFromObject(p)
	due := runningAt.Add(h.runTime(p.Name))
	time.AfterFunc(time.Until(due), func() {
		h.exitsDue.Add(1)
		h.exits <- key
	})
	return due
}

// exiter writes pod exits on the latest copy of each pod (the Job
// controller writes pods too). The harness runs exiters enough that pods
// end when due: each node's kubelet reports its own pods, so a real
// cluster's exits do not wait in one queue (4 exiters at this API
// server's 0.5 s a request ended at most about 4 pods a second).
func (h *harness) exiter(ctx context.Context) {
	for key := range h.exits {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &corev1.Pod{}
			if err := h.k8s.Get(ctx, key, cur); err != nil {
				return err
			}
			now := metav1.Now()
			cur.Status.Phase = corev1.PodSucceeded
			for i := range cur.Status.ContainerStatuses {
				cs := &cur.Status.ContainerStatuses[i]
				cs.Ready, cs.Started = false, new(false)
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}
			}
			for i := range cur.Status.Conditions {
				if c := &cur.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
					c.Status = corev1.ConditionFalse
				}
			}
			return h.k8s.Status().Update(ctx, cur)
		})
		if err != nil && ctx.Err() == nil {
			h.logf("ending pod %s: %v", key, err)
		}
		h.exitsDue.Add(-1)
	}
}
