package imagebuild

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Pushed is one image as a registry now holds it.
type Pushed struct {
	Name   string  // tau-controller
	Repo   string  // registry/tau-controller
	Digest v1.Hash // the index's
}

// Ref is the image by digest, as the chart's values name it.
func (p Pushed) Ref() string { return p.Repo + "@" + p.Digest.String() }

// Push pushes image name's layout under out to registry: the index under
// tag, and its signature and attestations (provenance and SBOM) under
// cosign's tags beside it, so `cosign verify` and `cosign
// verify-attestation` find them. The layout
// must have been built for registry: its signature names the repository.
func Push(ctx context.Context, out, registry, name, tag string) (Pushed, error) {
	repo := registry + "/" + name
	p, err := layout.FromPath(LayoutDir(out, name))
	if err != nil {
		return Pushed{}, fmt.Errorf("%s: %w (run make images first)", name, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return Pushed{}, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return Pushed{}, err
	}
	named := map[string]v1.Hash{}
	for _, d := range im.Manifests {
		named[d.Annotations[RefName]] = d.Digest
	}
	d, ok := named[tag]
	if !ok {
		return Pushed{}, fmt.Errorf("%s holds no image tagged %q (run make images with IMAGE_TAG=%s)", LayoutDir(out, name), tag, tag)
	}
	sigTag, attTag := SignatureTag(d, "sig"), SignatureTag(d, "att")
	for _, t := range []string{sigTag, attTag} {
		if _, ok := named[t]; !ok {
			return Pushed{}, fmt.Errorf("%s holds no %s for %s: rebuild it with make images", LayoutDir(out, name), t, d)
		}
	}
	sig, err := top.Image(named[sigTag])
	if err != nil {
		return Pushed{}, err
	}
	if signed, err := signedRepository(sig); err != nil {
		return Pushed{}, fmt.Errorf("%s's signature: %w", name, err)
	} else if signed != repo {
		return Pushed{}, fmt.Errorf("%s was built and signed as %s, not %s: build it for this registry (make images IMAGE_REGISTRY=%s)",
			LayoutDir(out, name), signed, repo, registry)
	}
	idx, err := top.ImageIndex(d)
	if err != nil {
		return Pushed{}, err
	}
	att, err := top.Image(named[attTag])
	if err != nil {
		return Pushed{}, err
	}
	opts := remoteOptions(ctx)
	if err := writeIndex(repo+":"+tag, idx, opts); err != nil {
		return Pushed{}, err
	}
	for t, img := range map[string]v1.Image{sigTag: sig, attTag: att} {
		if err := writeImage(repo+":"+t, img, opts); err != nil {
			return Pushed{}, err
		}
	}
	return Pushed{Name: name, Repo: repo, Digest: d}, nil
}

// SignManifest pushes a signature of the manifest digest in repo under
// cosign's tag, as `cosign sign --key` would (the chart's).
func SignManifest(ctx context.Context, repo string, digest v1.Hash, key *ecdsa.PrivateKey, revision string, src Source) error {
	sig, err := signatureFor(repo, digest, key, revision, src.Time)
	if err != nil {
		return err
	}
	return writeImage(repo+":"+SignatureTag(digest, "sig"), sig, remoteOptions(ctx))
}

// signedRepository is the repository a signature artifact's payload names.
func signedRepository(sig v1.Image) (string, error) {
	layers, err := sig.Layers()
	if err != nil || len(layers) != 1 {
		return "", fmt.Errorf("want one layer: %w", err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	if err != nil {
		return "", err
	}
	var p SimpleSigning
	if err := json.Unmarshal(body, &p); err != nil {
		return "", err
	}
	return p.Critical.Identity.DockerReference, nil
}

func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

func writeIndex(ref string, idx v1.ImageIndex, opts []remote.Option) error {
	r, err := parseRef(ref)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func writeImage(ref string, img v1.Image, opts []remote.Option) error {
	r, err := parseRef(ref)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// parseRef parses ref; a registry on a loopback address is spoken to in
// plain HTTP (a registry a test or a developer starts on 127.0.0.1).
func parseRef(ref string) (name.Tag, error) {
	var opts []name.Option
	if Loopback(ref) {
		opts = append(opts, name.Insecure)
	}
	t, err := name.NewTag(ref, opts...)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%q is no image reference: %w", ref, err)
	}
	return t, nil
}

// Loopback says whether ref's registry is on this machine's loopback.
func Loopback(ref string) bool {
	host, _, _ := strings.Cut(ref, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
