// Package sbom writes a release artifact's software bill of materials: an
// SPDX 2.3 JSON document, written by spdx/tools-golang, that names the
// artifact (its file and SHA-256, or its image digest), the Go module it was
// built from, the Go standard library, every module linked into the binary
// (each with its pkg:golang purl and go.sum hash) and the Debian packages
// copied into an image (pkg:deb purls). Everything in it comes from the
// artifact and the commit: the creation time is the commit's time and the
// namespace is derived from the artifact's digest, so two builds of one
// commit write the same bytes.
package sbom

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"
)

// Creator is the tool the documents name as their creator.
const Creator = "taugrid-release"

// NamespacePrefix starts every document's namespace.
const NamespacePrefix = "https://taugrid.dev/spdx/"

// Artifact is what a document describes and what went into it.
type Artifact struct {
	Name    string // tau, tau-controller
	Version string // v1.2.3
	// FileName is the artifact's file (tau_v1.2.3_linux_amd64.tar.gz); ""
	// for an image, which is no file.
	FileName string
	SHA256   string // hex: the file's digest, or the image index's
	// Purpose is SPDX's primaryPackagePurpose: ARCHIVE, CONTAINER.
	Purpose string
	// PURL names the artifact where a purl type fits it (pkg:oci/...); "" for none.
	PURL string
	// DownloadLocation is where the artifact is published; "" for NOASSERTION.
	DownloadLocation string
	// License is the artifact's declared licence (an SPDX expression); "" for NOASSERTION.
	License string
	Created time.Time // the commit's time
	Go      GoBuild
	Debian  []DebianPackage
}

// GoBuild is the Go build of the artifact's binary.
type GoBuild struct {
	Main      Module // the module built, at the release's version
	Toolchain string // go1.26.0: the standard library linked in
	Deps      []Module
}

// Module is a Go module: its path, version and go.sum hash (h1:...).
type Module struct {
	Path, Version, Sum string
}

// DebianPackage is a Debian package whose files the artifact holds.
type DebianPackage struct {
	Name, Version string
}

// FromBuildInfo reads the Go build of a binary from its embedded build
// information (debug/buildinfo.ReadFile). A build without VCS stamping
// records the main module as (devel); version, the release's, stands in.
// A replaced module is listed as its replacement, which is what was linked.
func FromBuildInfo(info *debug.BuildInfo, version string) GoBuild {
	g := GoBuild{Main: Module{Path: info.Main.Path, Version: info.Main.Version, Sum: info.Main.Sum}, Toolchain: info.GoVersion}
	if g.Main.Version == "" || g.Main.Version == "(devel)" {
		g.Main.Version = version
	}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		g.Deps = append(g.Deps, Module{Path: m.Path, Version: m.Version, Sum: m.Sum})
	}
	return g
}

