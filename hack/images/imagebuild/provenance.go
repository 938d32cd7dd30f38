package imagebuild

import (
	"context"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
)

// The in-toto statement and SLSA provenance this build writes.
const (
	InTotoStatement = "https://in-toto.io/Statement/v1"
	SLSAProvenance  = "https://slsa.dev/provenance/v1"
	BuildType       = "https://github.com/taugrid/taugrid/hack/images@v1"
	SourceURI       = "git+https://github.com/taugrid/taugrid"
)

// Statement is an in-toto statement with a SLSA provenance predicate.
type Statement struct {
	Type          string       `json:"_type"`
	Subject       []Descriptor `json:"subject"`
	PredicateType string       `json:"predicateType"`
	Predicate     Provenance   `json:"predicate"`
}

// Descriptor is an in-toto resource descriptor.
type Descriptor struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest"`
}

// Provenance is SLSA v1's predicate: how the image was built and from what.
type Provenance struct {
	BuildDefinition struct {
		BuildType            string             `json:"buildType"`
		ExternalParameters   ExternalParameters `json:"externalParameters"`
		InternalParameters   InternalParameters `json:"internalParameters"`
		ResolvedDependencies []Descriptor       `json:"resolvedDependencies"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
	} `json:"runDetails"`
}

// ExternalParameters are what the build was asked for.
type ExternalParameters struct {
	Source    Descriptor `json:"source"`
	Image     string     `json:"image"`
	Platforms []string   `json:"platforms"`
}

// InternalParameters are how the go command built each platform's binary.
type InternalParameters struct {
	SourceDateEpoch int64             `json:"sourceDateEpoch"`
	Binaries        []BinaryBuild     `json:"binaries"`
	Debian          map[string]string `json:"debianPackages"`
}

// BinaryBuild is one binary's Go version, package and build settings, as
// its embedded build info says.
type BinaryBuild struct {
	Platform  string            `json:"platform"`
	GoVersion string            `json:"goVersion"`
	Path      string            `json:"path"`
	Settings  map[string]string `json:"settings"`
}

// provenance is b's statement: the commit, each binary's Go version and
// settings, the module graph linked in and the Debian packages copied.
func provenance(ctx context.Context, b *Built, src Source, platforms []Platform) ([]byte, error) {
	st := Statement{Type: InTotoStatement, PredicateType: SLSAProvenance, Subject: subjects(b)}
	p := &st.Predicate
	p.RunDetails.Builder.ID = "https://github.com/taugrid/taugrid/hack/images"
	bd := &p.BuildDefinition
	bd.BuildType = BuildType
	bd.ExternalParameters = ExternalParameters{Image: b.Ref,
		Source: Descriptor{URI: SourceURI + "@" + src.Revision, Digest: map[string]string{"gitCommit": src.Revision}}}
	for _, pl := range platforms {
		bd.ExternalParameters.Platforms = append(bd.ExternalParameters.Platforms, pl.String())
	}
	bd.InternalParameters = InternalParameters{SourceDateEpoch: src.Time.Unix(), Debian: debianPackages(ctx, b)}
	deps := map[string]Descriptor{}
	for _, bp := range b.Platforms {
		info := bp.binary.info
		bb := BinaryBuild{Platform: bp.Platform.String(), GoVersion: info.GoVersion, Path: info.Path, Settings: map[string]string{}}
		for _, s := range info.Settings {
			bb.Settings[s.Key] = s.Value
		}
		bd.InternalParameters.Binaries = append(bd.InternalParameters.Binaries, bb)
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			deps[m.Path+"@"+m.Version] = Descriptor{URI: "pkg:golang/" + m.Path + "@" + m.Version, Digest: map[string]string{"dirHash": m.Sum}}
		}
	}
	bd.ResolvedDependencies = append(bd.ResolvedDependencies, bd.ExternalParameters.Source)
	for _, k := range sortedKeys(deps) {
		bd.ResolvedDependencies = append(bd.ResolvedDependencies, deps[k])
	}
	return json.Marshal(st)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// debVersion is the installed version of a Debian package, or "unknown"
// where dpkg cannot say.
func debVersion(ctx context.Context, pkg string) string {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil || len(out) == 0 {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
