package imagebuild

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what to build and where.
type Options struct {
	Source    Source
	Registry  string // e.g. ghcr.io/taugrid
	Tag       string // the chart's appVersion
	Platforms []Platform
	Images    []Spec
	Host      Host
	// Work holds the compiled binaries; the layouts go to Out.
	Work, Out string
	Log       io.Writer
}

// Built is one image's index and what went into it.
type Built struct {
	Spec      Spec
	Ref       string // registry/name:tag
	Index     v1.ImageIndex
	Digest    v1.Hash
	Platforms []BuiltPlatform
}

// BuiltPlatform is one platform's image of an index.
type BuiltPlatform struct {
	Platform Platform
	Digest   v1.Hash
	Size     int64 // compressed: manifest, config and layers, as a pull moves them
	binary   *compiled
	glibc    string // the Debian package its glibc came from, "" if none
}

// Build compiles and assembles every image for every platform.
func Build(ctx context.Context, o Options) ([]*Built, error) {
	var out []*Built
	for _, s := range o.Images {
		b, err := buildOne(ctx, o, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func buildOne(ctx context.Context, o Options, s Spec) (*Built, error) {
	b := &Built{Spec: s, Ref: o.Registry + "/" + s.Name + ":" + o.Tag}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		bin, err := compile(ctx, o.Source, o.Tag, s, p, o.Work)
		if err != nil {
			return nil, err
		}
		img, glibc, err := assemble(o, s, p, bin)
		if err != nil {
			return nil, err
		}
		bp, err := describe(img, p, bin, glibc)
		if err != nil {
			return nil, err
		}
		b.Platforms = append(b.Platforms, bp)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s %s: %s, %.1f MB\n", b.Ref, p, bp.Digest, float64(bp.Size)/1e6)
		}
	}
	b.Index = mutate.Annotations(idx, labels(o, s)).(v1.ImageIndex)
	d, err := b.Index.Digest()
	b.Digest = d
	return b, err
}

// labels are the OCI annotations of the image and its index.
func labels(o Options, s Spec) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       s.Name,
		"org.opencontainers.image.description": s.Description,
		"org.opencontainers.image.source":      "https://github.com/taugrid/taugrid",
		"org.opencontainers.image.url":         "https://github.com/taugrid/taugrid",
		"org.opencontainers.image.revision":    o.Source.Revision,
		"org.opencontainers.image.version":     o.Tag,
		"org.opencontainers.image.created":     o.Source.Time.Format(time.RFC3339),
		"org.opencontainers.image.vendor":      "TauGrid",
	}
}

// assemble makes p's image of s: a base layer (users, CA bundle,
// directories, glibc where needed) and the binary's layer.
func assemble(o Options, s Spec, p Platform, bin *compiled) (v1.Image, string, error) {
	base, err := o.Host.baseTree(s)
	if err != nil {
		return nil, "", err
	}
	glibc := ""
	if s.CGO {
		if glibc, err = o.Host.glibcTree(base, p.Arch); err != nil {
			return nil, "", err
		}
	}
	body, err := os.ReadFile(bin.path)
	if err != nil {
		return nil, "", err
	}
	app := tree{}
	app.file(s.Binary(), 0o755, body)
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range []struct {
		t   tree
		why string
	}{{base, "the root: users 65532, the CA bundle, /tmp and the mounted paths" + glibcNote(glibc)}, {app, s.Binary()}} {
		if img, err = appendTree(img, l.t, l.why, o.Source.Time); err != nil {
			return nil, "", err
		}
	}
	img, err = configure(img, o, s, p)
	return img, glibc, err
}

func glibcNote(pkg string) string {
	if pkg == "" {
		return ""
	}
	return ", glibc from Debian's " + pkg
}

func appendTree(img v1.Image, t tree, why string, at time.Time) (v1.Image, error) {
	data, err := t.tar(at)
	if err != nil {
		return nil, err
	}
	layer, err := newLayer(data)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer,
		History: v1.History{Created: v1.Time{Time: at}, CreatedBy: "hack/images: " + why}})
}

// configure sets the image config: the user, the entrypoint, the
// environment and the labels, all at the commit's time.
func configure(img v1.Image, o Options, s Spec, p Platform) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Author = "TauGrid"
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{s.Binary()},
		WorkingDir: "/home/nonroot",
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			"HOME=/home/nonroot"},
		Labels: labels(o, s),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: o.Source.Time})
}

func describe(img v1.Image, p Platform, bin *compiled, glibc string) (BuiltPlatform, error) {
	d, err := img.Digest()
	if err != nil {
		return BuiltPlatform{}, err
	}
	size, err := img.Size()
	if err != nil {
		return BuiltPlatform{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return BuiltPlatform{}, err
	}
	size += m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return BuiltPlatform{Platform: p, Digest: d, Size: size, binary: bin, glibc: glibc}, nil
}

// WorkDir is a scratch directory under out for the binaries.
func WorkDir(out string) string { return filepath.Join(out, "work") }
