package v1alpha1

// Condition types shared by TauGrid's resources (kstatus-compatible).
const (
	// ConditionReady is True when the object's desired state is in effect.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller is working toward
	// the desired state.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a human: an invalid
	// config, a policy violation, a missing secret.
	ConditionStalled = "Stalled"
	// ConditionPodsRunning, on a TauRun, is True while every pod the
	// current attempt needs runs its entrypoint. While an admitted attempt
	// is not there yet its reason says whether the pods are on their way
	// (ReasonPodsStarting) or held (ReasonPodsNotStarting: no node fits,
	// an image does not pull, a container fails), and its message says
	// which pod and why.
	ConditionPodsRunning = "PodsRunning"
)

// Reasons of ConditionPodsRunning.
const (
	ReasonPodsRunning     = "Running"
	ReasonPodsStarting    = "Starting"
	ReasonPodsNotStarting = "NotStarting"
)

// GitSource says where a git repository is and how to reach it.
type GitSource struct {
	// URL of the repository: https://, http:// or ssh://.
	// +kubebuilder:validation:Pattern=`^(https?|ssh)://[^\s]+$`
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// SecretRef names a Secret in the same namespace (for cluster-scoped
	// objects, in the controller's namespace) holding credentials: keys
	// "username" and "password" (or "token") for HTTPS, "identity" and
	// "known_hosts" for SSH.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}