// WriteFile writes a's document to path.
func WriteFile(path string, a Artifact) error {
	var buf bytes.Buffer
	if err := Write(&buf, a); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// Write writes a's document as indented JSON.
func Write(w io.Writer, a Artifact) error {
	doc, err := Document(a)
	if err != nil {
		return err
	}
	return spdxjson.Write(doc, w, spdxjson.Indent("  "))
}

// Document is a's SPDX document: the artifact's package, which the
// document DESCRIBES; the artifact CONTAINS the main module, the standard
// library, every module and every Debian package; the main module
// DEPENDS_ON the standard library and every module. Modules and packages
// are sorted and listed once, whatever order and repeats a holds.
func Document(a Artifact) (*spdx.Document, error) {
	if a.Name == "" || a.Version == "" || len(a.SHA256) != 64 {
		return nil, fmt.Errorf("sbom: an artifact needs a name, a version and a SHA-256 (hex); got %q %q %q", a.Name, a.Version, a.SHA256)
	}
	ids := idSet{}
	root := artifactPackage(a, ids.next("Artifact-"+a.Name))
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      cmp.Or(a.FileName, a.Name+"-"+a.Version),
		DocumentNamespace: NamespacePrefix + url.PathEscape(a.Name+"-"+a.Version+"-"+a.SHA256),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: Creator}, {CreatorType: "Organization", Creator: "TauGrid"}},
			Created:  a.Created.UTC().Format(time.RFC3339),
		},
		Packages:      []*spdx.Package{root},
		Relationships: []*spdx.Relationship{relate("DOCUMENT", common.TypeRelationshipDescribe, root.PackageSPDXIdentifier)},
	}
	contain := func(p *spdx.Package) {
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, relate(root.PackageSPDXIdentifier, common.TypeRelationshipContains, p.PackageSPDXIdentifier))
	}
	if a.Go.Main.Path != "" {
		built := goPackage(a.Go.Main, ids.next("Go-"+a.Go.Main.Path), "APPLICATION")
		contain(built)
		deps := sortedModules(a.Go.Deps)
		if a.Go.Toolchain != "" {
			deps = append([]Module{{Path: "stdlib", Version: a.Go.Toolchain}}, deps...)
		}
		for _, m := range deps {
			p := goPackage(m, ids.next("Go-"+m.Path), "LIBRARY")
			contain(p)
			doc.Relationships = append(doc.Relationships, relate(built.PackageSPDXIdentifier, common.TypeRelationshipDependsOn, p.PackageSPDXIdentifier))
		}
	}
	for _, d := range sortedDebian(a.Debian) {
		contain(debianPackage(d, ids.next("Deb-"+d.Name)))
	}
	return doc, nil
}

func artifactPackage(a Artifact, id common.ElementID) *spdx.Package {
	p := &spdx.Package{
		PackageName:             a.Name,
		PackageSPDXIdentifier:   id,
		PackageVersion:          a.Version,
		PackageFileName:         a.FileName,
		PackageSupplier:         &common.Supplier{SupplierType: "Organization", Supplier: "TauGrid"},
		PackageDownloadLocation: cmp.Or(a.DownloadLocation, "NOASSERTION"),
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: a.SHA256}},
		PackageLicenseConcluded: "NOASSERTION",
		PackageLicenseDeclared:  cmp.Or(a.License, "NOASSERTION"),
		PackageCopyrightText:    "NOASSERTION",
		PrimaryPackagePurpose:   a.Purpose,
	}
	if a.PURL != "" {
		p.PackageExternalReferences = []*spdx.PackageExternalReference{purl(a.PURL)}
	}
	return p
}

// goPackage is a module's package. The go.sum hash is no SPDX checksum (it
// hashes the module's file tree, not a file), so it goes in the comment.
func goPackage(m Module, id common.ElementID, purpose string) *spdx.Package {
	p := &spdx.Package{
		PackageName:               m.Path,
		PackageSPDXIdentifier:     id,
		PackageVersion:            m.Version,
		PackageDownloadLocation:   "NOASSERTION",
		PackageLicenseConcluded:   "NOASSERTION",
		PackageLicenseDeclared:    "NOASSERTION",
		PackageCopyrightText:      "NOASSERTION",
		PrimaryPackagePurpose:     purpose,
		PackageExternalReferences: []*spdx.PackageExternalReference{purl(GoPURL(m.Path, m.Version))},
	}
	if m.Sum != "" {
		p.PackageComment = "go.sum: " + m.Sum
	}
	return p
}

func debianPackage(d DebianPackage, id common.ElementID) *spdx.Package {
	return &spdx.Package{
		PackageName:               d.Name,
		PackageSPDXIdentifier:     id,
		PackageVersion:            d.Version,
		PackageSupplier:           &common.Supplier{SupplierType: "Organization", Supplier: "Debian"},
		PackageDownloadLocation:   "NOASSERTION",
		PackageLicenseConcluded:   "NOASSERTION",
		PackageLicenseDeclared:    "NOASSERTION",
		PackageCopyrightText:      "NOASSERTION",
		PackageExternalReferences: []*spdx.PackageExternalReference{purl(DebianPURL(d.Name, d.Version))},
	}
}

