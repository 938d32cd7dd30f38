package shared

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// BenchmarkCachedBytesOfARun measures what one run's objects hold in the
// controller's cache once its run has ended: its TauRun, Job, Kueue
// Workload and pod, as a real API server served them at the end of the
// budget test (testdata/cached), decoded from the wire as the informers
// decode them (protobuf for Kubernetes' own kinds, JSON for custom
// resources) and put through CacheTransform. The figure is the live heap
// after a collection, per object: at 10,000 ended runs the cache holds
// 10,000 of each (hack/scale's heap profiles).
func BenchmarkCachedBytesOfARun(b *testing.B) {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			b.Fatal(err)
		}
	}
	codecs := serializer.NewCodecFactory(scheme)
	kinds := []struct {
		name string
		list client.ObjectList
		gvk  schema.GroupVersionKind
		pb   bool
	}{
		{"TauRun", &taugridv1.TauRunList{}, taugridv1.GroupVersion.WithKind("TauRun"), false},
		{"Job", &batchv1.JobList{}, batchv1.SchemeGroupVersion.WithKind("Job"), true},
		{"Workload", &kueue.WorkloadList{}, kueue.GroupVersion.WithKind("Workload"), false},
		{"Pod", &corev1.PodList{}, corev1.SchemeGroupVersion.WithKind("Pod"), true},
	}
	const n = 2000
	var decoders []func() any
	next := 0
	for _, k := range kinds {
		data, err := os.ReadFile(filepath.Join("testdata", "cached", strings.ToLower(k.name)+"s.json"))
		if err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(data, k.list); err != nil {
			b.Fatal(err)
		}
		items, err := apimeta.ExtractList(k.list)
		if err != nil || len(items) != 1 {
			b.Fatalf("%s: %d items (%v), want 1", k.name, len(items), err)
		}
		obj := items[0]
		obj.GetObjectKind().SetGroupVersionKind(k.gvk)
		var wire []byte
		var dec k8sruntime.Decoder
		if k.pb {
			s := protobuf.NewSerializer(scheme, scheme)
			if wire, err = k8sruntime.Encode(s, obj); err != nil {
				b.Fatal(err)
			}
			dec = s
		} else {
			info, _ := k8sruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), k8sruntime.ContentTypeJSON)
			if wire, err = k8sruntime.Encode(info.Serializer, obj); err != nil {
				b.Fatal(err)
			}
			dec = info.Serializer
		}
		// Each copy is another run's: its names, UIDs and digests its own,
		// as at scale, so only what runs share is shared. The count goes
		// on across the benchmark's loops, so no run's own strings are
		// already in the interning table when its objects are measured.
		decoders = append(decoders, func() any {
			next++
			o, _, err := dec.Decode(anotherRun(wire, next), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			out, err := CacheTransform(o)
			if err != nil {
				b.Fatal(err)
			}
			return out
		})
	}
	per := make([]float64, len(kinds))
	for b.Loop() {
		for i, d := range decoders {
			per[i] = heapPer(b, n, d)
		}
	}
	total := 0.0
	for i, k := range kinds {
		b.ReportMetric(per[i], "B/"+k.name)
		total += per[i]
	}
	b.ReportMetric(total, "B/run")
}

// perRun are the strings of testdata/cached that are one run's alone: the
// run's name hash, its objects' UIDs (their first 8 characters) and
// generated name suffixes, its ref hash, its evidence's digest and its
// commit (its first 12 characters): no two runs share a commit, so what
// names the commit (the Job's annotations) is not shared either.
var perRun = []string{"4ce45064c8", "c289fae7", "efaf4605", "1594101a", "32f56e38", "hwfms", "4ee0a", "87a1565297533dfe", "ec1bc1d6251ca4c9", "99f312f53b83"}

// anotherRun is wire with each perRun string replaced by one of the same
// length made from i, so protobuf's lengths still hold.
func anotherRun(wire []byte, i int) []byte {
	out := bytes.Clone(wire)
	for j, s := range perRun {
		r := fmt.Sprintf("%0*x", len(s), i*len(perRun)+j+1)
		out = bytes.ReplaceAll(out, []byte(s), []byte(r[len(r)-len(s):]))
	}
	return out
}

// heapPer is the live heap that n results of build hold, per result.
func heapPer(b *testing.B, n int, build func() any) float64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := make([]any, n)
	for i := range keep {
		keep[i] = build()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
