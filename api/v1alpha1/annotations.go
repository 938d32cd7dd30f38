package v1alpha1

// Labels, annotations and names that more than one component reads or
// writes: the CLI, the reconcilers and the controller's servers agree on
// them here, as Flux's meta and Kueue's controller/constants do.

// Labels on TauRuns that let a run be found by its trigger without listing
// every run.
const (
	// LabelRefHash is RefHash of the run's trigger ref (a ref name is not a
	// valid label value).
	LabelRefHash = "taugrid.dev/ref-hash"
	// LabelCommit is the run's commit.
	LabelCommit = "taugrid.dev/commit"
)

// LabelPlatform marks the objects the platform reconciler applies from
// the platform repository.
const LabelPlatform = "taugrid.dev/platform"

// AnnotationNudge on a TauRepository asks for a poll now; its value (a
// time) changes with every nudge, and status.lastHandledNudge records the
// one handled.
const AnnotationNudge = "taugrid.dev/nudged-at"

// AnnotationResume asks a failed run to resume: a new attempt, from the
// run's latest complete checkpoint, whatever its retry policy says. Each new
// value resumes once (tau resume sets the time).
const AnnotationResume = "taugrid.dev/resume"

// AnnotationSignature carries the repository reconciler's signature check
// to the run reconciler, which records it as status.signature before
// anything is submitted. It is written when the TauRun is created, so the
// run reconciler's first look at the run already has it.
const AnnotationSignature = "taugrid.dev/signature"

// Tenant API tokens are Secrets in the controller's namespace with
// LabelAPIToken "true"; each holds a token (APITokenKey) and the namespace
// it reads (APINamespaceKey). A token whose namespace is APIPlatformAdmin
// is the platform team's: it reads every team's runs and the /platform
// board. Only whoever may write Secrets in the controller's namespace
// makes one.
const (
	LabelAPIToken    = "taugrid.dev/api-token"
	APITokenKey      = "token"
	APINamespaceKey  = "namespace"
	APIPlatformAdmin = "*"
)

// RunRefPrefix is where `tau run` pushes run requests.
const RunRefPrefix = "refs/tau/runs/"

// WebhookPathPrefix is where the webhook receiver serves repositories:
// <prefix><id>, with id = gitsource.WebhookID; status.webhookPath holds
// the full path.
const WebhookPathPrefix = "/hooks/"

// ConditionGPUHealthy is the node condition tau-nodeagent owns.
const ConditionGPUHealthy = "TauGPUHealthy"

// FinalizerEvidence holds a dispatched attempt's Job on its MultiKueue
// worker until the attempt's evidence bundle is sealed. MultiKueue deletes
// the worker's Job (background propagation) as soon as the manager's
// Workload finishes; the finalizer keeps the Job, and so its pods and
// their logs, which the garbage collector deletes only once the Job is
// gone. The evidence controller removes it once the bundle is stored (or
// the store failed), the janitor when it outlives its run.
const FinalizerEvidence = "taugrid.dev/evidence"

// TauGrid's Kueue admission check: each platform makes an AdmissionCheck
// named PolicyAdmissionCheck-<platform> (spec.controllerName
// PolicyCheckController) and puts it on every ClusterQueue it applies; the
// admission controller admits through it only the workloads TauGrid
// rendered, unchanged.
const (
	PolicyAdmissionCheck  = "taugrid-policy"
	PolicyCheckController = "taugrid.dev/policy"
)

// AnnotationAdmissionRefusal on a Kueue Workload keeps why TauGrid's
// admission check rejected it: Kueue deactivates the workload and resets
// its checks, the check's own message with them, so a run reads its
// refusal here.
const AnnotationAdmissionRefusal = "taugrid.dev/admission-refusal"

// ResourceHostSlot is the extended resource that keeps a multi-node run's
// pods on distinct hosts where Kueue's Topology-Aware Scheduling assigns
// them: tau-nodeagent advertises one per GPU node, each pod of a
// multi-node torchrun run on a TAS flavor requests one, and the platform's
// ClusterQueues cover it for their TAS flavors. Kueue's TAS counts it per
// node as kube-scheduler does, so neither places two such pods on one host
// (Kueue reads no pod anti-affinity).
const ResourceHostSlot = "taugrid.dev/host"
