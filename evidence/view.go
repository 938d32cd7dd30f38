package evidence

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// ViewSchemaVersion is the version of the page's JSON.
const ViewSchemaVersion = 1

// View is what the evidence page shows, as HTML or JSON: the live run when
// the cluster still has it, and every sealed bundle.
type View struct {
	SchemaVersion int    `json:"schema_version"`
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	// Live: the run exists in the cluster; else only sealed evidence is left.
	Live          bool    `json:"live"`
	Phase         string  `json:"phase"`
	Message       string  `json:"message,omitempty"`
	Repository    string  `json:"repository"`
	RepositoryURL string  `json:"repository_url,omitempty"`
	WebURL        string  `json:"web_url,omitempty"`
	CommitURL     string  `json:"commit_url,omitempty"`
	Commit        string  `json:"commit"`
	Target        string  `json:"target"`
	Trigger       Trigger `json:"trigger"`
	Inputs        Inputs  `json:"inputs"`
	// Timeline is every phase the run went through.
	Timeline []TimelineEntry `json:"timeline"`
	// Wait explains the time in Kueue's queue.
	Wait     *Wait         `json:"wait,omitempty"`
	Attempts []AttemptView `json:"attempts"`
	Bundles  []BundleRef   `json:"bundles"`
	// SigningKey is the key that signs the bundles' attestations; nil when
	// the page does not know it.
	SigningKey *SigningKey `json:"signing_key,omitempty"`
	At         time.Time   `json:"generated_at"`
}

// SigningKey is the public key auditors verify attestations with.
type SigningKey struct {
	// PublicKey is PKIX PEM, the cosign.pub of cosign --key.
	PublicKey   string `json:"public_key"`
	Fingerprint string `json:"fingerprint"`
	// URL is the page-relative path of the key as a file.
	URL string `json:"url"`
}

// TimelineEntry is one phase, with its duration in words.
type TimelineEntry struct {
	PhaseSpan
	Duration string `json:"duration"`
	Current  bool   `json:"current,omitempty"`
}

// Wait is the run's time in the queue, explained.
type Wait struct {
	Queue       string  `json:"queue"`
	Waiting     bool    `json:"waiting"`
	Seconds     float64 `json:"seconds"`
	Duration    string  `json:"duration"`
	Reason      string  `json:"reason,omitempty"`
	Explanation string  `json:"explanation"`
}

// AttemptView is one attempt and, once sealed, its evidence.
type AttemptView struct {
	AttemptInfo
	Outcome     string         `json:"outcome,omitempty"`
	Sealed      bool           `json:"sealed"`
	Kueue       *KueueTimeline `json:"kueue,omitempty"`
	Pods        []PodRecord    `json:"pods,omitempty"`
	Nodes       []NodeRecord   `json:"nodes,omitempty"`
	Checkpoints *Checkpoints   `json:"checkpoints,omitempty"`
	Metrics     *Metrics       `json:"metrics,omitempty"`
	Events      []EventRecord  `json:"events,omitempty"`
	Logs        []LogView      `json:"logs,omitempty"`
	Notes       []string       `json:"notes,omitempty"`
}

// LogView is a log tail with its text.
type LogView struct {
	LogTail
	Text string `json:"text"`
}

// BundleRef links a sealed bundle.
type BundleRef struct {
	Key      Key       `json:"key"`
	Digest   string    `json:"digest"`
	SealedAt time.Time `json:"sealed_at"`
	Outcome  string    `json:"outcome"`
	// Manifest is the page-relative path of the raw manifest.
	Manifest string `json:"manifest"`
	// Attestation is the page-relative path of its signed in-toto
	// attestation (a DSSE envelope); "" when it was sealed without one.
	Attestation string         `json:"attestation,omitempty"`
	Artifacts   []ArtifactLink `json:"artifacts"`
}

// ArtifactLink is an artifact and where the page serves it.
type ArtifactLink struct {
	Artifact
	URL string `json:"url"`
}

