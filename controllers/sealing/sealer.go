package sealing

// evidenceWorkers is how many runs the evidence controller seals at once.
// Sealing waits on the API server (the pod's log, the namespace's events,
// the Secrets whose values are masked, the status patch) far more than it
// computes; it has its own workers so that it never holds a run
// reconciler's worker, and so other runs' phases, while it waits. An
// ended attempt's pods are released once it is sealed, so a backlog here
// holds what a preempted or timed-out attempt's pods hold. hack/scale,
// 1,000 runs on a 2-core API server: 4 workers sealed about 1.5 a second,
// up to 524 attempts waiting; 16 (see docs/benchmarks.md).
const evidenceWorkers = 16
