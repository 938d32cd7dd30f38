package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// A Fingerprint is what a workload's pods are made from, as the API server
// stored the Job or RayJob: its labels (the queue and the priority among
// them) and its spec, pod templates broken down to each container's
// fields. Digest proves the object unchanged; Fields only name what
// changed when it is not.
type Fingerprint struct {
	// Digest is "sha256:" and the hex SHA-256 of the fields' full values.
	Digest string
	// Fields are the first 12 hex digits of each field's digest, by path.
	Fields map[string]string
	// Labels is "sha256:" and the hex SHA-256 of the labels alone
	// (LabelsDigest): with the object's generation, which the API server
	// moves at every change of the spec, it proves an object that a cache
	// keeps without its pod templates unchanged.
	Labels string
}

// ignoredSpec are the spec fields Kueue itself writes while it holds a
// workload: suspending and resuming it is Kueue's, not a change of what
// runs.
var ignoredSpec = map[string]bool{"suspend": true}

// FingerprintOf fingerprints obj, a Job or RayJob as the API server
// returned it.
func FingerprintOf(obj runtime.Object) (Fingerprint, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return Fingerprint{}, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return Fingerprint{}, err
	}
	full := labelFields(m.GetLabels())
	labels, _ := digestOf(full)
	spec, _ := u["spec"].(map[string]any)
	for k, v := range spec {
		if !ignoredSpec[k] {
			walk(full, "spec."+k, k, v)
		}
	}
	digest, fields := digestOf(full)
	return Fingerprint{Digest: digest, Fields: fields, Labels: labels}, nil
}

// LabelsDigest is Fingerprint.Labels of an object with these labels.
func LabelsDigest(labels map[string]string) string {
	d, _ := digestOf(labelFields(labels))
	return d
}

func labelFields(labels map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range labels {
		leaf(out, "metadata.labels["+k+"]", v)
	}
	return out
}

// digestOf is "sha256:" and the hex SHA-256 over the paths in order and
// the digests of their values, and the first 12 hex digits of each.
func digestOf(full map[string][]byte) (string, map[string]string) {
	sum := sha256.New()
	fields := make(map[string]string, len(full))
	for _, path := range slices.Sorted(maps.Keys(full)) {
		d := sha256.Sum256(full[path])
		fmt.Fprintf(sum, "%s\x00%x\n", path, d)
		fields[path] = hex.EncodeToString(d[:])[:12]
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil)), fields
}

// walk records v at path: a pod template by its metadata and spec fields,
// its containers field by field; lists of named objects by name; other
// maps by key; anything else whole.
func walk(out map[string][]byte, path, key string, v any) {
	switch x := v.(type) {
	case map[string]any:
		if key == "template" || key == "submitterPodTemplate" {
			podTemplate(out, path, x)
			return
		}
		if len(x) == 0 {
			leaf(out, path, x)
		}
		for k, c := range x {
			walk(out, path+"."+k, k, c)
		}
	case []any:
		if names, ok := named(x); ok {
			for i, c := range x {
				walk(out, path+"["+names[i]+"]", "", c)
			}
			return
		}
		leaf(out, path, x)
	default:
		leaf(out, path, x)
	}
}

func podTemplate(out map[string][]byte, path string, t map[string]any) {
	meta, _ := t["metadata"].(map[string]any)
	for k, v := range meta {
		leaf(out, path+".metadata."+k, v)
	}
	spec, _ := t["spec"].(map[string]any)
	for k, v := range spec {
		list, isList := v.([]any)
		names, ok := named(list)
		if !isList || !ok || !strings.HasSuffix(k, "ontainers") {
			leaf(out, path+".spec."+k, v)
			continue
		}
		for i, c := range list {
			fields, _ := c.(map[string]any)
			for f, fv := range fields {
				leaf(out, fmt.Sprintf("%s.spec.%s[%s].%s", path, k, names[i], f), fv)
			}
		}
	}
}

// named gives the names of a list of objects that each have a distinct
// one (containers, worker groups); ok is false for any other list.
func named(list []any) (names []string, ok bool) {
	seen := map[string]bool{}
	for _, e := range list {
		m, _ := e.(map[string]any)
		n, _ := m["name"].(string)
		if n == "" {
			n, _ = m["groupName"].(string)
		}
		if n == "" || seen[n] {
			return nil, false
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, len(names) > 0
}

func leaf(out map[string][]byte, path string, v any) {
	b, err := json.Marshal(v) // map keys sorted: the same value, the same bytes
	if err != nil {
		b = fmt.Appendf(nil, "%v", v)
	}
	out[path] = b
}

// Changed lists the paths whose short digests differ between what was
// recorded and what is there now, added and removed ones included, in
// order.
func Changed(recorded, now map[string]string) []string {
	var out []string
	for p, d := range now {
		if recorded[p] != d {
			out = append(out, p)
		}
	}
	for p := range recorded {
		if _, ok := now[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
