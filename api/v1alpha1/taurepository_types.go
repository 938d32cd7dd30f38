package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TauRepositorySpec is a research repo to watch for runs. Its namespace is
// the tenant.
type TauRepositorySpec struct {
	GitSource `json:",inline"`

	// Triggers say which refs start runs.
	// +optional
	Triggers Triggers `json:"triggers,omitempty"`

	// Interval between polls. Webhooks only shorten the wait.
	// +kubebuilder:default="1m"
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`

	// Webhook verifies deliveries that nudge a poll.
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`

	// Forge reports run status back to commits and pull requests.
	// +optional
	Forge *Forge `json:"forge,omitempty"`

	// Verification requires run refs, run tags and commits to be signed by
	// an allowed key.
	// +optional
	Verification *Verification `json:"verification,omitempty"`

	// Notifications are where this repository's runs are announced: when
	// one ends, fails, is preempted, waits too long or leaves its GPUs
	// idle (docs/notifications.md).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Notifications []NotificationTarget `json:"notifications,omitempty"`

	// Platform names the TauPlatform whose policy applies.
	// +kubebuilder:default=default
	// +optional
	Platform string `json:"platform,omitempty"`

	// Suspend stops polling; running runs continue.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// Triggers say which refs of a repository start runs.
type Triggers struct {
	// RunTags are glob patterns of tags that start a run.
	// +kubebuilder:default={"run/*"}
	// +optional
	RunTags []string `json:"runTags,omitempty"`

	// RunRefPrefix is where `tau run` pushes run refs: under refs/tau/, or a
	// directory of branches or tags (refs/heads/<dir>/, refs/tags/<dir>/),
	// namespaces only those who may push write. Forge-written namespaces
	// such as refs/pull/ are refused: anyone who opens a pull request
	// writes there.
	// +kubebuilder:default="refs/tau/runs/"
	// +kubebuilder:validation:Pattern=`^refs/.+/$`
	// +kubebuilder:validation:XValidation:rule="self.startsWith('refs/tau/') || self.matches('^refs/(heads|tags)/[^/]+/')",message="runRefPrefix must be refs/tau/<dir>/, refs/heads/<dir>/ or refs/tags/<dir>/: other ref namespaces (refs/pull/, refs/notes/, ...) may be written by people who cannot push to the repository"
	// +optional
	RunRefPrefix string `json:"runRefPrefix,omitempty"`

	// Branches are watched: a new commit that changes a tau file starts a run.
	// +optional
	Branches []string `json:"branches,omitempty"`
}

// Webhook holds the secret a forge signs deliveries with.
type Webhook struct {
	// SecretRef names a Secret with key "token".
	SecretRef LocalObjectReference `json:"secretRef"`
}

// ForgeType is the kind of forge status is reported to.
// +kubebuilder:validation:Enum=github;gitea;gitlab
type ForgeType string

// Forge says where and how to report run status.
type Forge struct {
	Type ForgeType `json:"type"`

	// APIURL is the forge's API base URL, for self-hosted forges.
	// +optional
	APIURL string `json:"apiURL,omitempty"`

	// SecretRef names a Secret with key "token" (or a GitHub App's
	// "appID", "installationID" and "privateKey").
	SecretRef LocalObjectReference `json:"secretRef"`

	// CheckRuns reports GitHub check runs instead of commit statuses.
	// +optional
	CheckRuns bool `json:"checkRuns,omitempty"`
}

// Verification lists the keys allowed to sign. A run tag, run ref or branch
// commit that is unsigned, signed by a key not listed, expired or revoked, or
// badly signed starts no run: its TauRun fails at once and says why.
type Verification struct {
	// Mode is the signature format required: ssh (gpg.format=ssh) or
	// openpgp. Signatures of the other format are refused.
	// +kubebuilder:validation:Enum=ssh;openpgp
	Mode string `json:"mode"`

	// SecretRef names a Secret whose values are allowed public keys: for
	// ssh, lines in git's allowed_signers format (principals, optional
	// namespaces=, valid-after=, valid-before=, then the key); for openpgp,
	// armored public keys. Its value revoked_keys, if present, lists
	// revoked keys (SSH public keys, as gpg.ssh.revocationFile, or key
	// fingerprints), which are refused even when allowed.
	SecretRef LocalObjectReference `json:"secretRef"`
}

// TauRepositoryStatus is what the controller last saw of the repository.
type TauRepositoryStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedRefs are the watched branches as the last poll saw them:
	// what the next poll compares with. (Statuses written before runRefs
	// also hold run tags and run refs here; the next poll moves them.)
	// +listType=map
	// +listMapKey=name
	// +optional
	ObservedRefs []ObservedRef `json:"observedRefs,omitempty"`

	// RunRefs records the run tags and run refs the last poll saw, in a
	// size that does not grow with the runs: a run's ref is recorded by
	// its TauRun.
	// +optional
	RunRefs *RunRefLedger `json:"runRefs,omitempty"`

	// ValidatedHeads are the pull request head commits whose tau files were
	// validated and reported (tau/validate); only open pull requests' heads
	// are kept.
	// +optional
	ValidatedHeads []string `json:"validatedHeads,omitempty"`

	// RefCount is how many watched refs the last poll saw.
	// +optional
	RefCount int `json:"refCount,omitempty"`

	// LastPollTime is when a poll last saw the refs change, refreshed at
	// least every 10 intervals: idle polls write nothing.
	// +optional
	LastPollTime *metav1.Time `json:"lastPollTime,omitempty"`

	// LastHandledNudge is the value of the nudge annotation last acted on.
	// +optional
	LastHandledNudge string `json:"lastHandledNudge,omitempty"`

	// WebhookPath is where the controller's webhook receiver serves this
	// repository, e.g. /hooks/<id>: add the receiver's host and this path
	// as the forge's webhook URL. Derived from the webhook secret, so it
	// changes when the secret does; empty without spec.webhook or while
	// its Secret is missing.
	// +optional
	WebhookPath string `json:"webhookPath,omitempty"`

	// Notifications is each notification target's last outcome: a target
	// whose deliveries fail says why here.
	// +listType=map
	// +listMapKey=name
	// +optional
	Notifications []NotificationTargetStatus `json:"notifications,omitempty"`

	// RefusedRefs are run tags, run refs and branch commits that request a
	// run that cannot be created as asked (a bad run request, a target
	// that is not a valid name, a TauRun the API server refused), newest
	// first, at most MaxRefusedRefs. Each stays until its ref is deleted
	// or moves; polling goes on meanwhile.
	// +listType=map
	// +listMapKey=ref
	// +kubebuilder:validation:MaxItems=20
	// +optional
	RefusedRefs []RefusedRef `json:"refusedRefs,omitempty"`

	// ReportedRefusals are the refused refs ("<ref>@<sha>") whose failure
	// status was posted to the forge, so none is posted twice. Written
	// only by the forge reporter.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	ReportedRefusals []string `json:"reportedRefusals,omitempty"`
}

