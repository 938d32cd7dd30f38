package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// spec is the type of the object's spec, whose fields ChangedSince
	// tries when it names a removed field (candidatePaths).
	spec reflect.Type
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
	return Fingerprint{Digest: digest, Fields: fields, Labels: labels, spec: specType(obj)}, nil
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

// Short is Fields as a run records them: for each field, in order, the
// first 8 hex digits of its path's SHA-256 and then the first 12 of its
// value's, 20 hex digits a field. A quarter of the bytes of the paths
// themselves: a TauRun carries it in every one of its status writes, and
// the paths were 45% of its status (hack/scale, docs/benchmarks.md).
func (f Fingerprint) Short() string {
	entries := make([]string, 0, len(f.Fields))
	for p, d := range f.Fields {
		entries = append(entries, pathDigest(p)+d)
	}
	slices.Sort(entries)
	return strings.Join(entries, "")
}

// pathDigest is the first 8 hex digits of path's SHA-256.
func pathDigest(path string) string {
	d := sha256.Sum256([]byte(path))
	return hex.EncodeToString(d[:4])
}

// shortEntry is the width of one field in Short.
const shortEntry = 8 + 12

// ChangedSince names, in order, the fields of now that differ from
// recorded (a Short): those changed or added by their path, and those
// removed by theirs when it is one a removed field would likely have had
// (a field of the spec, a pod template or a container the object still
// has, or a label TauGrid or Kueue writes); other removed fields are
// counted ("2 other fields removed"). A recorded string that is not a
// Short names nothing.
func ChangedSince(recorded string, now Fingerprint) []string {
	if len(recorded)%shortEntry != 0 {
		return nil
	}
	was := make(map[string]string, len(recorded)/shortEntry)
	for i := 0; i < len(recorded); i += shortEntry {
		was[recorded[i:i+8]] = recorded[i+8 : i+shortEntry]
	}
	var out []string
	for p, d := range now.Fields {
		h := pathDigest(p)
		if was[h] != d {
			out = append(out, p)
		}
		delete(was, h)
	}
	if len(was) > 0 {
		for _, p := range candidatePaths(now) {
			if _, ok := was[pathDigest(p)]; ok {
				out = append(out, p+" (removed)")
				delete(was, pathDigest(p))
			}
		}
	}
	slices.Sort(out)
	switch len(was) {
	case 0:
	case 1:
		out = append(out, "1 other field removed")
	default:
		out = append(out, fmt.Sprintf("%d other fields removed", len(was)))
	}
	return out
}

// knownLabels are the labels a Job or RayJob of TauGrid's carries, from
// TauGrid and from Kueue: a removed one is named.
var knownLabels = []string{LabelManagedBy, LabelRun, LabelAttempt, LabelRepository, LabelQueueName, LabelPriorityClass}

// specType is the type of obj's Spec field; nil when it has none (an
// unstructured object).
func specType(obj runtime.Object) reflect.Type {
	v := reflect.Indirect(reflect.ValueOf(obj))
	if v.Kind() != reflect.Struct {
		return nil
	}
	if f, ok := v.Type().FieldByName("Spec"); ok && f.Type.Kind() == reflect.Struct {
		return f.Type
	}
	return nil
}

// candidatePaths are the paths a field removed from the object f was
// taken of would likely have had: each json field of its spec, of each pod
// template and of each container its paths show, and the known labels.
func candidatePaths(f Fingerprint) []string {
	var out []string
	for _, l := range knownLabels {
		out = append(out, "metadata.labels["+l+"]")
	}
	if f.spec != nil {
		for _, name := range jsonFields(f.spec) {
			out = append(out, "spec."+name)
		}
	}
	templates, containers := map[string]bool{}, map[string]bool{}
	for p := range f.Fields {
		if m := templatePath.FindStringSubmatch(p); m != nil {
			templates[m[1]] = true
		}
		if m := containerPath.FindStringSubmatch(p); m != nil {
			containers[m[1]] = true
		}
	}
	for t := range templates {
		for _, f := range jsonFields(reflect.TypeFor[metav1.ObjectMeta]()) {
			out = append(out, t+".metadata."+f)
		}
		for _, f := range jsonFields(reflect.TypeFor[corev1.PodSpec]()) {
			out = append(out, t+".spec."+f)
		}
	}
	for c := range containers {
		for _, f := range jsonFields(reflect.TypeFor[corev1.Container]()) {
			out = append(out, c+"."+f)
		}
	}
	return out
}

// A pod template's fields and a container's, as podTemplate writes them.
var (
	templatePath  = regexp.MustCompile(`^(.*\.(?:template|submitterPodTemplate))\.(?:metadata|spec)\.`)
	containerPath = regexp.MustCompile(`^(.*\.(?:template|submitterPodTemplate)\.spec\.[A-Za-z]*ontainers\[[^\]]+\])\.`)
)

// jsonFields are the json names of t's fields, a struct's.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