func purl(locator string) *spdx.PackageExternalReference {
	return &spdx.PackageExternalReference{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: locator}
}

func relate(a common.ElementID, kind string, b common.ElementID) *spdx.Relationship {
	return &spdx.Relationship{RefA: common.MakeDocElementID("", string(a)), RefB: common.MakeDocElementID("", string(b)), Relationship: kind}
}

// GoPURL is a module's package URL: pkg:golang/<path>@<version>. The
// standard library is pkg:golang/stdlib@<version without "go">, as
// vulnerability scanners look it up.
func GoPURL(path, version string) string {
	if path == "stdlib" {
		version = strings.TrimPrefix(version, "go")
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = escape(s)
	}
	return "pkg:golang/" + strings.Join(segs, "/") + "@" + escape(version)
}

// OCIPURL is an image's package URL: pkg:oci/<name>@sha256%3A<digest>,
// qualified by the repository it was built for and its tag, as the purl
// spec's oci type asks (the digest, not the tag, names the image).
func OCIPURL(name, sha256, repository, tag string) string {
	u := "pkg:oci/" + escape(strings.ToLower(name)) + "@" + escape("sha256:"+sha256)
	var q []string
	if repository != "" {
		q = append(q, "repository_url="+escapeQualifier(repository))
	}
	if tag != "" {
		q = append(q, "tag="+escapeQualifier(tag))
	}
	if len(q) > 0 {
		u += "?" + strings.Join(q, "&")
	}
	return u
}

// Described is the one package a document DESCRIBES: the artifact.
func Described(doc *spdx.Document) (*spdx.Package, error) {
	ids, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil {
		return nil, err
	}
	if len(ids) != 1 {
		return nil, fmt.Errorf("sbom: the document describes %d packages, want one", len(ids))
	}
	for _, p := range doc.Packages {
		if p.PackageSPDXIdentifier == ids[0] {
			return p, nil
		}
	}
	return nil, fmt.Errorf("sbom: the described package %s is not in the document", ids[0])
}

// DebianPURL is a Debian package's package URL: pkg:deb/debian/<name>@<version>.
func DebianPURL(name, version string) string {
	return "pkg:deb/debian/" + escape(name) + "@" + escape(version)
}

// escape percent-encodes a purl segment: everything but letters, digits
// and .-_~ (so v1.0.0+incompatible is v1.0.0%2Bincompatible, and a Debian
// epoch's colon is %3A).
func escape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_', c == '~':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// escapeQualifier percent-encodes a purl qualifier's value as escape does,
// but leaves the slashes and colons of a repository URL, as the purl
// spec's examples write them (repository_url=gcr.io/distroless/static).
func escapeQualifier(s string) string {
	segs := strings.Split(s, "/")
	for i, seg := range segs {
		parts := strings.Split(seg, ":")
		for j, p := range parts {
			parts[j] = escape(p)
		}
		segs[i] = strings.Join(parts, ":")
	}
	return strings.Join(segs, "/")
}

func sortedModules(ms []Module) []Module {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b Module) int { return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Version, b.Version)) })
	return slices.Compact(out)
}

func sortedDebian(ds []DebianPackage) []DebianPackage {
	out := slices.Clone(ds)
	slices.SortFunc(out, func(a, b DebianPackage) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
	})
	return slices.Compact(out)
}

// idSet hands out SPDX identifiers ([A-Za-z0-9.-]) made from names, each
// once: a name that maps onto an identifier already given gets a suffix.
type idSet map[common.ElementID]bool

func (s idSet) next(name string) common.ElementID {
	base := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, name)
	id := common.ElementID(base)
	for n := 2; s[id]; n++ {
		id = common.ElementID(fmt.Sprintf("%s-%d", base, n))
	}
	s[id] = true
	return id
}
