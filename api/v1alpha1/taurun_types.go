package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TriggerKind says what started a run.
// +kubebuilder:validation:Enum=RunTag;RunRef;BranchChange
type TriggerKind string

// The ways a run starts.
const (
	TriggerRunTag       TriggerKind = "RunTag"       // a pushed tag matching the run patterns
	TriggerRunRef       TriggerKind = "RunRef"       // a ref under refs/tau/runs/, pushed by `tau run`
	TriggerBranchChange TriggerKind = "BranchChange" // a commit on a watched branch that changed a tau file
)

// Trigger is the git event that requested a run.
type Trigger struct {
	Kind TriggerKind `json:"kind"`

	// Ref is the full ref name, e.g. refs/tags/run/lr-sweep.
	// +kubebuilder:validation:MaxLength=1024
	Ref string `json:"ref"`

	// Requester is the tagger or pusher, as git recorded them.
	// +optional
	Requester string `json:"requester,omitempty"`

	// Overrides from a run ref's message (field path to value).
	// +optional
	Overrides map[string]string `json:"overrides,omitempty"`
}

// TauRunSpec is one requested run. It never changes after creation, except
// to request cancellation.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)",message="cancellation cannot be undone"
// +kubebuilder:validation:XValidation:rule="self.repository == oldSelf.repository && self.trigger == oldSelf.trigger && self.commit == oldSelf.commit && self.target == oldSelf.target",message="a TauRun's repository, trigger, commit and target are immutable"
type TauRunSpec struct {
	// Repository is the TauRepository (same namespace) the run comes from.
	// +kubebuilder:validation:MinLength=1
	Repository string `json:"repository"`

	Trigger Trigger `json:"trigger"`

	// Commit is the full SHA-1 the run executes.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	Commit string `json:"commit"`

	// Target is "default" (tau.yaml) or the name of tau/<target>.yaml: a
	// DNS-1123 label (LabelPattern, MaxTargetLength).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Target string `json:"target"`

	// Cancel asks for the run to be stopped; it cannot be taken back.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
}

// RunPhase is where a run is in its life.
// +kubebuilder:validation:Enum=Pending;Queued;Admitted;Running;Succeeded;Failed;Cancelled
type RunPhase string

// The phases of a run, in order; the last three are final.
const (
	PhasePending   RunPhase = "Pending"   // accepted, not yet submitted
	PhaseQueued    RunPhase = "Queued"    // submitted, waiting for Kueue
	PhaseAdmitted  RunPhase = "Admitted"  // Kueue admitted it; pods starting
	PhaseRunning   RunPhase = "Running"   // the entrypoint is running
	PhaseSucceeded RunPhase = "Succeeded" // finished with exit code 0
	PhaseFailed    RunPhase = "Failed"    // invalid, or failed past its retries
	PhaseCancelled RunPhase = "Cancelled" // its ref was deleted, or it was cancelled
)

// Final reports a phase a run never leaves.
func (p RunPhase) Final() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseCancelled
}

// PhaseTransition records when a run entered a phase.
type PhaseTransition struct {
	Phase RunPhase    `json:"phase"`
	Time  metav1.Time `json:"time"`
}

