package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
)

const secret = "hf-bench-secret-0123456789"

type inputs struct {
	in     evidence.RenderInputs
	tau    []byte
	policy map[string][]byte
}

func loadInputs(root string) (*inputs, error) {
	tau, err := os.ReadFile(filepath.Join(root, "examples/research/tau.yaml"))
	if err != nil {
		return nil, err
	}
	policy := map[string][]byte{}
	names, _ := filepath.Glob(filepath.Join(root, "examples/platform/*.yaml"))
	for _, n := range names {
		if policy[filepath.Base(n)], err = os.ReadFile(n); err != nil {
			return nil, err
		}
	}
	return &inputs{tau: tau, policy: policy, in: evidence.RenderInputs{TauFile: "tau.yaml", Tenant: "team-a", Run: render.Run{
		Name: "research-bench", Repository: "research", Commit: strings.Repeat("a", 40), Target: "default", Attempt: 1,
		PolicyCommit: strings.Repeat("b", 40)}}}, nil
}

// makeLogs writes a training log: progress lines, a metrics record every
// 50 lines and the secret echoed now and then.
func makeLogs(size, pods int) [][]byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		switch {
		case i%50 == 0:
			fmt.Fprintf(&b, "TAU_METRIC {\"step\": %d, \"loss\": %.4f, \"lr\": 0.001}\n", i, 1/float64(i+1))
		case i%997 == 0:
			fmt.Fprintf(&b, "token check HF_TOKEN=%s\n", secret)
		default:
			fmt.Fprintf(&b, "2026-11-30T05:00:00Z rank 0 step %d loss %.4f grad_norm 1.23 tokens/s 51234\n", i, 1/float64(i+1))
		}
	}
	out := make([][]byte, pods)
	for i := range out {
		out[i] = b.Bytes()
	}
	return out
}

type tailMode string

const (
	kubeletTail     tailMode = "kubelet honours tailLines/limitBytes"
	unboundedStream tailMode = "a stream ignoring the limits"
)

// open serves a log as the API server would in each mode.
func (m tailMode) open(log []byte) io.Reader {
	if m == unboundedStream {
		return bytes.NewReader(log)
	}
	lines := bytes.SplitAfter(log, []byte("\n"))
	if len(lines) > evidence.TailLines+1 {
		lines = lines[len(lines)-evidence.TailLines-1:]
	}
	tail := bytes.Join(lines, nil)
	return bytes.NewReader(tail[:min(len(tail), evidence.ReadLimit)])
}

type buildResult struct {
	median, p90 time.Duration
	size        int
	artifacts   int
	read        int64
}

type countingReader struct {
	r io.Reader
	n *int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

func measureBuild(ctx context.Context, st evidence.Store, in *inputs, logs [][]byte, mode tailMode) (*buildResult, error) {
	var times []time.Duration
	res := &buildResult{}
	for i := range 20 {
		res.read = 0
		start := time.Now()
		sealed, err := build(in, logs, mode, i, &res.read)
		if err != nil {
			return nil, err
		}
		if err := evidence.Write(ctx, st, sealed); err != nil {
			return nil, err
		}
		times = append(times, time.Since(start))
		res.size, res.artifacts = len(sealed.Raw), len(sealed.Manifest.Artifacts)
		for _, a := range sealed.Manifest.Artifacts {
			res.size += int(a.Size)
		}
	}
	slices.Sort(times)
	res.median, res.p90 = times[len(times)/2], times[len(times)*9/10]
	return res, nil
}

// build assembles and seals one bundle (attempt i+1) as the recorder does.
func build(in *inputs, logs [][]byte, mode tailMode, i int, read *int64) (*evidence.Sealed, error) {
	masker := evidence.NewMasker(secret)
	run := in.in.Run
	run.Attempt = i + 1
	ri := in.in
	ri.Run = run
	b := evidence.NewBundle(evidence.Key{Namespace: "team-a", Run: run.Name, Attempt: run.Attempt}, "Succeeded")
	rec := &evidence.Record{Run: evidence.RunInfo{Namespace: "team-a", Name: run.Name, Phase: "Succeeded"}, Metrics: &evidence.Metrics{}}
	for p, log := range logs {
		data, truncated, err := evidence.Tail(countingReader{mode.open(log), read}, masker, rec.Metrics)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(data, []byte(secret)) {
			return nil, fmt.Errorf("the secret survived masking")
		}
		name := fmt.Sprintf("%sresearch-bench-%d-pod%d/main.log", evidence.PrefixLogs, run.Attempt, p)
		b.Add(name, evidence.MediaText, data)
		rec.Logs = append(rec.Logs, evidence.LogTail{Pod: fmt.Sprintf("pod%d", p), Container: "main", Artifact: name, Bytes: len(data), Truncated: truncated})
	}
	manifests, err := evidence.Rerender(ri, in.tau, in.policy)
	if err != nil {
		return nil, err
	}
	b.Add(evidence.ArtifactManifests, evidence.MediaYAML, manifests)
	b.Add(evidence.PrefixTauFile+"tau.yaml", evidence.MediaYAML, in.tau)
	for n, d := range in.policy {
		b.Add(evidence.PrefixPolicy+n, evidence.MediaYAML, d)
	}
	if err := b.AddJSON(evidence.ArtifactRenderInputs, ri); err != nil {
		return nil, err
	}
	if err := b.AddJSON(evidence.ArtifactRecord, rec); err != nil {
		return nil, err
	}
	return b.Seal(time.Now())
}
