package evidence

import (
	"time"
)

// Record is what happened in one attempt, as the controller saw it when
// the attempt ended: the record.json artifact. Every text in it is masked.
type Record struct {
	Run     RunInfo `json:"run"`
	Trigger Trigger `json:"trigger"`
	Inputs  Inputs  `json:"inputs"`
	// Phases of the run up to the seal, with how long each lasted.
	Phases []PhaseSpan `json:"phases"`
	// Attempts so far, this one last.
	Attempts    []AttemptInfo  `json:"attempts"`
	Kueue       *KueueTimeline `json:"kueue,omitempty"`
	Pods        []PodRecord    `json:"pods,omitempty"`
	Nodes       []NodeRecord   `json:"nodes,omitempty"`
	Events      []EventRecord  `json:"events,omitempty"`
	Checkpoints Checkpoints    `json:"checkpoints"`
	Metrics     *Metrics       `json:"metrics,omitempty"`
	Logs        []LogTail      `json:"logs,omitempty"`
	// Notes say what could not be collected and why.
	Notes []string `json:"notes,omitempty"`
}

// RunInfo names the run and where it stands.
type RunInfo struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Repository string `json:"repository"`
	// RepositoryURL is the git URL without credentials.
	RepositoryURL string `json:"repository_url,omitempty"`
	Target        string `json:"target"`
	Commit        string `json:"commit"`
	Phase         string `json:"phase"`
	Message       string `json:"message,omitempty"`
}

// Trigger is the git event that asked for the run.
type Trigger struct {
	Kind      string            `json:"kind"`
	Ref       string            `json:"ref"`
	Requester string            `json:"requester,omitempty"`
	Overrides map[string]string `json:"overrides,omitempty"`
	// Signature is the signature check the run recorded (SignatureOf):
	// who signed with which key, why it was refused, or "not checked".
	Signature string `json:"signature"`
	// Signer is who signed the ref, when the signature verified; nil when
	// the repository requires no signature.
	Signer *Signer `json:"signer,omitempty"`
}

// Signer is the verified signature of a run's ref, from the run's status.
type Signer struct {
	// Method is ssh or openpgp.
	Method string `json:"method"`
	// Principal is the allowed_signers principal (SSH) or the key's user ID
	// (OpenPGP).
	Principal string `json:"principal"`
	// Fingerprint is the signing key's: SHA256:... for SSH, hex for OpenPGP.
	Fingerprint string `json:"fingerprint"`
	// Object is what was signed: "tag <sha>" or "commit <sha>".
	Object string `json:"object"`
}

// Inputs are the digests of what the run was made from.
type Inputs struct {
	TauFile      string `json:"tau_file"`
	ConfigDigest string `json:"config_digest"`
	PolicyCommit string `json:"policy_commit"`
	PolicyDigest string `json:"policy_digest"`
	SourceDigest string `json:"source_digest,omitempty"`
}

// PhaseSpan is one phase and how long the run spent in it.
type PhaseSpan struct {
	Phase string    `json:"phase"`
	Start time.Time `json:"start"`
	// Seconds is zero for the phase the run is still in, or ended in.
	Seconds float64 `json:"seconds"`
}

// AttemptInfo is one attempt as the run's status records it.
type AttemptInfo struct {
	Number       int        `json:"number"`
	Workload     string     `json:"workload"`
	Start        *time.Time `json:"start,omitempty"`
	End          *time.Time `json:"end,omitempty"`
	FailureClass string     `json:"failure_class,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	Nodes        []string   `json:"nodes,omitempty"`
	// Cluster is the MultiKueue worker cluster the attempt ran on, whose
	// API its pods, nodes, pod events and logs were read from; empty: the
	// controller's own cluster.
	Cluster string `json:"cluster,omitempty"`
	// GPUUsage is how busy the attempt's GPUs were.
	GPUUsage *GPUUsage `json:"gpu_usage,omitempty"`
}

// KueueTimeline is Kueue's view of the attempt's Workload.
type KueueTimeline struct {
	Workload     string `json:"workload"`
	Queue        string `json:"queue"`
	ClusterQueue string `json:"cluster_queue,omitempty"`
	// Flavors assigned, "podset/resource" to flavor.
	Flavors    map[string]string `json:"flavors,omitempty"`
	Conditions []Condition       `json:"conditions,omitempty"`
	// AdmissionChecks are the Workload's admission checks as the attempt
	// ended: each check's state and message, in name order.
	AdmissionChecks []AdmissionCheck `json:"admission_checks,omitempty"`
}

// AdmissionCheck is one of Kueue's admission checks on a Workload.
type AdmissionCheck struct {
	Name string `json:"name"`
	// State is Pending, Ready, Retry or Rejected.
	State   string    `json:"state"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time"`
}

// Condition is a condition with the time it last changed.
type Condition struct {
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time"`
}

// PodRecord is one pod of the attempt and how its containers ended.
type PodRecord struct {
	Name       string            `json:"name"`
	Node       string            `json:"node,omitempty"`
	Phase      string            `json:"phase"`
	Reason     string            `json:"reason,omitempty"`
	Containers []ContainerRecord `json:"containers"`
}

// ContainerRecord is one container's end.
type ContainerRecord struct {
	Name string `json:"name"`
	// Image is the image the container ran, as the pod names it; ImageID
	// is what the node resolved it to (repository@sha256:...), once pulled.
	Image    string     `json:"image,omitempty"`
	ImageID  string     `json:"image_id,omitempty"`
	Init     bool       `json:"init,omitempty"`
	ExitCode *int32     `json:"exit_code,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Message  string     `json:"message,omitempty"`
	Restarts int32      `json:"restarts"`
	Started  *time.Time `json:"started,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
}

// NodeRecord is a node the attempt ran on, and its GPU health.
type NodeRecord struct {
	Name string `json:"name"`
	Gone bool   `json:"gone,omitempty"`
	// GPUHealthyAtStart is the TauGPUHealthy status when the attempt
	// started: True, False, Unknown, or "not reported" by tau-nodeagent.
	GPUHealthyAtStart string `json:"gpu_healthy_at_start"`
	// GPUHealthy is the condition when the attempt ended.
	GPUHealthy *Condition `json:"gpu_healthy,omitempty"`
}

// EventRecord is one Kubernetes event about the run, its workload or pods.
type EventRecord struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  string    `json:"object"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
}

// Checkpoints says where the attempt kept and resumed checkpoints.
type Checkpoints struct {
	PVC        string `json:"pvc,omitempty"`
	Dir        string `json:"dir"`
	ResumeFrom string `json:"resume_from,omitempty"`
}

// LogTail is the bounded end of one container's log; the text is the
// artifact it names.
type LogTail struct {
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Artifact  string `json:"artifact"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
	Error     string `json:"error,omitempty"`
	// From is where the log was read: "" from the kubelet, as the API
	// server serves it; FromTerminationMessage from the container's
	// termination message in the pod's status, which TauGrid's source
	// fetch writes, on success, with all it printed.
	From string `json:"from,omitempty"`
}

// FromTerminationMessage is LogTail.From for a log read from the
// container's termination message.
const FromTerminationMessage = "terminationMessage"