// WorkloadStatus is what Kueue says about the run's current attempt.
type WorkloadStatus struct {
	// Kind and Name of the Job or RayJob.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Workload is the Kueue Workload's name.
	// +optional
	Workload string `json:"workload,omitempty"`
	// Queue is the LocalQueue.
	// +optional
	Queue string `json:"queue,omitempty"`
	// Admitted is true once Kueue admitted the workload.
	// +optional
	Admitted bool `json:"admitted,omitempty"`
	// Reason is Kueue's explanation while the workload waits.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Position in the queue, where Kueue's visibility API serves it.
	// +optional
	Position *int32 `json:"position,omitempty"`
	// Cluster is the MultiKueue worker cluster the attempt was dispatched
	// to, as its Kueue Workload says; empty on a single cluster.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// UID is the Job's or RayJob's, as the API server created it for
	// TauGrid: the policy admission check admits no other object.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// Digest is the SHA-256 of what the object's pods are made from (its
	// pod templates and the spec around them), as the API server stored it
	// at creation: the policy admission check admits the workload only
	// while the object still hashes to it.
	// +optional
	Digest string `json:"digest,omitempty"`
	// FieldDigests are short digests of the same, field by field: for
	// each field ("spec.template.spec.containers[main].image"), the first
	// 8 hex digits of its path's SHA-256 and then the first 12 of its
	// value's (render.Fingerprint.Short). They name what changed when
	// Digest no longer holds, and prove nothing alone.
	// +optional
	FieldDigests string `json:"fieldDigests,omitempty"`
	// Generation is the object's metadata.generation when Digest was
	// taken. The API server moves it at every change of the spec, so while
	// it stands and LabelsDigest holds, the object is still what Digest
	// was taken of: the policy admission check then judges it from the
	// controller's cache, which keeps no pod templates, instead of reading
	// it whole from the API server.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// LabelsDigest is the SHA-256 of the object's labels alone, as Digest
	// was taken.
	// +optional
	LabelsDigest string `json:"labelsDigest,omitempty"`
}

