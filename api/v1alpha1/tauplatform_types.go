package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TauPlatformSpec points at the platform repo holding the policy every run
// is rendered under.
type TauPlatformSpec struct {
	GitSource `json:",inline"`

	// Ref is the branch or tag to follow.
	// +kubebuilder:default=main
	// +optional
	Ref string `json:"ref,omitempty"`

	// Path is the policy directory inside the repository.
	// +kubebuilder:default="."
	// +kubebuilder:validation:Pattern=`^[^/].*$|^\.$`
	// +optional
	Path string `json:"path,omitempty"`

	// Interval between polls of the platform repo.
	// +kubebuilder:default="1m"
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`

	// Suspend stops polling; the last good policy stays in force.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Forge, when set, previews each open pull request on the platform
	// repo before it is merged: the policy at its head is loaded and
	// dry-run on the cluster, and its impact on the teams (quotas, the
	// runs queued or running, the nodes) is posted on the head as a
	// commit status or check run (context tau/platform) and as one
	// comment, kept up to date. The Secret it names is read from the
	// controller's namespace, as spec.secretRef is.
	// +optional
	Forge *Forge `json:"forge,omitempty"`

	// Webhook verifies forge deliveries (pushes, pull requests) that make
	// the platform poll at once, so a pull request is previewed within
	// seconds instead of at the next poll. Its Secret (key "token") lives
	// in the controller's namespace; status.webhookPath is the path to
	// give the forge. Polling goes on without it.
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`
}

// TauPlatformStatus records the policy in force.
type TauPlatformStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Commit is the platform repo commit whose policy is in force: the last
	// good one. Every render uses it and every evidence bundle records it.
	// +optional
	Commit string `json:"commit,omitempty"`

	// PolicyDigest is the digest of the policy files at Commit.
	// +optional
	PolicyDigest string `json:"policyDigest,omitempty"`

	// LastAttemptedCommit is the newest commit seen, good or not.
	// +optional
	LastAttemptedCommit string `json:"lastAttemptedCommit,omitempty"`

	// LastPollTime is when the platform repo was last read.
	// +optional
	LastPollTime *metav1.Time `json:"lastPollTime,omitempty"`

	// LastChange is what the last change of the policy in force did to
	// the teams when it was applied: the impact preview of that push, so
	// a change that skipped review is still explained. Absent until the
	// policy in force changes once.
	// +optional
	LastChange *PolicyChange `json:"lastChange,omitempty"`

	// PreviewedHeads are the open pull requests' previews posted, each as
	// <head commit>@<commit in force>, with "+accepted" where the pull
	// request accepts stranding runs: a head is previewed again when it,
	// the policy in force or its acceptance changes. Only open pull
	// requests' previews are kept.
	// +optional
	PreviewedHeads []string `json:"previewedHeads,omitempty"`

	// WebhookPath is where the forge delivers spec.webhook's signed
	// events: /hooks/<id> on the controller's webhook address; empty when
	// spec.webhook or its Secret is missing.
	// +optional
	WebhookPath string `json:"webhookPath,omitempty"`
}

// PolicyChange is the impact preview of one change of the policy in force.
type PolicyChange struct {
	// From is the commit in force before; To the commit applied.
	From string `json:"from"`
	To   string `json:"to"`

	// Summary is the preview in one line: runs stranded or refused on
	// retry, quotas cut, nodes no flavor covers any more.
	Summary string `json:"summary"`

	// Stranded says queued runs could never start under the new policy;
	// StrandedRuns names up to 20 of them, as namespace/name.
	// +optional
	Stranded bool `json:"stranded,omitempty"`
	// +optional
	StrandedRuns []string `json:"strandedRuns,omitempty"`

	// Time is when the change was applied.
	Time metav1.Time `json:"time"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tplat,categories=tau
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.commit`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TauPlatform is the platform repo whose policy (tenants, profiles, images,
// priorities, limits, queues) governs every run in the cluster.
type TauPlatform struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TauPlatformSpec   `json:"spec"`
	Status TauPlatformStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TauPlatformList is a list of TauPlatforms.
type TauPlatformList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TauPlatform `json:"items"`
}

func init() {
	register(&TauPlatform{}, &TauPlatformList{})
}
