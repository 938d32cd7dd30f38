package runs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// WorkerWait is how a worker cluster holds its copy of a dispatched
// workload: MultiKueue copies the manager's Workload, by the same
// namespace and name, to each worker it nominates, and the first worker
// to admit it runs it.
type WorkerWait struct {
	Cluster string
	// Workload is the worker's copy; nil when the worker has none (yet).
	Workload *kueue.Workload
	// Err is why the worker's copy could not be read.
	Err error
}

// WorkerReader reads one worker cluster's objects.
type WorkerReader func(ctx context.Context, cluster string) (client.Reader, error)

// ReadWorkerWaits reads the copies of wl in the workers MultiKueue
// nominated for it (status.nominatedClusterNames), in name order: one
// read of one object per worker.
func ReadWorkerWaits(ctx context.Context, wl *kueue.Workload, worker WorkerReader) []WorkerWait {
	if wl == nil {
		return nil
	}
	var out []WorkerWait
	for _, name := range slices.Sorted(slices.Values(wl.Status.NominatedClusterNames)) {
		w := WorkerWait{Cluster: name}
		r, err := worker(ctx, name)
		if err == nil {
			remote := &kueue.Workload{}
			err = r.Get(ctx, client.ObjectKeyFromObject(wl), remote)
			if err == nil {
				w.Workload = remote
			}
		}
		if client.IgnoreNotFound(err) != nil {
			w.Err = err
		}
		out = append(out, w)
	}
	return out
}

// ExplainDispatched explains a workload whose quota the manager reserved
// and which waits for its dispatch check (MultiKueue's): Kueue's word
// there is only that the check is pending, so the wait is told in the
// workers' own words, each explained as a queue on one cluster is. An
// explanation of any other wait, or with no worker to ask, is returned
// as it is.
func ExplainDispatched(ex Explanation, waits []WorkerWait) Explanation {
	if ex.Kind != WaitAdmissionChecks || len(waits) == 0 {
		return ex
	}
	var short, long []string
	for _, w := range waits {
		why := workerWhy(w)
		short = append(short, w.Cluster+": "+why.Short)
		long = append(long, "Worker "+w.Cluster+": "+why.Long)
	}
	full := "dispatched, not yet admitted by a worker; " + strings.Join(short, "; ")
	s := full
	if r := []rune(s); len(r) > maxShortExplanation {
		s = string(r[:maxShortExplanation-1]) + "…"
	}
	return Explanation{Kind: WaitDispatched, Short: s, Long: full + ".\n" + strings.Join(long, "\n") + "\n" + ex.Long}
}

// workerWhy is one worker's reason, explained as ExplainWait explains a
// queue's (without the position, which only the manager knows).
func workerWhy(w WorkerWait) Explanation {
	switch {
	case w.Err != nil:
		return Explanation{Short: "cannot reach it", Long: fmt.Sprintf("cannot read its copy of the workload: %s.", reachError(w.Err))}
	case w.Workload == nil:
		return Explanation{Short: "has no copy yet", Long: "MultiKueue has not copied the workload there yet."}
	case meta.IsStatusConditionTrue(w.Workload.Status.Conditions, kueue.WorkloadQuotaReserved):
		return Explanation{Short: "quota reserved", Long: "it reserved quota; the run starts there."}
	}
	return ExplainWait(w.Workload, QueueState{})
}

// reachError is a worker's read error without the request it was for.
func reachError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "\": "); i > 0 && strings.Contains(msg[:i], "https://") {
		return msg[i+3:] // `Get "https://...": dial tcp ...` keeps only the cause
	}
	return msg
}
