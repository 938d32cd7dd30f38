package evidence

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// PredicateRunV1 is the predicate type of a sealed run's attestation;
// docs/evidence.md says what each field means.
const PredicateRunV1 = "https://taugrid.dev/attestation/run/v1"

// RunPredicate is what a sealed bundle attests about its attempt. Every
// field is read from the bundle (its manifest and record.json), so an
// auditor can derive it again from the bundle alone.
type RunPredicate struct {
	Bundle     PredicateBundle     `json:"bundle"`
	Repository PredicateRepository `json:"repository"`
	TauFile    PredicateTauFile    `json:"tau_file"`
	Policy     PredicatePolicy     `json:"policy"`
	// Images the attempt's containers ran, in image order.
	Images  []PredicateImage `json:"images"`
	Trigger PredicateTrigger `json:"trigger"`
	// Admission is Kueue's decision; nil when the Workload was gone.
	Admission *PredicateAdmission `json:"admission,omitempty"`
	// Nodes the attempt's pods ran on, in name order.
	Nodes []PredicateNode `json:"nodes"`
	// Attempts of the run up to this one.
	Attempts []PredicateAttempt `json:"attempts"`
	// Preemptions counts attempts Kueue preempted or evicted.
	Preemptions int `json:"preemptions"`
	// Outcome is how this attempt ended: Succeeded, Failed, Cancelled,
	// Retried, ...
	Outcome string `json:"outcome"`
}

// PredicateBundle names the bundle.
type PredicateBundle struct {
	Namespace string    `json:"namespace"`
	Run       string    `json:"run"`
	Attempt   int       `json:"attempt"`
	SealedAt  time.Time `json:"sealed_at"`
}

// PredicateRepository is the commit the run ran.
type PredicateRepository struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Commit string `json:"commit"`
	Target string `json:"target"`
}

// PredicateTauFile is the tau file the run was rendered from.
type PredicateTauFile struct {
	Path string `json:"path"`
	// SHA256 is the digest of the bundle's tau-file/<path> artifact; empty
	// when the bundle could not hold it.
	SHA256 string `json:"sha256,omitempty"`
	// ConfigDigest is the digest of the resolved configuration.
	ConfigDigest string `json:"config_digest,omitempty"`
}

// PredicatePolicy is the platform policy the run was rendered under.
type PredicatePolicy struct {
	Commit string `json:"commit"`
	Digest string `json:"digest"`
}

// PredicateImage is one image the attempt's containers ran.
type PredicateImage struct {
	Image string `json:"image"`
	// Digest is what the node resolved the image to (sha256:...); empty
	// when no container reported it.
	Digest string `json:"digest,omitempty"`
}

// PredicateTrigger is who asked for the run, and who signed its ref.
type PredicateTrigger struct {
	Kind      string `json:"kind"`
	Ref       string `json:"ref"`
	Requester string `json:"requester,omitempty"`
	// Signature is the check in one line; Signer its parts when verified.
	Signature string  `json:"signature"`
	Signer    *Signer `json:"signer,omitempty"`
}

// PredicateAdmission is Kueue's admission of the attempt's Workload.
type PredicateAdmission struct {
	Workload     string `json:"workload"`
	Queue        string `json:"queue"`
	ClusterQueue string `json:"cluster_queue,omitempty"`
	// Admitted is the Workload's last Admitted condition: True, False,
	// or "" when it had none.
	Admitted   string            `json:"admitted"`
	AdmittedAt *time.Time        `json:"admitted_at,omitempty"`
	Flavors    map[string]string `json:"flavors,omitempty"`
	Checks     []AdmissionCheck  `json:"checks,omitempty"`
}

// PredicateNode is a node the attempt's pods ran on.
type PredicateNode struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
	// GPUHealthyAtStart is the node's TauGPUHealthy when the attempt
	// started.
	GPUHealthyAtStart string `json:"gpu_healthy_at_start,omitempty"`
}

// PredicateAttempt is one attempt of the run.
type PredicateAttempt struct {
	Number       int        `json:"number"`
	Workload     string     `json:"workload"`
	Start        *time.Time `json:"start,omitempty"`
	End          *time.Time `json:"end,omitempty"`
	FailureClass string     `json:"failure_class,omitempty"`
	Nodes        []string   `json:"nodes,omitempty"`
	Cluster      string     `json:"cluster,omitempty"`
	// GPUs is how many GPUs the attempt's pods were seen holding.
	GPUs int `json:"gpus,omitempty"`
	// GPUUUIDs are those GPUs, by NVML UUID, as the node agents saw them.
	GPUUUIDs []string `json:"gpu_uuids,omitempty"`
}

// failurePreempted is the failure class of an attempt Kueue preempted.
const failurePreempted = "Preempted"

