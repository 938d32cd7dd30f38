package v1alpha1

// FailureClass says why an attempt failed, in terms a retry policy can act
// on: the researcher's fault or the platform's. The run controller sets
// it on status.attempts[].failureClass; tau.yaml's resilience.retry_on
// names the classes to retry.
type FailureClass string

// The failure classes: the one list the run controller, render (retry_on
// and its JSON Schema), runs/ and evidence/ read.
const (
	FailureUserError FailureClass = "UserError" // the entrypoint exited non-zero
	FailureOOMKilled FailureClass = "OOMKilled" // a container ran out of memory
	FailurePreempted FailureClass = "Preempted" // Kueue evicted or preempted the workload
	FailureNodeLost  FailureClass = "NodeLost"  // the node went away or evicted the pod
	// FailureWorkerLost: MultiKueue took the attempt off the worker
	// cluster it was dispatched to (the worker stopped answering); like
	// NodeLost, the platform's fault.
	FailureWorkerLost     FailureClass = "WorkerLost"
	FailureGPUFault       FailureClass = "GPUFault"       // the node's GPUs went unhealthy during the attempt
	FailureImagePull      FailureClass = "ImagePull"      // the image could not be pulled
	FailureTimeout        FailureClass = "Timeout"        // the attempt ran past limits.timeout
	FailureInfrastructure FailureClass = "Infrastructure" // anything else; the raw reason is kept
	// FailureIdleGPUs: the platform's idle_policy stopped an attempt that
	// held its GPUs idle. Never retried: a retry would hold them again.
	FailureIdleGPUs FailureClass = "IdleGPUs"
)

// FailureClasses is every class a failed attempt can have.
var FailureClasses = []FailureClass{FailurePreempted, FailureNodeLost, FailureWorkerLost, FailureGPUFault, FailureInfrastructure,
	FailureOOMKilled, FailureImagePull, FailureTimeout, FailureUserError, FailureIdleGPUs}

// RetryableFailureClasses are the classes resilience.retry_on may name:
// every class but FailureIdleGPUs.
var RetryableFailureClasses = FailureClasses[:len(FailureClasses)-1]

// DefaultRetryOn are the classes retried when tau.yaml names none: the
// platform's faults, never the researcher's.
var DefaultRetryOn = []FailureClass{FailurePreempted, FailureNodeLost, FailureWorkerLost, FailureGPUFault, FailureInfrastructure}
