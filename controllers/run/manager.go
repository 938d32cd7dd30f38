package run

// How many objects each controller reconciles at once, unless its Workers
// field says otherwise (cmd/tau-controller's --*-workers flags). A reconcile
// spends most of its time waiting on the API server, the git remote or
// the forge, not on a core, so these are sized for the queue, not the CPU:
// one repository worker serialised every poll and run creation behind the
// slowest remote (hack/scale: 1,000 run requests on 100 repositories), and
// 8 run workers at 0.5-1 s an API round trip gave about 10 reconciles a
// second while 10,000 runs waited in the queue (1,000 nodes, 10,000 runs).
const (
	DefaultRunWorkers = 32
)
