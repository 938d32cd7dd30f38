package evidence

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// BenchmarkBundleWith10MBLog builds, seals and stores the bundle of an
// attempt whose log is 10 MB, served without limits (the worst case:
// ReadTail stops at ReadLimit). hack/bench/evidence measures more.
func BenchmarkBundleWith10MBLog(b *testing.B) {
	log := bytes.Repeat([]byte("step 123 loss 0.4567 grad_norm 1.2 HF_TOKEN=hf-bench-secret-0123\n"), 10<<20/64)
	st, _ := NewFileStore(b.TempDir())
	m := NewMasker("hf-bench-secret-0123")
	b.ReportAllocs()
	size := 0
	for i := range b.N {
		key := Key{Namespace: "team-a", Run: "bench", Attempt: i + 1}
		tail, _, err := Tail(bytes.NewReader(log), m, &Metrics{})
		if err != nil || strings.Contains(string(tail), "hf-bench-secret") {
			b.Fatal("tail", err)
		}
		bundle := exampleBundle(b, key, string(tail))
		sealed, err := bundle.Seal(sealTime)
		if err != nil {
			b.Fatal(err)
		}
		if err := Write(context.Background(), st, sealed); err != nil {
			b.Fatal(err)
		}
		size = len(sealed.Raw)
		for _, a := range sealed.Manifest.Artifacts {
			size += int(a.Size)
		}
	}
	b.ReportMetric(float64(size), "bundle-bytes")
}