// Loaded is a sealed bundle read back from a store.
type Loaded struct {
	Manifest *Manifest
	Digest   string
	Record   *Record
	Logs     map[string][]byte // by artifact name
	// Attested says the store holds the bundle's attestation.
	Attested bool
}

// Live is the run as the cluster has it now.
type Live struct {
	Run           *taugridv1.TauRun
	RepositoryURL string
}

// BuildView assembles the page from the live run (nil when gone) and the
// sealed bundles, oldest attempt first. Text from the live run is masked
// with m; sealed records were masked when they were sealed.
func BuildView(live *Live, bundles []*Loaded, m *Masker, now time.Time) *View {
	v := &View{SchemaVersion: ViewSchemaVersion, At: now.UTC(), Attempts: []AttemptView{}, Bundles: []BundleRef{}}
	var last *Record
	if n := len(bundles); n > 0 {
		last = bundles[n-1].Record
	}
	switch {
	case live != nil:
		v.fromLive(live, m, now)
	case last != nil:
		v.fromRecord(last)
	}
	v.RepositoryURL = StripCredentials(v.RepositoryURL)
	v.WebURL = WebURL(v.RepositoryURL)
	if v.WebURL != "" && v.Commit != "" {
		v.CommitURL = v.WebURL + "/commit/" + v.Commit
	}
	for _, b := range bundles {
		v.addBundle(b)
	}
	return v
}

func (v *View) fromLive(l *Live, m *Masker, now time.Time) {
	r := l.Run
	v.Live = true
	v.Namespace, v.Name, v.Phase, v.Message = r.Namespace, r.Name, string(r.Status.Phase), m.Mask(r.Status.Message)
	v.Repository, v.RepositoryURL, v.Commit, v.Target = r.Spec.Repository, l.RepositoryURL, r.Spec.Commit, r.Spec.Target
	v.Trigger = TriggerOf(r)
	for k, o := range v.Trigger.Overrides {
		v.Trigger.Overrides[k] = m.Mask(o)
	}
	v.Inputs = InputsOf(r)
	spans := PhaseSpans(r.Status.Phases, now, !final(r.Status.Phase))
	v.setTimeline(spans, !final(r.Status.Phase))
	for _, a := range AttemptInfos(r.Status.Attempts) {
		a.Reason = m.Mask(a.Reason)
		v.Attempts = append(v.Attempts, AttemptView{AttemptInfo: a})
	}
	var queue, reason string
	waiting := r.Status.Phase == taugridv1.PhaseQueued
	if w := r.Status.Workload; w != nil {
		queue, reason = w.Queue, m.Mask(w.Reason)
	}
	v.Wait = waitOf(spans, queue, reason, waiting)
}

func (v *View) fromRecord(rec *Record) {
	v.Namespace, v.Name, v.Phase, v.Message = rec.Run.Namespace, rec.Run.Name, rec.Run.Phase, rec.Run.Message
	v.Repository, v.RepositoryURL, v.Commit, v.Target = rec.Run.Repository, rec.Run.RepositoryURL, rec.Run.Commit, rec.Run.Target
	v.Trigger, v.Inputs = rec.Trigger, rec.Inputs
	v.setTimeline(rec.Phases, false)
	for _, a := range rec.Attempts {
		v.Attempts = append(v.Attempts, AttemptView{AttemptInfo: a})
	}
	queue := ""
	if rec.Kueue != nil {
		queue = rec.Kueue.Queue
	}
	v.Wait = waitOf(rec.Phases, queue, "", false)
}

func (v *View) setTimeline(spans []PhaseSpan, running bool) {
	for i, s := range spans {
		e := TimelineEntry{PhaseSpan: s, Duration: HumanDuration(time.Duration(s.Seconds * float64(time.Second)))}
		if i == len(spans)-1 {
			e.Current = running
			if !running {
				e.Duration = ""
			}
		}
		v.Timeline = append(v.Timeline, e)
	}
}

