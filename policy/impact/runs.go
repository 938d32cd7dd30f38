package impact

import (
	"maps"
	"slices"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// RunOf is what the preview knows of a run: from the TauRun and, once it
// is submitted, its current Kueue Workload (nil before). The TauRun does
// not record its profile: it is found among the profiles of rendered (the
// policy it was rendered under, or the one in force) that its tenant may
// use and its pods fit.
func RunOf(run *taugridv1.TauRun, wl *kueue.Workload, rendered *render.Policy) Run {
	r := Run{Namespace: run.Namespace, Name: run.Name, Repository: run.Spec.Repository, Phase: run.Status.Phase}
	if ws := run.Status.Workload; ws != nil {
		r.Queue, r.Admitted = ws.Queue, ws.Admitted
	}
	if wl == nil {
		return r
	}
	r.Submitted = true
	if wl.Spec.QueueName != "" {
		r.Queue = string(wl.Spec.QueueName)
	}
	if ref := wl.Spec.PriorityClassRef; ref != nil && ref.Kind == "WorkloadPriorityClass" {
		r.PriorityClass = ref.Name
	}
	r.Requests = corev1.ResourceList{}
	gpuResources := gpuResourcesOf(rendered)
	for _, ps := range wl.Spec.PodSets {
		spec := &ps.Template.Spec
		per := podRequests(spec)
		for k, v := range per {
			total := r.Requests[k]
			for range ps.Count {
				total.Add(v)
			}
			r.Requests[k] = total
			if gpuResources[k] {
				r.GPUs += v.Value() * int64(ps.Count)
			}
		}
		r.Pods += int64(ps.Count)
		for _, c := range spec.Containers {
			if !slices.Contains(r.Images, c.Image) {
				r.Images = append(r.Images, c.Image)
			}
		}
		if len(spec.NodeSelector) > len(r.NodeSelector) {
			r.NodeSelector = spec.NodeSelector
		}
	}
	r.Profiles = profilesFitting(rendered, r)
	return r
}

// podRequests are what one pod asks of Kueue: its containers' requests
// together, or its largest init container's where that is more.
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range spec.Containers {
		for k, v := range requestsOf(c) {
			q := out[k]
			q.Add(v)
			out[k] = q
		}
	}
	for _, c := range spec.InitContainers {
		for k, v := range requestsOf(c) {
			if q, ok := out[k]; !ok || v.Cmp(q) > 0 {
				out[k] = v
			}
		}
	}
	return out
}

// requestsOf a container: its requests, and its limits where it sets no
// request, as the API server defaults them.
func requestsOf(c corev1.Container) corev1.ResourceList {
	out := maps.Clone(c.Resources.Limits)
	if out == nil {
		out = corev1.ResourceList{}
	}
	maps.Copy(out, c.Resources.Requests)
	return out
}

func gpuResourcesOf(p *render.Policy) map[corev1.ResourceName]bool {
	out := map[corev1.ResourceName]bool{"nvidia.com/gpu": true}
	if p == nil {
		return out
	}
	for _, pr := range p.Profiles {
		if pr.GPUResource != "" {
			out[pr.GPUResource] = true
		}
	}
	return out
}

// profilesFitting are the profiles of p the run's tenant may use whose
// node selector the run's pods carry, whose GPU resource they ask for,
// and whose limits they keep within.
func profilesFitting(p *render.Policy, r Run) []string {
	if p == nil {
		return nil
	}
	t := p.TenantForNamespace(r.Namespace)
	if t == nil {
		return nil
	}
	var out []string
	for _, pr := range p.Profiles {
		if !t.MayUse(pr.Name) || r.GPUs > int64(pr.MaxGPUs) || r.Pods > int64(pr.MaxNodes)+1 {
			continue
		}
		if _, asks := r.Requests[pr.GPUResource]; r.GPUs > 0 && !asks {
			continue
		}
		if subset(pr.NodeSelector, r.NodeSelector) {
			out = append(out, pr.Name)
		}
	}
	return out
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
