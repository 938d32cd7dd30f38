// Package evidence is the per-run evidence bundle: what ran, with what,
// where, and what happened; its stores and its HTTP view.
//
// A bundle records one attempt of a TauRun. It is a versioned JSON manifest
// (schema_version 1) listing every artifact by name, media type, size and
// sha256; the artifacts themselves are stored once, by digest. A bundle is
// sealed when its attempt ends and never changes after: a store refuses to
// overwrite a sealed bundle with different content. Verify recomputes every
// digest and re-renders the recorded manifests from the recorded inputs.
//
// Store layout (the same on a filesystem and in an S3 bucket):
//
//	blobs/sha256/<hex>                   artifact content, by digest
//	bundles/<namespace>/<run>/<n>.json   the manifest of attempt n
//
// Metrics convention. The controller cannot read a run's data volume, so a
// job that writes $TAU_OUTPUT_DIR/metrics.jsonl also prints the records it
// wants summarised to its log, one per line, prefixed "TAU_METRIC " (for
// example as its last step: sed 's/^/TAU_METRIC /' "$TAU_OUTPUT_DIR/metrics.jsonl"
// | tail -n 100). The controller scans the bounded log tail and the
// container's termination message for such lines; lines that are not one
// JSON object are skipped and counted. Records outside the tail are not
// seen: the file on the volume stays the full record, and the bundle names
// its location.
package evidence