// ConditionRefsRefused is True while status.refusedRefs lists refs that
// requested runs TauGrid will not start; its message names them (bounded).
const ConditionRefsRefused = "RefsRefused"

// MaxRefusedRefs bounds status.refusedRefs: a push of a thousand bad refs
// must not grow the status past etcd's object limit.
const MaxRefusedRefs = 20

// RefusedRef is a ref that requests a run TauGrid will not start, and why.
type RefusedRef struct {
	// Ref is the full ref name, e.g. refs/tau/runs/r-20261130-101500-3f9a2c.
	// +kubebuilder:validation:MaxLength=4096
	Ref string `json:"ref"`
	// SHA is the object the ref named when refused (a commit or an
	// annotated tag); a ref that moves is judged anew.
	SHA string `json:"sha"`
	// Commit is the commit the ref requests a run of.
	Commit string `json:"commit"`
	// Reason is a CamelCase reason, e.g. BadRunRequest or RunRefused.
	Reason string `json:"reason"`
	// Message says what is wrong and what to change, in one line.
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
	// Time is when it was refused.
	Time metav1.Time `json:"time"`
}

// RunRefLedger is the compact record of a repository's run tags and run
// refs that keeps run creation exactly-once: every ref the last poll saw
// either has a TauRun (labelled with its ref and object) or is among Unrun.
type RunRefLedger struct {
	// Digest names the run tags and run refs, with their objects, that the
	// last poll saw (a sum of one 128-bit XXH3 hash per ref): a poll that
	// lists the same digest has nothing new.
	Digest string `json:"digest"`

	// Count is how many run tags and run refs that was.
	// +optional
	Count int `json:"count,omitempty"`

	// Unrun are 48-bit fingerprints, sorted and varint delta encoded, of
	// those refs that started no run: the run tags already there when the
	// repository was registered, and refused refs. About 7 bytes each.
	// +optional
	Unrun []byte `json:"unrun,omitempty"`
}