// PredicateOf derives the predicate of a sealed bundle from its manifest
// and its content by artifact name.
func PredicateOf(m *Manifest, content map[string][]byte) (*RunPredicate, error) {
	rec := &Record{}
	if err := json.Unmarshal(content[ArtifactRecord], rec); err != nil {
		return nil, fmt.Errorf("%s: %w", ArtifactRecord, err)
	}
	var in RenderInputs
	if data, ok := content[ArtifactRenderInputs]; ok {
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, fmt.Errorf("%s: %w", ArtifactRenderInputs, err)
		}
	}
	p := &RunPredicate{
		Bundle:     PredicateBundle{Namespace: m.Key.Namespace, Run: m.Key.Run, Attempt: m.Key.Attempt, SealedAt: m.SealedAt},
		Repository: PredicateRepository{Name: rec.Run.Repository, URL: rec.Run.RepositoryURL, Commit: rec.Run.Commit, Target: rec.Run.Target},
		TauFile:    PredicateTauFile{Path: cmp.Or(in.TauFile, rec.Inputs.TauFile), ConfigDigest: rec.Inputs.ConfigDigest},
		Policy:     PredicatePolicy{Commit: rec.Inputs.PolicyCommit, Digest: cmp.Or(in.PolicyDigest, rec.Inputs.PolicyDigest)},
		Images:     imagesOf(rec.Pods),
		Trigger: PredicateTrigger{Kind: rec.Trigger.Kind, Ref: rec.Trigger.Ref, Requester: rec.Trigger.Requester,
			Signature: rec.Trigger.Signature, Signer: rec.Trigger.Signer},
		Admission: admissionOf(rec.Kueue),
		Nodes:     nodesOf(rec),
		Outcome:   m.Outcome,
	}
	if a, ok := m.Artifact(PrefixTauFile + p.TauFile.Path); ok {
		p.TauFile.SHA256 = "sha256:" + a.SHA256
	}
	for _, a := range rec.Attempts {
		pa := PredicateAttempt{Number: a.Number, Workload: a.Workload, Start: a.Start, End: a.End, FailureClass: a.FailureClass,
			Nodes: a.Nodes, Cluster: a.Cluster}
		if a.GPUUsage != nil {
			pa.GPUs, pa.GPUUUIDs = a.GPUUsage.GPUs, a.GPUUsage.UUIDs
		}
		if a.FailureClass == failurePreempted {
			p.Preemptions++
		}
		p.Attempts = append(p.Attempts, pa)
	}
	return p, nil
}

// imagesOf lists each image the pods' containers ran once, with the digest
// the node resolved it to.
func imagesOf(pods []PodRecord) []PredicateImage {
	seen := map[PredicateImage]bool{}
	for _, p := range pods {
		for _, c := range p.Containers {
			if c.Image == "" {
				continue
			}
			img := PredicateImage{Image: c.Image}
			if _, d, ok := strings.Cut(c.ImageID, "@"); ok && strings.HasPrefix(d, "sha256:") {
				img.Digest = d
			}
			seen[img] = true
		}
	}
	out := slices.Collect(maps.Keys(seen))
	slices.SortFunc(out, func(a, b PredicateImage) int {
		return cmp.Or(cmp.Compare(a.Image, b.Image), cmp.Compare(a.Digest, b.Digest))
	})
	return out
}

func admissionOf(k *KueueTimeline) *PredicateAdmission {
	if k == nil {
		return nil
	}
	a := &PredicateAdmission{Workload: k.Workload, Queue: k.Queue, ClusterQueue: k.ClusterQueue, Flavors: k.Flavors, Checks: k.AdmissionChecks}
	for _, c := range k.Conditions {
		if c.Type == "Admitted" {
			a.Admitted = c.Status
			a.AdmittedAt = nil
			if c.Status == "True" {
				at := c.Time
				a.AdmittedAt = &at
			}
		}
	}
	return a
}

// nodesOf lists the nodes the pods ran on, with the pods on each.
func nodesOf(rec *Record) []PredicateNode {
	byName := map[string]*PredicateNode{}
	for _, n := range rec.Nodes {
		byName[n.Name] = &PredicateNode{Name: n.Name, Pods: []string{}, GPUHealthyAtStart: n.GPUHealthyAtStart}
	}
	for _, p := range rec.Pods {
		if p.Node == "" {
			continue
		}
		n := byName[p.Node]
		if n == nil {
			n = &PredicateNode{Name: p.Node}
			byName[p.Node] = n
		}
		n.Pods = append(n.Pods, p.Name)
	}
	out := []PredicateNode{}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		n := byName[name]
		slices.Sort(n.Pods)
		if n.Pods == nil {
			n.Pods = []string{}
		}
		out = append(out, *n)
	}
	return out
}
