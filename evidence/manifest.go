package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SchemaVersion is the version of the manifest format this package writes.
const SchemaVersion = 1

// ManifestKind names the manifest format inside the document itself.
const ManifestKind = "taugrid.dev/evidence-bundle"

// Media types of the artifacts a bundle holds.
const (
	MediaJSON = "application/json"
	MediaYAML = "application/yaml"
	MediaText = "text/plain; charset=utf-8"
)

// Names of the artifacts every bundle has; raw files are added under
// "tau-file/", "policy/" and "logs/".
const (
	ArtifactRecord       = "record.json"        // what happened: Record
	ArtifactRenderInputs = "render-inputs.json" // what rendering needs besides the files: RenderInputs
	ArtifactManifests    = "manifests.yaml"     // the objects the attempt submitted
	PrefixTauFile        = "tau-file/"
	PrefixPolicy         = "policy/"
	PrefixLogs           = "logs/"
)

// Key names a bundle: one attempt of one run.
type Key struct {
	Namespace string `json:"namespace"`
	Run       string `json:"run"`
	Attempt   int    `json:"attempt"`
}

// Path is the key's place in a store.
func (k Key) Path() string {
	return fmt.Sprintf("bundles/%s/%s/%d.json", k.Namespace, k.Run, k.Attempt)
}

// AttestationPath is the place of the bundle's signed attestation, next
// to its manifest.
func (k Key) AttestationPath() string {
	return fmt.Sprintf("bundles/%s/%s/%d.intoto.json", k.Namespace, k.Run, k.Attempt)
}

func (k Key) String() string { return fmt.Sprintf("%s/%s#%d", k.Namespace, k.Run, k.Attempt) }

// KeyOfPath reads a key from a manifest's store path (Key.Path).
func KeyOfPath(p string) (Key, bool) { return parseKeyPath(p) }

// parseKeyPath is the inverse of Key.Path.
func parseKeyPath(p string) (Key, bool) {
	parts := strings.Split(strings.TrimPrefix(p, "bundles/"), "/")
	if len(parts) != 3 || !strings.HasPrefix(p, "bundles/") || !strings.HasSuffix(parts[2], ".json") {
		return Key{}, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(parts[2], ".json"))
	if err != nil || n < 1 {
		return Key{}, false
	}
	return Key{Namespace: parts[0], Run: parts[1], Attempt: n}, true
}

// Artifact is one file of a bundle.
type Artifact struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	// SHA256 is the hex digest of the content; the content is stored under
	// blobs/sha256/<SHA256>.
	SHA256 string `json:"sha256"`
}

// Manifest is a sealed bundle's table of contents.
type Manifest struct {
	SchemaVersion int       `json:"schema_version"`
	Kind          string    `json:"kind"`
	Key           Key       `json:"key"`
	Outcome       string    `json:"outcome"`
	SealedAt      time.Time `json:"sealed_at"`
	// Artifacts in name order.
	Artifacts []Artifact `json:"artifacts"`
}

// Artifact returns the named artifact, if the bundle has it.
func (m *Manifest) Artifact(name string) (Artifact, bool) {
	i := slices.IndexFunc(m.Artifacts, func(a Artifact) bool { return a.Name == name })
	if i < 0 {
		return Artifact{}, false
	}
	return m.Artifacts[i], true
}

// ParseManifest reads a manifest, refusing versions it does not know.
func ParseManifest(data []byte) (*Manifest, error) {
	m := &Manifest{}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("evidence manifest: %w", err)
	}
	if m.Kind != ManifestKind || m.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("evidence manifest: kind %q version %d, want %s version %d", m.Kind, m.SchemaVersion, ManifestKind, SchemaVersion)
	}
	return m, nil
}

// Bundle is a bundle being assembled, not yet sealed.
type Bundle struct {
	Key     Key
	Outcome string
	blobs   map[string][]byte // by artifact name
	types   map[string]string
}

// NewBundle starts the bundle of one attempt.
func NewBundle(key Key, outcome string) *Bundle {
	return &Bundle{Key: key, Outcome: outcome, blobs: map[string][]byte{}, types: map[string]string{}}
}

// Add puts an artifact in the bundle; a later Add of the same name replaces it.
func (b *Bundle) Add(name, mediaType string, data []byte) {
	b.blobs[name], b.types[name] = data, mediaType
}

// AddJSON adds v as indented JSON.
func (b *Bundle) AddJSON(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("evidence %s: %w", name, err)
	}
	b.Add(name, MediaJSON, append(data, '\n'))
	return nil
}

// Sealed is a bundle ready to store: its manifest and the content of every
// artifact by digest.
type Sealed struct {
	Manifest *Manifest
	// Raw is the manifest as stored; its digest identifies the bundle.
	Raw   []byte
	Blobs map[string][]byte // by hex sha256
	// Attestation is the bundle's signed in-toto statement (Attest), a
	// DSSE envelope; nil for a bundle sealed unsigned.
	Attestation []byte
}

// Digest is the bundle's identity: sha256 of its manifest.
func (s *Sealed) Digest() string { return "sha256:" + digestOf(s.Raw) }

// Seal computes every digest and writes the manifest.
func (b *Bundle) Seal(now time.Time) (*Sealed, error) {
	m := &Manifest{SchemaVersion: SchemaVersion, Kind: ManifestKind, Key: b.Key, Outcome: b.Outcome, SealedAt: now.UTC().Truncate(time.Second)}
	blobs := map[string][]byte{}
	for _, name := range slices.Sorted(maps.Keys(b.blobs)) {
		data := b.blobs[name]
		d := digestOf(data)
		blobs[d] = data
		m.Artifacts = append(m.Artifacts, Artifact{Name: name, MediaType: b.types[name], Size: int64(len(data)), SHA256: d})
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return &Sealed{Manifest: m, Raw: append(raw, '\n'), Blobs: blobs}, nil
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
