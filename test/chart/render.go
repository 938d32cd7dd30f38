// Package chart renders charts/taugrid with the Helm SDK as `helm install`
// would, for the tests that check what it installs: schema, server-side
// dry runs, RBAC under the controller's ServiceAccount, alert rules and
// dashboards.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Namespace is the release namespace the tests install into, as the README does.
const Namespace = "taugrid-system"

// Dir is charts/taugrid, found from this file so any test package can render it.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "charts", "taugrid")
}

// Rendered is what an install would create.
type Rendered struct {
	CRDs    []*unstructured.Unstructured // crds/, installed first
	Objects []*unstructured.Unstructured // templates/, in file name order
	Notes   string
}

// MonitoringAPIs are what a cluster with the Prometheus Operator serves, as
// Helm's .Capabilities.APIVersions lists them.
var MonitoringAPIs = []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// Render renders the chart in namespace with values over values.yaml, as
// `helm install --dry-run` without a cluster does (Helm's default
// capabilities: no Prometheus Operator); a schema violation is the error Helm
// would print.
func Render(namespace string, values map[string]any) (*Rendered, error) {
	return RenderOn(namespace, values)
}

// RenderOn is Render on a cluster that also serves apiVersions (such as
// MonitoringAPIs).
func RenderOn(namespace string, values map[string]any, apiVersions ...string) (*Rendered, error) {
	c, err := loader.Load(Dir())
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = map[string]any{}
	}
	caps := *chartutil.DefaultCapabilities
	caps.APIVersions = append(slices.Clone(caps.APIVersions), apiVersions...)
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{
		Name: "taugrid", Namespace: namespace, Revision: 1, IsInstall: true}, &caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		return nil, err
	}
	out := &Rendered{}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			out.Notes = files[name]
		case strings.HasSuffix(name, ".yaml"):
			objs, err := decode(name, files[name])
			if err != nil {
				return nil, err
			}
			out.Objects = append(out.Objects, objs...)
		}
	}
	out.CRDs, err = crds(c)
	return out, err
}

func crds(c *chart.Chart) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, crd := range c.CRDObjects() {
		objs, err := decode(crd.Filename, string(crd.File.Data))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func decode(name, text string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(text)), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// Find returns the rendered object of kind and name, or nil.
func (r *Rendered) Find(kind, name string) *unstructured.Unstructured {
	for _, u := range r.Objects {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// Kinds returns the rendered objects of the given kinds.
func (r *Rendered) Kinds(kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range r.Objects {
		for _, k := range kinds {
			if u.GetKind() == k {
				out = append(out, u)
			}
		}
	}
	return out
}