// Attempt is one try at running the run.
type Attempt struct {
	Number int `json:"number"`
	// Workload is the Job or RayJob of the attempt.
	Workload string `json:"workload"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// FailureClass classifies a failed attempt (UserError, OOMKilled, ...).
	// +optional
	FailureClass string `json:"failureClass,omitempty"`
	// Reason is a short explanation of the outcome.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Nodes the attempt's pods ran on.
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Cluster is the MultiKueue worker cluster the attempt ran on, if it
	// was dispatched to one.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Preemption records that Kueue preempted the attempt's workload, as
	// the run reconciler first saw it and before it deleted anything: the
	// attempt's end is classified from this record, whatever the order in
	// which the Workload's eviction and the workload's deletion are seen.
	// +optional
	Preemption *Preemption `json:"preemption,omitempty"`
	// GPUUsage is the attempt's GPU utilisation, read from the node
	// agents of the nodes its pods run on, once a minute while it runs.
	// +optional
	GPUUsage *GPUUsage `json:"gpuUsage,omitempty"`
}

// MaxGPUUsagePoints bounds an attempt's utilisation series: past it, the
// series halves its resolution (two points become one), so a week-long
// attempt keeps as many points as a two-hour one.
const MaxGPUUsagePoints = 120

// MaxGPUUUIDs bounds the GPU UUIDs an attempt records.
const MaxGPUUUIDs = 64

// GPUUsage is how busy an attempt's GPUs are, as the node agents measure
// it (SM utilisation, per minute), counting only the GPUs its own pods hold.
type GPUUsage struct {
	// Summary says it in one line, e.g. "8 GPUs, 91% busy over the last 10 min".
	Summary string `json:"summary"`
	// GPUs is how many GPUs the attempt's pods were seen holding.
	GPUs int32 `json:"gpus"`
	// UUIDs are the GPUs the attempt's pods were seen holding at any
	// reading, by NVML UUID, sorted; the first MaxGPUUUIDs.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	UUIDs []string `json:"uuids,omitempty"`
	// ReadAt is when the node agents were asked for the reading this
	// record was last changed by: a reading that adds nothing (no new
	// minute, the same agents silent) is not written.
	ReadAt metav1.Time `json:"readAt"`
	// Through is the end of the last whole minute folded into Series:
	// the next reading adds the minutes after it.
	// +optional
	Through *metav1.Time `json:"through,omitempty"`
	// Unread names the nodes whose agent did not answer the last time.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Unread []string `json:"unread,omitempty"`
	// IdleSince is the start of the minutes, up to now, in which the GPUs'
	// mean utilisation stayed under the platform's idle threshold.
	// +optional
	IdleSince *metav1.Time `json:"idleSince,omitempty"`
	// Idle says the GPUs stayed under the threshold for the platform's
	// idle time (limits.yaml idle_gpu_percent, idle_gpu_time); it stays set
	// until they are busy again.
	// +optional
	Idle bool `json:"idle,omitempty"`
	// Series is the mean utilisation of the attempt's GPUs over its life.
	// +optional
	Series GPUUsageSeries `json:"series,omitzero"`
}

// GPUUsageSeries is a utilisation series of at most MaxGPUUsagePoints
// points, each StepMinutes wide.
type GPUUsageSeries struct {
	// Start is the minute the first point counts from.
	Start metav1.Time `json:"start"`
	// StepMinutes is the width of a point: 1, doubled each time the
	// series is full.
	StepMinutes int32 `json:"stepMinutes"`
	// +kubebuilder:validation:MaxItems=120
	// +optional
	Points []GPUUsagePoint `json:"points,omitempty"`
}

// GPUUsagePoint is the mean utilisation over one step of a series.
type GPUUsagePoint struct {
	// Minute is where the point starts, in minutes from the series' start.
	Minute int32 `json:"minute"`
	// Percent is the mean utilisation of the attempt's GPUs, 0 to 100.
	Percent int32 `json:"percent"`
	// Minutes is how many minutes with a reading the point folds.
	Minutes int32 `json:"minutes"`
}

// Preemption is Kueue's preemption of an attempt's workload.
type Preemption struct {
	// Time is when the run reconciler saw it.
	Time metav1.Time `json:"time"`
	// Message is Kueue's, naming the preemptor's job UID and the reason.
	// +optional
	Message string `json:"message,omitempty"`
}

// TauRunStatus is the run's progress.
type TauRunStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase is where the run is now.
	// +optional
	Phase RunPhase `json:"phase,omitempty"`

	// Phases records when each phase was entered.
	// +optional
	Phases []PhaseTransition `json:"phases,omitempty"`

	// Message says in one line what the run is doing or why it stopped,
	// e.g. Kueue's pending reason or tau.yaml:12:5: compute.gpus: ...
	// +optional
	Message string `json:"message,omitempty"`

	// TauFile is the tau file the run read, e.g. tau/ray.yaml.
	// +optional
	TauFile string `json:"tauFile,omitempty"`
	// ConfigDigest is the digest of the tau file at the commit.
	// +optional
	ConfigDigest string `json:"configDigest,omitempty"`
	// PolicyCommit is the platform repo commit the run was rendered under.
	// +optional
	PolicyCommit string `json:"policyCommit,omitempty"`
	// PolicyDigest is the digest of that policy.
	// +optional
	PolicyDigest string `json:"policyDigest,omitempty"`

	// SourceDigest is the sha256 of the commit's source archive, which the
	// run's pods fetch from the controller and verify.
	// +optional
	SourceDigest string `json:"sourceDigest,omitempty"`

	// Workload is the current attempt's Job or RayJob and its Kueue state.
	// +optional
	Workload *WorkloadStatus `json:"workload,omitempty"`

	// Attempts lists every attempt, the current one last.
	// +optional
	Attempts []Attempt `json:"attempts,omitempty"`

	// LastHandledResume is the value of the resume annotation last acted on:
	// a failed run resumes once per new value.
	// +optional
	LastHandledResume string `json:"lastHandledResume,omitempty"`

	// Signature is the check of the signature on the run's tag or commit,
	// recorded where the repository requires signatures
	// (spec.verification): who signed, or why the run was refused.
	// +optional
	Signature *SignatureStatus `json:"signature,omitempty"`

	// Progress is how far the current attempt said it was, the last time
	// one of its pods reported it (POST to $TAU_PROGRESS_URL); the start
	// estimate of the runs waiting behind it reads it. Written at most
	// once a minute unless it moved by 10 points or reached 100.
	// +optional
	Progress *RunProgress `json:"progress,omitempty"`

	// EvidenceURL links to the run's evidence page.
	// +optional
	EvidenceURL string `json:"evidenceURL,omitempty"`

	// Forge is the commit status last posted to the forge: what the next
	// post compares with, so a state is never posted twice, even across
	// controller restarts.
	// +optional
	Forge *ForgeStatus `json:"forge,omitempty"`

	// Notifications record each notification of this run: written before
	// it is sent, so none is sent twice, even across controller restarts.
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Notifications []NotificationRecord `json:"notifications,omitempty"`
}

// RunProgress is how far an attempt said it was, and when.
type RunProgress struct {
	// Attempt is the attempt whose pod reported it; another attempt's is
	// not the current one's progress.
	// +kubebuilder:validation:Minimum=1
	Attempt int `json:"attempt"`
	// Percent done, 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent int32 `json:"percent"`
	// Time is when it was reported.
	Time metav1.Time `json:"time"`
}

// NotificationRecord is one notification of a run to one target.
type NotificationRecord struct {
	// Key is "<target>/<event>", with "/<attempt>" for an attempt's
	// preemption or idle GPUs.
	Key string `json:"key"`
	// State is Sending (recorded, not yet confirmed), Delivered, Retrying
	// or Failed (given up).
	// +kubebuilder:validation:Enum=Sending;Delivered;Retrying;Failed
	State string `json:"state"`
	// Tries is how many times it was sent.
	Tries int32 `json:"tries"`
	// Time is when State was last set.
	Time metav1.Time `json:"time"`
	// Message says why the last try failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// Notification record states.
const (
	NotifySending   = "Sending"
	NotifyDelivered = "Delivered"
	NotifyRetrying  = "Retrying"
	NotifyGivenUp   = "Failed"
)

// SignatureStatus is the outcome of verifying the signature on the object
// that requested a run: the annotated tag for run refs and annotated run
// tags, the commit otherwise.
type SignatureStatus struct {
	// Verified is true when an allowed key, valid now and not revoked,
	// made a good signature. A run that is not verified never submits.
	Verified bool `json:"verified"`
	// Method is the signature format: ssh or openpgp.
	// +optional
	Method string `json:"method,omitempty"`
	// Principal is the allowed_signers principal (SSH) or the key's primary
	// user ID (OpenPGP) of the signer.
	// +optional
	Principal string `json:"principal,omitempty"`
	// Fingerprint of the signing key: SHA256:... for SSH, hex for OpenPGP.
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`
	// Object is what was verified: "tag <sha>" or "commit <sha>".
	// +optional
	Object string `json:"object,omitempty"`
	// Reason says why the run was refused; empty when verified.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ForgeStatus is a commit status as last posted, or as being posted. The
// forge reconciler records a status here before it posts it, so that no
// reconcile working from an older copy of the run posts it again.
type ForgeStatus struct {
	// Context names the status on the commit, e.g. "tau/default run-1a2b".
	Context string `json:"context"`
	// State is pending, running, success, failure or error.
	State string `json:"state"`
	// Description is the one line shown next to the state.
	// +optional
	Description string `json:"description,omitempty"`
	// TargetURL is the link the status carries.
	// +optional
	TargetURL string `json:"targetURL,omitempty"`
	// Phase is the run's phase the status shows: refreshes within one
	// phase are paced, a new phase is posted at once.
	// +optional
	Phase RunPhase `json:"phase,omitempty"`
	// PostedAt is when the post began.
	PostedAt metav1.Time `json:"postedAt"`
	// InFlight says the post has begun and its outcome is not known (the
	// controller stopped, or the call failed without a clear answer): the
	// forge is asked what it shows before anything is posted again.
	// +optional
	InFlight bool `json:"inFlight,omitempty"`
	// CheckRunID is the GitHub check run showing the run (spec.forge.checkRuns),
	// which later posts update rather than create anew.
	// +optional
	CheckRunID int64 `json:"checkRunID,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=trun,categories=tau
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.repository`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.spec.commit`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.workload.cluster`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 43 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="a TauRun's name must be a DNS-1123 label of at most 43 characters (its Job, pods and RayJob are named after it)"

// TauRun is one requested run of a tau file at a commit. The controller
// creates exactly one per (repository, ref, commit, target).
type TauRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TauRunSpec `json:"spec"`
	// Status is the controller's, but a run just created already reads
	// Pending: the API server fills that in from the schema's default when
	// it serves the stored run, so no run is ever listed without a phase,
	// however far behind the controller is.
	// +kubebuilder:default={phase: Pending, message: "accepted: preparing the run"}
	Status TauRunStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TauRunList is a list of TauRuns.
type TauRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TauRun `json:"items"`
}

func init() {
	register(&TauRun{}, &TauRunList{})
}
