package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	full := map[string][]byte{}
	meta, _ := u["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	for k, v := range labels {
		leaf(full, "metadata.labels["+k+"]", v)
	}
	spec, _ := u["spec"].(map[string]any)
	for k, v := range spec {
		if !ignoredSpec[k] {
			walk(full, "spec."+k, k, v)
		}
	}
	sum := sha256.New()
	fields := make(map[string]string, len(full))
	for _, path := range slices.Sorted(maps.Keys(full)) {
		d := sha256.Sum256(full[path])
		fmt.Fprintf(sum, "%s\x00%x\n", path, d)
		fields[path] = hex.EncodeToString(d[:])[:12]
	}
	return Fingerprint{Digest: "sha256:" + hex.EncodeToString(sum.Sum(nil)), Fields: fields}, nil
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