// waitOf sums the time spent Queued and explains it.
func waitOf(spans []PhaseSpan, queue, reason string, waiting bool) *Wait {
	var secs float64
	seen := false
	for _, s := range spans {
		if s.Phase == string(taugridv1.PhaseQueued) {
			secs += s.Seconds
			seen = true
		}
	}
	if !seen {
		return nil
	}
	w := &Wait{Queue: queue, Waiting: waiting, Seconds: secs, Duration: HumanDuration(time.Duration(secs * float64(time.Second)))}
	if waiting {
		w.Reason, w.Explanation = reason, ExplainWait(reason)
	} else {
		w.Explanation = "Waited " + w.Duration + " in queue " + queue + " before Kueue admitted it."
	}
	return w
}

// carry appends a signed link's query to the view's links to the run's
// bundles and blobs; "" leaves them as they are.
func (v *View) carry(link string) {
	if link == "" {
		return
	}
	if v.SigningKey != nil {
		v.SigningKey.URL += "?" + link
	}
	for i := range v.Bundles {
		b := &v.Bundles[i]
		b.Manifest += "?" + link
		if b.Attestation != "" {
			b.Attestation += "?" + link
		}
		for j := range b.Artifacts {
			b.Artifacts[j].URL += "?" + link
		}
	}
}

func (v *View) addBundle(b *Loaded) {
	k := b.Manifest.Key
	base := "/runs/" + k.Namespace + "/" + k.Run
	ref := BundleRef{Key: k, Digest: b.Digest, SealedAt: b.Manifest.SealedAt, Outcome: b.Manifest.Outcome,
		Manifest: base + "/bundles/" + strconv.Itoa(k.Attempt) + ".json"}
	if b.Attested {
		ref.Attestation = base + "/attestations/" + strconv.Itoa(k.Attempt) + ".json"
	}
	for _, a := range b.Manifest.Artifacts {
		ref.Artifacts = append(ref.Artifacts, ArtifactLink{Artifact: a, URL: base + "/blobs/" + a.SHA256})
	}
	v.Bundles = append(v.Bundles, ref)
	i := slices.IndexFunc(v.Attempts, func(a AttemptView) bool { return a.Number == k.Attempt })
	if i < 0 {
		v.Attempts = append(v.Attempts, AttemptView{AttemptInfo: AttemptInfo{Number: k.Attempt}})
		i = len(v.Attempts) - 1
	}
	a := &v.Attempts[i]
	a.Outcome, a.Sealed = b.Manifest.Outcome, true
	rec := b.Record
	if rec == nil {
		return
	}
	if j := slices.IndexFunc(rec.Attempts, func(x AttemptInfo) bool { return x.Number == k.Attempt }); j >= 0 && a.End == nil {
		a.AttemptInfo = rec.Attempts[j] // the live status, when there is one, is as complete
	} else if j >= 0 && a.GPUUsage == nil {
		a.GPUUsage = rec.Attempts[j].GPUUsage
	}
	a.Kueue, a.Pods, a.Nodes, a.Metrics, a.Events, a.Notes = rec.Kueue, rec.Pods, rec.Nodes, rec.Metrics, rec.Events, rec.Notes
	a.Checkpoints = &rec.Checkpoints
	for _, l := range rec.Logs {
		a.Logs = append(a.Logs, LogView{LogTail: l, Text: string(b.Logs[l.Artifact])})
	}
}

// TriggerOf reads a run's trigger, and the signature check its status
// records.
func TriggerOf(r *taugridv1.TauRun) Trigger {
	return Trigger{Kind: string(r.Spec.Trigger.Kind), Ref: r.Spec.Trigger.Ref, Requester: r.Spec.Trigger.Requester,
		Overrides: maps.Clone(r.Spec.Trigger.Overrides), Signature: SignatureOf(r.Status.Signature), Signer: SignerOf(r.Status.Signature)}
}

