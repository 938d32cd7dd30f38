package render

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// qualifyImage is an image reference as the pod gets it: the name the
// allow-list judged, written out so no node can read it another way.
//
// The form is containerd's own (reference.ParseDockerRef, which its CRI
// plugin runs on every image it pulls): the registry written out, Docker
// Hub as docker.io and its official images under library/ (never the
// legacy index.docker.io, which both runtimes rewrite to docker.io and
// which registries.conf and containerd's hosts.toml are not keyed by), an
// implicit tag as :latest, and a digest alone when a tag came with it.
// containerd ignores such a tag, and CRI-O (containers/image) refuses the
// pair in some releases (cri-o/cri-o#8603): the digest decides what runs
// either way. CRI-O resolves a short name through registries.conf's
// unqualified-search-registries, where the first registry that answers
// wins, so a name like pytorch/pytorch:2.4 could run another registry's
// image than the docker.io one the allow-list accepted; a fully qualified
// name is never searched.
func qualifyImage(image string) (reference.Named, error) {
	ref, err := reference.ParseDockerRef(image)
	if err != nil {
		if strings.Contains(image, "@") {
			return nil, fmt.Errorf("%w (a digest is written @sha256: and 64 lowercase hex digits)", err)
		}
		return nil, err
	}
	// The library lowercases repositories, not registries: a node would
	// look up Ghcr.io's mirrors and credentials, not ghcr.io's.
	if d := reference.Domain(ref); d != strings.ToLower(d) {
		return nil, fmt.Errorf("the registry %q must be written in lowercase (%s)", d, strings.ToLower(d))
	}
	return ref, nil
}

// qualifiedOrAsIs is the platform's own image written out as qualifyImage
// does, for a source set on a plan without AttachSource; one that does not
// parse is left for the API server to refuse, as rendering cannot fail.
func qualifiedOrAsIs(image string) string {
	if ref, err := qualifyImage(image); err == nil {
		return ref.String()
	}
	return image
}

// pinned reports whether a qualified reference is pinned by a digest the
// reference grammar validated (algorithm and length), not merely a name
// containing "@sha256:".
func pinned(ref reference.Named) bool {
	_, ok := ref.(reference.Digested)
	return ok
}

// allows reports whether an allow-list entry names the image's registry
// (host and port exactly) or a repository at or above the image's, at a
// path boundary: docker.io/library/python allows
// docker.io/library/python:3.12 and docker.io/library/python/sub, never
// docker.io/library/python-evil, and a registry allows none of its other
// ports.
func (im *ImagePolicy) allows(ref reference.Named) bool {
	domain, repo := reference.Domain(ref), reference.Path(ref)
	for _, entry := range im.Allow {
		host, prefix, _ := strings.Cut(strings.TrimSuffix(entry, "/"), "/")
		if host == domain && (prefix == "" || repo == prefix || strings.HasPrefix(repo, prefix+"/")) {
			return true
		}
	}
	return false
}

// allowEntryProblem says what is wrong with an allow-list entry, or "":
// entries are compared with normalised names, so an entry written in any
// other form would silently allow nothing, or not what it seems to.
func allowEntryProblem(entry string) string {
	e := strings.TrimSuffix(entry, "/")
	host, repo, _ := strings.Cut(e, "/")
	switch {
	case e == "":
		return "empty prefix would allow every image"
	case e != strings.ToLower(e):
		return fmt.Sprintf("%q must be lowercase, as normalised image names are", entry)
	case host == "index.docker.io":
		return fmt.Sprintf("%q: Docker Hub names are normalised to docker.io; write docker.io%s", entry, strings.TrimPrefix(e, host))
	case !strings.ContainsAny(host, ".:") && host != "localhost":
		return fmt.Sprintf("%q does not start with a registry; write the name fully qualified, such as docker.io/library/python or ghcr.io/org", entry)
	case repo == "":
		if ref, err := reference.ParseNamed(host + "/x"); err != nil || reference.Domain(ref) != host {
			return fmt.Sprintf("%q is not a registry host name", entry)
		}
		return ""
	}
	ref, err := reference.ParseNormalizedNamed(e)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a registry or repository name: %v", entry, err)
	case !reference.IsNameOnly(ref):
		return fmt.Sprintf("%q names a tag or digest; list a registry or repository (runs choose the tag, images.yaml's require_digest the pinning)", entry)
	case ref.String() != e:
		return fmt.Sprintf("%q is written %s in normalised names; write that", entry, ref.String())
	}
	return ""
}
