package shared

// The condition and reasons more than one controller reads or writes:
// they are how the controllers talk (see controllers/doc.go). A reason a
// single controller sets lives in that controller's package.
const (
	// ConditionEvidence says whether every ended attempt of a run has a
	// sealed evidence bundle. The run controller sets it False with
	// ReasonSealing when an attempt ends; the evidence controller seals
	// the bundle and sets it True (ReasonEvidenceSealed), or False with
	// its own reason when the store failed and the bundle is retried. The
	// run's phase never depends on it.
	ConditionEvidence = "EvidenceSealed"
	// ReasonSealing: an attempt ended and the evidence controller has not
	// sealed its bundle yet.
	ReasonSealing = "Sealing"
	// ReasonEvidenceSealed: every ended attempt's bundle is sealed.
	ReasonEvidenceSealed = "Sealed"
	// ReasonSignatureRefused: a run's tag or commit is not signed by an
	// allowed key, so it submits nothing. The repository controller refuses
	// the ref with it; the run controller fails a run whose recorded check
	// refused it.
	ReasonSignatureRefused = "SignatureRefused"
	// ReasonGitUnavailable: the git remote of a platform or repository did
	// not answer; the poll is retried at its interval.
	ReasonGitUnavailable = "GitUnavailable"
)

// KueueJobUID is the label Kueue puts on a Workload: its job's UID.
const KueueJobUID = "kueue.x-k8s.io/job-uid"
