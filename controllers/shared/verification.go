package shared

// ReasonSignatureRefused: a run's tag or commit is not signed by an allowed
// key, so it submits nothing.
const ReasonSignatureRefused = "SignatureRefused"
