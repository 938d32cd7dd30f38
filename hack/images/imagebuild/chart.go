package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart"
	chartloader "helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
)

// ChartImages are the chart's image values, by image: where values.yaml
// names each image's repository and digest.
var ChartImages = map[string][]string{
	"tau-controller": {"controller", "image"},
	"tau-nodeagent":  {"nodeAgent", "image"},
	"tau":            {"fetchImage"},
}

// ChartRelease is what PublishChart pushed.
type ChartRelease struct {
	Ref     string // oci://registry/taugrid
	Version string
	Digest  v1.Hash // the chart's manifest
	Bytes   int     // the packaged chart
}

// PackageChart packages the chart at dir as `helm package` does, with
// version and appVersion set and values.yaml naming each pushed image by
// its digest; every file in the archive carries src's time, so one commit
// packages to the same bytes.
func PackageChart(dir, version, appVersion string, images []Pushed, src Source) ([]byte, error) {
	c, err := chartloader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	c.Metadata.Version, c.Metadata.AppVersion = version, appVersion
	if err := pinImages(c, images); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "tau-chart-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	path, err := chartutil.Save(c, tmp)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return normalizeArchive(raw, src.Time)
}

// PublishChart pushes the packaged chart to registry with Helm's own OCI
// client and signs its manifest with key.
func PublishChart(ctx context.Context, registryPath string, data []byte, key *ecdsa.PrivateKey, src Source) (ChartRelease, error) {
	meta, err := chartloader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return ChartRelease{}, err
	}
	var opts []registry.ClientOption
	if Loopback(registryPath) {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return ChartRelease{}, err
	}
	repo := registryPath + "/" + meta.Name()
	res, err := rc.Push(data, repo+":"+meta.Metadata.Version, registry.PushOptCreationTime(src.Time.UTC().Format(time.RFC3339)))
	if err != nil {
		return ChartRelease{}, fmt.Errorf("pushing the chart to %s: %w", repo, err)
	}
	d, err := v1.NewHash(res.Manifest.Digest)
	if err != nil {
		return ChartRelease{}, err
	}
	if err := SignManifest(ctx, repo, d, key, src.Revision, src); err != nil {
		return ChartRelease{}, fmt.Errorf("signing the chart: %w", err)
	}
	return ChartRelease{Ref: "oci://" + repo, Version: meta.Metadata.Version, Digest: d, Bytes: len(data)}, nil
}

// pinImages rewrites the chart's values.yaml so each image is named by
// its pushed repository and digest; its comments stay.
func pinImages(c *chart.Chart, images []Pushed) error {
	for _, f := range c.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(f.Data, &doc); err != nil {
			return fmt.Errorf("the chart's values.yaml: %w", err)
		}
		for _, img := range images {
			path, ok := ChartImages[img.Name]
			if !ok {
				return fmt.Errorf("the chart has no value for image %s", img.Name)
			}
			node, err := mapping(&doc, path)
			if err != nil {
				return err
			}
			if err := set(node, "repository", img.Repo); err != nil {
				return err
			}
			if err := set(node, "digest", img.Digest.String()); err != nil {
				return err
			}
		}
		var out bytes.Buffer
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(&doc); err != nil {
			return err
		}
		f.Data = out.Bytes()
		values, err := chartutil.ReadValues(f.Data)
		if err != nil {
			return err
		}
		c.Values = values
		return nil
	}
	return errors.New("the chart has no values.yaml")
}

// mapping is the mapping node at path under doc.
func mapping(doc *yaml.Node, path []string) (*yaml.Node, error) {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, key := range path {
		next := valueOf(n, key)
		if next == nil || next.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("the chart's values.yaml has no mapping %v", path)
		}
		n = next
	}
	return n, nil
}

func valueOf(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func set(m *yaml.Node, key, value string) error {
	v := valueOf(m, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return fmt.Errorf("the chart's values.yaml has no %s beside line %d", key, m.Line)
	}
	v.Value, v.Tag, v.Style = value, "!!str", 0
	return nil
}

// normalizeArchive rewrites a gzipped tar with every entry's time set to
// at and no owner names, and a gzip header without a time, keeping the
// order, contents and modes.
func normalizeArchive(raw []byte, at time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Extra, zw.Comment = zr.Extra, zr.Comment
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = at.UTC(), time.Time{}, time.Time{}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
