package sealing

// evidenceWorkers is how many runs the evidence controller seals at once.
// Sealing waits on the API server (a field-selected Event list per object)
// and on pod logs; it has its own workers so that it never holds a run
// reconciler's worker, and so other runs' phases, while it waits.
const evidenceWorkers = 4
