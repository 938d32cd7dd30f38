package sbom

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdxlib"
)

const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// image is an artifact as imagebuild describes one: modules from two
// platforms' binaries (so repeated), out of order, and Debian packages.
func image() Artifact {
	return Artifact{Name: "tau-nodeagent", Version: "v1.2.3", SHA256: digest, Purpose: "CONTAINER",
		PURL:    "pkg:oci/tau-nodeagent@sha256%3A" + digest,
		Created: time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600)),
		Go: GoBuild{Main: Module{Path: "github.com/taugrid/taugrid", Version: "v1.2.3"}, Toolchain: "go1.26.0",
			Deps: []Module{
				{"github.com/spf13/cobra", "v1.10.2", "h1:cobra="},
				{"github.com/docker/cli", "v29.7.2+incompatible", "h1:docker="},
				{"github.com/spf13/cobra", "v1.10.2", "h1:cobra="},
			}},
		Debian: []DebianPackage{{"libc6", "2.36-9+deb12u14"}, {"ca-certificates", "20230311+deb12u1"}},
	}
}

func write(t *testing.T, a Artifact) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, a); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestADocumentReadsBackAsSPDXWithEveryPackageAndRelationship parses the
// written JSON with tools-golang's reader, as an SBOM consumer would.
func TestADocumentReadsBackAsSPDXWithEveryPackageAndRelationship(t *testing.T) {
	data := write(t, image())
	doc, err := spdxjson.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("reading the document back: %v\n%s", err, data)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Errorf("the document does not validate: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.CreationInfo.Created != "2026-05-01T10:00:00Z" ||
		doc.DocumentNamespace != "https://taugrid.dev/spdx/tau-nodeagent-v1.2.3-"+digest {
		t.Errorf("version %q, licence %q, created %q, namespace %q", doc.SPDXVersion, doc.DataLicense, doc.CreationInfo.Created, doc.DocumentNamespace)
	}
	if got := doc.CreationInfo.Creators[0]; got.CreatorType != "Tool" || got.Creator != "taugrid-release" {
		t.Errorf("creator %+v, want Tool: taugrid-release", got)
	}

	want := map[string]string{ // package name@version: its purl
		"tau-nodeagent@v1.2.3":                       "pkg:oci/tau-nodeagent@sha256%3A" + digest,
		"github.com/taugrid/taugrid@v1.2.3":          "pkg:golang/github.com/taugrid/taugrid@v1.2.3",
		"stdlib@go1.26.0":                            "pkg:golang/stdlib@1.26.0",
		"github.com/spf13/cobra@v1.10.2":             "pkg:golang/github.com/spf13/cobra@v1.10.2",
		"github.com/docker/cli@v29.7.2+incompatible": "pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible",
		"libc6@2.36-9+deb12u14":                      "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14",
		"ca-certificates@20230311+deb12u1":           "pkg:deb/debian/ca-certificates@20230311%2Bdeb12u1",
	}
	got := map[string]string{}
	byID := map[spdx.ElementID]string{}
	for _, p := range doc.Packages {
		key := p.PackageName + "@" + p.PackageVersion
		byID[p.PackageSPDXIdentifier] = key
		for _, r := range p.PackageExternalReferences {
			if r.Category == "PACKAGE-MANAGER" && r.RefType == "purl" {
				got[key] = r.Locator
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("packages and purls (-want +got):\n%s", diff)
	}
	if root := doc.Packages[0]; len(root.PackageChecksums) != 1 || root.PackageChecksums[0].Value != digest || root.PrimaryPackagePurpose != "CONTAINER" {
		t.Errorf("the artifact's package: %+v", root)
	}

	var rels []string
	for _, r := range doc.Relationships {
		a := byID[r.RefA.ElementRefID]
		if r.RefA.ElementRefID == "DOCUMENT" {
			a = "DOCUMENT"
		}
		rels = append(rels, a+" "+r.Relationship+" "+byID[r.RefB.ElementRefID])
	}
	wantRels := []string{
		"DOCUMENT DESCRIBES tau-nodeagent@v1.2.3",
		"tau-nodeagent@v1.2.3 CONTAINS github.com/taugrid/taugrid@v1.2.3",
		"tau-nodeagent@v1.2.3 CONTAINS stdlib@go1.26.0",
		"github.com/taugrid/taugrid@v1.2.3 DEPENDS_ON stdlib@go1.26.0",
		"tau-nodeagent@v1.2.3 CONTAINS github.com/docker/cli@v29.7.2+incompatible",
		"github.com/taugrid/taugrid@v1.2.3 DEPENDS_ON github.com/docker/cli@v29.7.2+incompatible",
		"tau-nodeagent@v1.2.3 CONTAINS github.com/spf13/cobra@v1.10.2",
		"github.com/taugrid/taugrid@v1.2.3 DEPENDS_ON github.com/spf13/cobra@v1.10.2",
		"tau-nodeagent@v1.2.3 CONTAINS ca-certificates@20230311+deb12u1",
		"tau-nodeagent@v1.2.3 CONTAINS libc6@2.36-9+deb12u14",
	}
	if diff := cmp.Diff(wantRels, rels); diff != "" {
		t.Errorf("relationships (-want +got):\n%s", diff)
	}
}

// TestTwoWritesOfOneArtifactAreTheSameBytes: the modules' order and
// repeats (one list per platform) do not change the document.
func TestTwoWritesOfOneArtifactAreTheSameBytes(t *testing.T) {
	a, b := image(), image()
	b.Go.Deps = []Module{b.Go.Deps[1], b.Go.Deps[0]}
	b.Debian = []DebianPackage{b.Debian[1], b.Debian[0], b.Debian[1]}
	if first, second := write(t, a), write(t, b); !bytes.Equal(first, second) {
		t.Errorf("two writes differ:\n%s\n%s", first, second)
	}
}

// TestAnArtifactWithoutADigestIsRefused: a document that names no digest
// would not say which artifact it describes.
func TestAnArtifactWithoutADigestIsRefused(t *testing.T) {
	a := image()
	a.SHA256 = "sha256:" + digest
	if err := Write(&bytes.Buffer{}, a); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("an artifact with a prefixed digest: %v, want a refusal", err)
	}
}

// TestFromBuildInfoListsWhatWasLinked: a replaced module is listed as its
// replacement, and an unstamped main module takes the release's version.
func TestFromBuildInfoListsWhatWasLinked(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/taugrid/taugrid", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "github.com/spf13/cobra", Version: "v1.10.2", Sum: "h1:a="},
			{Path: "example.com/old", Version: "v1.0.0", Sum: "h1:b=", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1", Sum: "h1:c="}},
		}}
	want := GoBuild{Main: Module{Path: "github.com/taugrid/taugrid", Version: "v1.2.3"}, Toolchain: "go1.26.0",
		Deps: []Module{{"github.com/spf13/cobra", "v1.10.2", "h1:a="}, {"example.com/fork", "v1.0.1", "h1:c="}}}
	if diff := cmp.Diff(want, FromBuildInfo(info, "v1.2.3")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestOCIPURLNamesTheImageByDigest: the repository and tag are qualifiers,
// their slashes and a registry port's colon kept, anything else escaped.
func TestOCIPURLNamesTheImageByDigest(t *testing.T) {
	tests := map[string]struct {
		name, repository, tag string
		want                  string
	}{
		"a published image": {"tau", "ghcr.io/taugrid/tau", "v1.2.3",
			"pkg:oci/tau@sha256%3A" + digest + "?repository_url=ghcr.io/taugrid/tau&tag=v1.2.3"},
		"a registry on a port, a tag with a plus": {"tau-controller", "127.0.0.1:5000/taugrid/tau-controller", "v1.2.3+rc.1",
			"pkg:oci/tau-controller@sha256%3A" + digest + "?repository_url=127.0.0.1:5000/taugrid/tau-controller&tag=v1.2.3%2Brc.1"},
		"no repository, no tag": {"tau", "", "", "pkg:oci/tau@sha256%3A" + digest},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := OCIPURL(tc.name, digest, tc.repository, tc.tag); got != tc.want {
				t.Errorf("OCIPURL = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestDescribedIsTheArtifact: a reader of a document finds the artifact it
// is about, and a document about two things is refused.
func TestDescribedIsTheArtifact(t *testing.T) {
	doc, err := spdxjson.Read(bytes.NewReader(write(t, image())))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Described(doc)
	if err != nil || p.PackageName != "tau-nodeagent" || p.PackageVersion != "v1.2.3" || p.PackageChecksums[0].Value != digest {
		t.Fatalf("Described = %+v, %v; want tau-nodeagent v1.2.3", p, err)
	}
	doc.Relationships = append(doc.Relationships, relate("DOCUMENT", "DESCRIBES", doc.Packages[1].PackageSPDXIdentifier))
	if _, err := Described(doc); err == nil || !strings.Contains(err.Error(), "describes 2 packages") {
		t.Errorf("a document describing two packages: %v, want a refusal", err)
	}
}
