package sealing

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// attemptJob is the attempt's Job, rendered under policyHead.
func attemptJob() *batchv1.Job {
	return builders.MakeJob("r-1", ns).JobUID("job-uid-1").RenderedUnder(policyHead).Condition(batchv1.JobComplete, "", "").Obj()
}

// attemptWorkload is Kueue's Workload of the attempt's Job, admitted.
func attemptWorkload() *kueue.Workload {
	return builders.MakeWorkload("job-r-1-abcde", ns).OwnedByJob(attemptJob()).AdmittedTo("gpu", "main", "nvidia.com/gpu", "h200").
		WorkloadCondition(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "quota reserved in gpu", started.Add(-time.Second)).
		WorkloadCondition(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted by gpu", started).Obj()
}

// attemptPod is the attempt's pod on node gpu-1, its main container exited
// with code.
func attemptPod(code int32) *corev1.Pod {
	return builders.MakeAttemptPod("r-1-xyz12", ns, "r", 1).OnNode("gpu-1").Exited(code).
		ExitMessage("Completed", `TAU_METRIC {"final_loss": 0.05}`, started, ended).Obj()
}

// gpuNode is node gpu-1, its GPUs status since.
func gpuNode(status corev1.ConditionStatus, since time.Time) *corev1.Node {
	return builders.MakeGPUNode("gpu-1").GPUHealthSince(status, "Checked", "8 GPUs checked", since).Obj()
}

func TestTheBundleRecordsWhatTheClusterStillShows(t *testing.T) {
	healthy := gpuNode(corev1.ConditionTrue, started.Add(-time.Hour))
	notes := func(r *evidence.Record) any { return r.Notes }
	nodes := func(r *evidence.Record) any { return r.Nodes }
	logs := func(r *evidence.Record) any { return r.Logs }
	cases := map[string]struct {
		objs []client.Object
		logs fakeLogs
		got  func(*evidence.Record) any
		want any
	}{
		"everything still there: nothing is noted": {
			objs: []client.Object{attemptJob(), attemptWorkload(), attemptPod(0), healthy},
			got:  notes, want: []string(nil)},
		"Kueue's timeline: its queue, admission, flavors and conditions in order": {
			objs: []client.Object{attemptJob(), attemptWorkload()},
			got:  func(r *evidence.Record) any { return r.Kueue },
			want: &evidence.KueueTimeline{Workload: "job-r-1-abcde", Queue: "runs", ClusterQueue: "gpu",
				Flavors: map[string]string{"main/nvidia.com/gpu": "h200"},
				Conditions: []evidence.Condition{
					{Type: "QuotaReserved", Status: "True", Reason: "QuotaReserved", Message: "quota reserved in gpu", Time: started.Add(-time.Second)},
					{Type: "Admitted", Status: "True", Reason: "Admitted", Message: "admitted by gpu", Time: started}}}},
		"Kueue's admission checks: each state and message, in name order, a secret masked": {
			objs: []client.Object{attemptJob(), builders.MakeWorkload("job-r-1-abcde", ns).OwnedByJob(attemptJob()).
				AdmissionCheck("tau-policy", kueue.CheckStateReady, "the policy allows it", started).
				AdmissionCheck("budget", kueue.CheckStateRetry, "over budget; HF_TOKEN="+hfToken, started.Add(-time.Second)).Obj()},
			got: func(r *evidence.Record) any { return r.Kueue.AdmissionChecks },
			want: []evidence.AdmissionCheck{
				{Name: "budget", State: "Retry", Message: "over budget; HF_TOKEN=****", Time: started.Add(-time.Second)},
				{Name: "tau-policy", State: "Ready", Message: "the policy allows it", Time: started}}},
		"how each container ended": {
			objs: []client.Object{attemptJob(), attemptWorkload(), attemptPod(3), healthy},
			got:  func(r *evidence.Record) any { return r.Pods },
			want: []evidence.PodRecord{{Name: "r-1-xyz12", Node: "gpu-1", Phase: "Failed", Containers: []evidence.ContainerRecord{{
				Name: "main", ExitCode: ptr.To[int32](3), Reason: "Completed", Message: `TAU_METRIC {"final_loss": 0.05}`,
				Started: ptr.To(started), Finished: ptr.To(ended)}}}}},
		"a node healthy throughout": {
			objs: []client.Object{attemptJob(), attemptPod(0), healthy},
			got:  nodes,
			want: []evidence.NodeRecord{{Name: "gpu-1", GPUHealthyAtStart: "True",
				GPUHealthy: &evidence.Condition{Type: "TauGPUHealthy", Status: "True", Reason: "Checked", Message: "8 GPUs checked", Time: started.Add(-time.Hour)}}}},
		"a node whose GPUs failed during the attempt was healthy at its start": {
			objs: []client.Object{attemptJob(), attemptPod(0), gpuNode(corev1.ConditionFalse, started.Add(time.Minute))},
			got:  nodes,
			want: []evidence.NodeRecord{{Name: "gpu-1", GPUHealthyAtStart: "True (turned False during the attempt)",
				GPUHealthy: &evidence.Condition{Type: "TauGPUHealthy", Status: "False", Reason: "Checked", Message: "8 GPUs checked", Time: started.Add(time.Minute)}}}},
		"a node the agent never reported on": {
			objs: []client.Object{attemptJob(), attemptPod(0), builders.MakeGPUNode("gpu-1").Obj()},
			got:  nodes, want: []evidence.NodeRecord{{Name: "gpu-1", GPUHealthyAtStart: "not reported"}}},
		"a node gone": {
			objs: []client.Object{attemptJob(), attemptPod(0)},
			got:  nodes, want: []evidence.NodeRecord{{Name: "gpu-1", Gone: true, GPUHealthyAtStart: "not reported"}}},
		"the Job gone: noted, no Kueue timeline looked for": {
			objs: []client.Object{attemptPod(0), healthy},
			got:  notes, want: []string{"workload r-1 is gone"}},
		"Kueue's Workload gone": {
			objs: []client.Object{attemptJob(), attemptPod(0), healthy},
			got:  notes, want: []string{"Kueue's workload for r-1 is gone"}},
		"no pod left": {
			objs: []client.Object{attemptJob(), attemptWorkload()},
			got:  notes, want: []string{"no pod of attempt 1 is left to inspect"}},
		"a pod of another attempt is not this one's": {
			objs: []client.Object{attemptJob(), attemptWorkload(), builders.MakeAttemptPod("r-2-abcde", ns, "r", 2).Exited(0).Obj()},
			got:  notes, want: []string{"no pod of attempt 1 is left to inspect"}},
		"the events about the run, its Job, Workload and pods, oldest first": {
			objs: []client.Object{attemptJob(), attemptWorkload(), attemptPod(0), healthy,
				builders.MakeEventAbout("e1", ns, "Pod", "r-1-xyz12", "Normal", "Started", "started container main", started.Add(time.Second)),
				builders.MakeEventAbout("e2", ns, "Workload", "job-r-1-abcde", "Normal", "Admitted", "admitted by gpu", started),
				builders.MakeEventAbout("e3", ns, "TauRun", "r", "Normal", "Succeeded", "the run succeeded", ended),
				builders.MakeEventAbout("e4", ns, "Job", "r-1", "Normal", "Completed", "Job completed", ended.Add(-time.Second)),
				builders.MakeEventAbout("e5", ns, "Pod", "other-pod", "Warning", "BackOff", "not this run's", started)},
			got: func(r *evidence.Record) any {
				var out []string
				for _, e := range r.Events {
					out = append(out, e.Object+" "+e.Reason+": "+e.Message)
				}
				return out
			},
			want: []string{"Workload/job-r-1-abcde Admitted: admitted by gpu", "Pod/r-1-xyz12 Started: started container main",
				"Job/r-1 Completed: Job completed", "TauRun/r Succeeded: the run succeeded"}},
		"a container's log tail": {
			objs: []client.Object{attemptJob(), attemptPod(0), healthy}, logs: fakeLogs{"r-1-xyz12/main": "epoch 1\nepoch 2\n"},
			got: logs, want: []evidence.LogTail{{Pod: "r-1-xyz12", Container: "main", Artifact: "logs/r-1-xyz12/main.log", Bytes: 16}}},
		"a log that cannot be read is said so": {
			objs: []client.Object{attemptJob(), attemptPod(0), healthy}, logs: fakeLogs{},
			got: logs, want: []evidence.LogTail{{Pod: "r-1-xyz12", Container: "main", Artifact: "logs/r-1-xyz12/main.log",
				Error: "log not available: container main of pod r-1-xyz12 has no log"}}},
		"the source fetch's log from its termination message, no log read for it": {
			objs: []client.Object{attemptJob(), healthy, builders.MakeAttemptPod("r-1-xyz12", ns, "r", 1).OnNode("gpu-1").Exited(0).
				SourceFetched(0, "unpacked 3 entries of "+hfToken+" into /tau/source\n").Obj()},
			logs: fakeLogs{"r-1-xyz12/main": "epoch 1\n"}, // none for tau-source: reading it fails
			got:  logs, want: []evidence.LogTail{
				{Pod: "r-1-xyz12", Container: "tau-source", Artifact: "logs/r-1-xyz12/tau-source.log", Bytes: 44, From: evidence.FromTerminationMessage}, // the Secret masked: 66 bytes as written,
				{Pod: "r-1-xyz12", Container: "main", Artifact: "logs/r-1-xyz12/main.log", Bytes: 8}}},
		"a source fetch that failed is read from its log": {
			objs: []client.Object{attemptJob(), healthy, builders.MakeAttemptPod("r-1-xyz12", ns, "r", 1).OnNode("gpu-1").Exited(0).
				SourceFetched(1, "the archive's sha256 is not the one asked for").Obj()},
			logs: fakeLogs{"r-1-xyz12/main": "epoch 1\n", "r-1-xyz12/tau-source": "Error: refusing to unpack\n"},
			got:  logs, want: []evidence.LogTail{
				{Pod: "r-1-xyz12", Container: "tau-source", Artifact: "logs/r-1-xyz12/tau-source.log", Bytes: 26},
				{Pod: "r-1-xyz12", Container: "main", Artifact: "logs/r-1-xyz12/main.log", Bytes: 8}}},
		"a source fetch that wrote no termination message (an earlier image) is read from its log": {
			objs: []client.Object{attemptJob(), healthy, builders.MakeAttemptPod("r-1-xyz12", ns, "r", 1).OnNode("gpu-1").Exited(0).
				SourceFetched(0, "").Obj()},
			logs: fakeLogs{"r-1-xyz12/main": "epoch 1\n", "r-1-xyz12/tau-source": "unpacked 3 entries\n"},
			got:  logs, want: []evidence.LogTail{
				{Pod: "r-1-xyz12", Container: "tau-source", Artifact: "logs/r-1-xyz12/tau-source.log", Bytes: 19},
				{Pod: "r-1-xyz12", Container: "main", Artifact: "logs/r-1-xyz12/main.log", Bytes: 8}}},
		"metrics from the log and the termination message": {
			objs: []client.Object{attemptJob(), attemptPod(0), healthy}, logs: fakeLogs{"r-1-xyz12/main": "TAU_METRIC {\"step\": 1, \"loss\": 0.5}\nTAU_METRIC oops\n"},
			got: func(r *evidence.Record) any {
				return []int{r.Metrics.Records, r.Metrics.Skipped, r.Metrics.Keys["final_loss"].Count}
			},
			want: []int{2, 1, 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newSealWorld(t, tc.logs, append([]client.Object{researchRepo(), hfSecret(), sealingRun().Obj()}, tc.objs...)...)
			if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
				t.Fatal(err)
			}
			_, rec, _ := w.bundle(t, 1)
			if d := cmp.Diff(tc.want, tc.got(rec)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// eventLists counts the event lists read through it. With pages > 1 a
// namespace-wide list is paged as the API server pages a namespace with
// more events than the page: the items on the first page, remaining
// (nil: not counted) said there, empty pages after.
type eventLists struct {
	client.Reader
	pages     int
	remaining *int64
	expired   bool // a page after the first is refused, as an expired continue token is
	n         int
}

func (r *eventLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if lo := (&client.ListOptions{}).ApplyOptions(opts); r.expired && lo.Continue != "" {
		r.n++
		return apierrors.NewResourceExpired("the continue token is too old")
	}
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	l, ok := list.(*corev1.EventList)
	if !ok {
		return nil
	}
	r.n++
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if r.pages <= 1 || lo.FieldSelector != nil {
		return nil
	}
	page := 0
	if lo.Continue != "" {
		page, _ = strconv.Atoi(lo.Continue)
		l.Items = nil
	} else {
		l.RemainingItemCount = r.remaining
	}
	if page+1 < r.pages {
		l.Continue = strconv.Itoa(page + 1)
	}
	return nil
}

func TestANamespacesEventsArePagedUnlessOneListPerObjectIsFewer(t *testing.T) {
	for name, tc := range map[string]struct {
		pages     int
		remaining *int64
		expired   bool
		lists     int
	}{
		"a quiet namespace: one page":   {pages: 1, lists: 1},
		"3 pages, fewer than 4 objects": {pages: 3, remaining: ptr.To[int64](2*eventsPage - 10), lists: 3},
		// the first page, then the run, its Job, Workload and pod
		"9 pages":              {pages: 9, remaining: ptr.To[int64](8 * eventsPage), lists: 5},
		"the rest not counted": {pages: 2, lists: 5},
	} {
		w := newSealWorld(t, nil, researchRepo(), hfSecret(), sealingRun().Obj(), attemptJob(), attemptWorkload(), attemptPod(0),
			gpuNode(corev1.ConditionTrue, started.Add(-time.Hour)),
			builders.MakeEventAbout("e1", ns, "Pod", "r-1-xyz12", "Normal", "Started", "started container main", started.Add(time.Second)),
			builders.MakeEventAbout("e2", ns, "TauRun", "r", "Normal", "Succeeded", "the run succeeded", ended),
			builders.MakeEventAbout("e3", ns, "Pod", "other-pod", "Warning", "BackOff", "not this run's", started))
		counted := &eventLists{Reader: w.c, pages: tc.pages, remaining: tc.remaining, expired: tc.expired}
		w.e.APIReader = counted
		if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
			t.Fatal(err)
		}
		_, rec, _ := w.bundle(t, 1)
		var got []string
		for _, e := range rec.Events {
			got = append(got, e.Object+" "+e.Reason)
		}
		if d := cmp.Diff([]string{"Pod/r-1-xyz12 Started", "TauRun/r Succeeded"}, got); d != "" {
			t.Errorf("%s: events (-want +got):\n%s", name, d)
		}
		if counted.n != tc.lists {
			t.Errorf("%s: %d event lists, want %d", name, counted.n, tc.lists)
		}
	}
}

// A seal reads its events from the book once the book has listed the
// cluster's, and sends no list; before that, it lists them as without one.
func TestASealReadsItsEventsFromTheBookOnceItHasListedThem(t *testing.T) {
	evs := []client.Object{
		builders.MakeEventAbout("r-1-xyz12.1", ns, "Pod", "r-1-xyz12", "Normal", "Started", "started container main", started.Add(time.Second)),
		builders.MakeEventAbout("r.1", ns, "TauRun", "r", "Normal", "Succeeded", "the run succeeded", ended),
		builders.MakeEventAbout("other-pod.1", ns, "Pod", "other-pod", "Warning", "BackOff", "not this run's", started)}
	for name, tc := range map[string]struct {
		synced bool
		lists  int
	}{
		"the book has listed the events": {synced: true, lists: 0},
		"the book has not listed them":   {synced: false, lists: 1},
	} {
		w := newSealWorld(t, nil, append([]client.Object{researchRepo(), hfSecret(), sealingRun().Obj(), attemptJob(), attemptWorkload(),
			attemptPod(0), gpuNode(corev1.ConditionTrue, started.Add(-time.Hour))}, evs...)...)
		counted := &eventLists{Reader: w.c}
		w.e.APIReader, w.e.Events = counted, &EventBook{}
		if tc.synced {
			var objs []any
			for _, e := range evs {
				objs = append(objs, e)
			}
			if err := (bookStore{w.e.Events}).Replace(objs, "1"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
			t.Fatal(err)
		}
		_, rec, _ := w.bundle(t, 1)
		want := []evidence.EventRecord{
			{Time: started.Add(time.Second).UTC(), Type: "Normal", Reason: "Started", Object: "Pod/r-1-xyz12", Message: "started container main", Count: 1},
			{Time: ended.UTC(), Type: "Normal", Reason: "Succeeded", Object: "TauRun/r", Message: "the run succeeded", Count: 1}}
		if d := cmp.Diff(want, rec.Events, cmpopts.EquateApproxTime(time.Second)); d != "" {
			t.Errorf("%s: events (-want +got):\n%s", name, d)
		}
		if counted.n != tc.lists {
			t.Errorf("%s: %d event lists, want %d", name, counted.n, tc.lists)
		}
	}
}

// Once an attempt is sealed, the book holds no more of the events about
// its Job, Workload and pods, which no bundle reads again; it still holds
// the run's own (a later attempt's bundle records them) and every other
// object's.
func TestASealedAttemptsEventsLeaveTheBook(t *testing.T) {
	evs := []any{
		builders.MakeEventAbout("r-1-xyz12.1", ns, "Pod", "r-1-xyz12", "Normal", "Started", "started container main", started.Add(time.Second)),
		builders.MakeEventAbout("r-1.1", ns, "Job", "r-1", "Normal", "Completed", "Job completed", ended),
		builders.MakeEventAbout("job-r-1-abcde.1", ns, "Workload", "job-r-1-abcde", "Normal", "Admitted", "admitted by gpu", started),
		builders.MakeEventAbout("r.1", ns, "TauRun", "r", "Normal", "Succeeded", "the run succeeded", ended),
		builders.MakeEventAbout("other-pod.1", ns, "Pod", "other-pod", "Warning", "BackOff", "not this run's", started)}
	w := newSealWorld(t, nil, researchRepo(), hfSecret(), sealingRun().Obj(), attemptJob(), attemptWorkload(),
		attemptPod(0), gpuNode(corev1.ConditionTrue, started.Add(-time.Hour)))
	w.e.Events = &EventBook{}
	if err := (bookStore{w.e.Events}).Replace(evs, "1"); err != nil {
		t.Fatal(err)
	}
	held := func() []string {
		var out []string
		for _, r := range w.e.Events.About(ns, map[string]bool{"r": true, "r-1": true, "job-r-1-abcde": true, "r-1-xyz12": true, "other-pod": true}) {
			out = append(out, r.Object+" "+r.Reason)
		}
		return out
	}
	if got := held(); len(got) != 5 {
		t.Fatalf("the book holds %v before the seal, want all 5", got)
	}
	if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	_, rec, _ := w.bundle(t, 1)
	var sealed []string
	for _, r := range rec.Events {
		sealed = append(sealed, r.Object+" "+r.Reason)
	}
	if d := cmp.Diff([]string{"Workload/job-r-1-abcde Admitted", "Pod/r-1-xyz12 Started", "Job/r-1 Completed", "TauRun/r Succeeded"}, sealed); d != "" {
		t.Errorf("the bundle's events (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Pod/other-pod BackOff", "TauRun/r Succeeded"}, held()); d != "" {
		t.Errorf("the book after the seal (-want +got):\n%s", d)
	}
	if len(w.e.Events.of) != 2 {
		t.Errorf("the book's index names %d events after the seal, want 2: %v", len(w.e.Events.of), w.e.Events.of)
	}
}