// ObservedRef is where a ref pointed when last seen.
type ObservedRef struct {
	// Name is the full ref name, e.g. refs/tags/run/lr-sweep.
	Name string `json:"name"`
	// SHA is the object the ref names: a commit or an annotated tag.
	SHA string `json:"sha"`
	// Peeled is the commit an annotated tag points at.
	// +optional
	Peeled string `json:"peeled,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=trepo,categories=tau
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Last Poll",type=date,JSONPath=`.status.lastPollTime`
// +kubebuilder:printcolumn:name="Webhook Path",type=string,JSONPath=`.status.webhookPath`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TauRepository is a research repo whose run tags, run refs and tau file
// changes start runs in its namespace.
type TauRepository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TauRepositorySpec   `json:"spec"`
	Status TauRepositoryStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TauRepositoryList is a list of TauRepositories.
type TauRepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TauRepository `json:"items"`
}

func init() {
	register(&TauRepository{}, &TauRepositoryList{})
}

// NotificationEvent is something about a run that a notification target
// may be told.
// +kubebuilder:validation:Enum=ended;failed;preempted;waiting;idle
type NotificationEvent string

// The notification events.
const (
	NotifyEnded     NotificationEvent = "ended"     // the run succeeded, failed or was cancelled
	NotifyFailed    NotificationEvent = "failed"    // the run failed
	NotifyPreempted NotificationEvent = "preempted" // an attempt was preempted
	NotifyWaiting   NotificationEvent = "waiting"   // the run has been queued longer than waitingAfter
	NotifyIdle      NotificationEvent = "idle"      // the run's GPUs have been idle longer than idleAfter
)

// Notification formats.
const (
	// NotifyFormatJSON is TauGrid's own JSON payload, signed with
	// HMAC-SHA256 in X-Tau-Signature-256.
	NotifyFormatJSON = "json"
	// NotifyFormatSlack is a Slack-compatible incoming webhook message.
	NotifyFormatSlack = "slack"
)

// The keys of a notification target's Secret.
const (
	NotifyURLKey  = "url"
	NotifyHMACKey = "hmacKey"
)

// NotificationTarget is one place a repository's runs are announced.
type NotificationTarget struct {
	// Name names the target in the repository's status and in each run's
	// record of what was delivered.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Format is "json" (TauGrid's payload, signed with the Secret's
	// hmacKey) or "slack" (an incoming webhook's message).
	// +kubebuilder:validation:Enum=json;slack
	// +kubebuilder:default=json
	// +optional
	Format string `json:"format,omitempty"`

	// SecretRef names a Secret in the repository's namespace: its "url"
	// is where deliveries go (a webhook URL is a credential: it never
	// appears in the spec); for "json" its "hmacKey" signs them.
	// +kubebuilder:validation:MinLength=1
	SecretRef string `json:"secretRef"`

	// Events are what the target is told.
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Events []NotificationEvent `json:"events"`

	// WaitingAfter is how long a run waits in its queue before "waiting"
	// is sent. Default 30m.
	// +optional
	WaitingAfter *metav1.Duration `json:"waitingAfter,omitempty"`

	// IdleAfter is how long a running run's GPUs sit idle before "idle" is
	// sent. Default 30m.
	// +optional
	IdleAfter *metav1.Duration `json:"idleAfter,omitempty"`
}

// NotificationTargetStatus is a notification target's last outcome.
type NotificationTargetStatus struct {
	Name string `json:"name"`
	// Failing is true while the target's last delivery failed for good
	// (it was retried until it was given up).
	// +optional
	Failing bool `json:"failing,omitempty"`
	// Message says what the last failure was: the HTTP status or the
	// error, never the URL.
	// +optional
	Message string `json:"message,omitempty"`
	// LastDelivered is when a delivery last succeeded.
	// +optional
	LastDelivered *metav1.Time `json:"lastDelivered,omitempty"`
	// LastFailed is when a delivery was last given up.
	// +optional
	LastFailed *metav1.Time `json:"lastFailed,omitempty"`
}
