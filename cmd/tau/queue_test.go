package main

import (
	"bytes"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
)

func TestTheQueueTable(t *testing.T) {
	rep := &runs.QueueReport{SchemaVersion: 1, Namespace: "team-a",
		Queues: []runs.QueueView{{LocalQueue: "runs", ClusterQueue: "team-a", Cohort: "research", Pending: 2, Admitted: 1,
			Quota: []runs.QuotaView{{Flavor: "h200", Resource: "nvidia.com/gpu", Nominal: "8", BorrowingLimit: "8", InUse: "16", Borrowed: "8"}}}},
		Runs: []runs.QueuedRun{
			{Run: "research-1", Ref: RunRefPrefix + "r-1", Queue: "runs", Phase: taugridv1.PhaseRunning, Message: "running", GPUs: 8},
			{Run: "research-2", Ref: RunRefPrefix + "r-2", Queue: "runs", Phase: taugridv1.PhaseQueued, Position: 1,
				Message: "queued #1 of 2 in team-a: needs 8 more nvidia.com/gpu (h200); team-a uses 16/8 (8 borrowed)",
				GPUs:    8, Start: "starts in about 25 min"},
			{Run: "research-3", Ref: "refs/tags/run/x", Queue: "runs", Phase: taugridv1.PhaseQueued, Position: 2, Message: "queued #2 of 2 in team-a",
				GPUs: 32, Start: "will not start: it needs 32 GPUs and its queue's quota holds at most 16"},
		}}
	var out bytes.Buffer
	printQueue(&out, rep)
	golden(t, "queue.txt", out.String())
}
