package render

import (
	"os"
	"testing"
)

// BenchmarkRender measures the controller's whole per-run pipeline on a tau
// file: parse, validate, resolve under policy and render (the policy is
// loaded once, as the controller caches it per commit).
func BenchmarkRender(b *testing.B) {
	pol := examplePolicy(b)
	for name, path := range map[string]string{
		"job":      "../examples/research/tau.yaml",
		"torchrun": "../examples/research/tau/ddp.yaml",
		"rayjob":   "../examples/research/tau/ray.yaml",
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := renderFile(pol, "tau.yaml", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadPolicy measures reading the example platform policy.
func BenchmarkLoadPolicy(b *testing.B) {
	fsys := os.DirFS(examplePolicyDir)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadPolicy(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFingerprintOf measures fingerprinting the example's Job and
// the short digests a run records of it: once per submission, in the run
// reconciler's worker.
func BenchmarkFingerprintOf(b *testing.B) {
	data, err := os.ReadFile("../examples/research/tau.yaml")
	if err != nil {
		b.Fatal(err)
	}
	objs, err := renderFile(examplePolicy(b), "tau.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		fp, err := FingerprintOf(objs[0])
		if err != nil {
			b.Fatal(err)
		}
		_ = fp.Short()
	}
}

// BenchmarkMarshal writes the example's rendered Job (and its
// NetworkPolicy) as YAML, as the evidence controller writes every sealed
// attempt's manifests and tau render prints them.
func BenchmarkMarshal(b *testing.B) {
	pol := examplePolicy(b)
	data, err := os.ReadFile("../examples/research/tau.yaml")
	if err != nil {
		b.Fatal(err)
	}
	objs, err := renderFile(pol, "tau.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(objs, FormatYAML); err != nil {
			b.Fatal(err)
		}
	}
}