// SignerOf is who signed the run's ref with which key; nil unless the
// signature verified.
func SignerOf(s *taugridv1.SignatureStatus) *Signer {
	if s == nil || !s.Verified {
		return nil
	}
	return &Signer{Method: s.Method, Principal: s.Principal, Fingerprint: s.Fingerprint, Object: s.Object}
}

// SignatureOf says in one line who signed what the run ran, or why it was
// refused. Runs of repositories that require no signature carry no check.
func SignatureOf(s *taugridv1.SignatureStatus) string {
	switch {
	case s == nil:
		return "not checked (the repository requires no signature)"
	case !s.Verified:
		return s.Reason
	}
	return fmt.Sprintf("verified: %s signed by %s with %s key %s", s.Object, s.Principal, s.Method, s.Fingerprint)
}

// InputsOf reads the digests a run's status records.
func InputsOf(r *taugridv1.TauRun) Inputs {
	s := &r.Status
	return Inputs{TauFile: s.TauFile, ConfigDigest: s.ConfigDigest, PolicyCommit: s.PolicyCommit, PolicyDigest: s.PolicyDigest, SourceDigest: s.SourceDigest}
}

// PhaseSpans turns phase transitions into spans. The last span lasts until
// now when the run is still going, else it has no length.
func PhaseSpans(ts []taugridv1.PhaseTransition, now time.Time, running bool) []PhaseSpan {
	out := make([]PhaseSpan, 0, len(ts))
	for i, t := range ts {
		s := PhaseSpan{Phase: string(t.Phase), Start: t.Time.UTC()}
		switch {
		case i+1 < len(ts):
			s.Seconds = ts[i+1].Time.Sub(t.Time.Time).Seconds()
		case running:
			s.Seconds = max(0, now.Sub(t.Time.Time).Seconds())
		}
		out = append(out, s)
	}
	return out
}

// AttemptInfos copies a run's attempts.
func AttemptInfos(as []taugridv1.Attempt) []AttemptInfo {
	out := make([]AttemptInfo, 0, len(as))
	for _, a := range as {
		ai := AttemptInfo{Number: a.Number, Workload: a.Workload, FailureClass: a.FailureClass, Reason: a.Reason, Nodes: a.Nodes, Cluster: a.Cluster,
			GPUUsage: GPUUsageOf(a.GPUUsage)}
		if a.StartTime != nil {
			t := a.StartTime.UTC()
			ai.Start = &t
		}
		if a.EndTime != nil {
			t := a.EndTime.UTC()
			ai.End = &t
		}
		out = append(out, ai)
	}
	return out
}

func final(p taugridv1.RunPhase) bool {
	return p == taugridv1.PhaseSucceeded || p == taugridv1.PhaseFailed || p == taugridv1.PhaseCancelled
}

var scpLike = regexp.MustCompile(`^(?:[^@/]+@)?([^:/]+):(.+)$`)

// StripCredentials drops any user and password from a URL.
func StripCredentials(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || u.Scheme == "" {
		return raw
	}
	u.User = nil
	return u.String()
}

// WebURL guesses the browsable page of a git URL (GitHub, GitLab and Gitea
// all serve /<owner>/<repo>/commit/<sha>); "" when it cannot.
func WebURL(gitURL string) string {
	u, err := url.Parse(gitURL)
	if err == nil && (u.Scheme == "https" || u.Scheme == "http") {
		u.User = nil
		return strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), ".git")
	}
	if err == nil && u.Scheme == "ssh" {
		return "https://" + u.Hostname() + strings.TrimSuffix(u.Path, ".git")
	}
	if m := scpLike.FindStringSubmatch(gitURL); m != nil && !strings.Contains(gitURL, "://") {
		return "https://" + m[1] + "/" + strings.TrimSuffix(strings.TrimPrefix(m[2], "/"), ".git")
	}
	return ""
}
