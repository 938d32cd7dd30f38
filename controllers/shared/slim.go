package shared

import (
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The cache keeps, of every pod it holds, only what the controller reads
// from the cache: where the pod runs and what it asks for (nodeName,
// nodeSelector, tolerations, each container's name and resources: the
// run's phase, its wait explanations, the janitor, GPU usage) and the
// Secrets it names (env, envFrom, volumes, image pull secrets: evidence
// and logs mask their values). The rest (commands, environment values,
// mounts, probes, affinity) is most of a pod's size. Once a pod has
// terminated, what it asked for and where it could run are read no more
// (those readers look at pods that wait or run), so its resources, node
// selector and tolerations go too: at 10,000 ended runs the cache holds
// 10,000 such pods. Of a pod's labels it drops those the Job controller
// and Kueue add (generatedPodLabels): with them a pod of a Job had 11
// labels, past the 8 a map's smallest table holds, and nothing in TauGrid
// selects or reads a pod by them.
//
// Of the pod templates of Jobs, RayJobs and Kueue Workloads it keeps no
// labels, annotations or spec, and no Job's selector: what a run's
// workload is made of is read from the objects the run reconciler renders
// (queueing, evidence) or from the API server (adoption, the admission
// check's copies on workers), never from the cached copies (hack/scale:
// pod specs were a quarter of the heap at 10,000 runs). A Workload's pod
// sets keep, of each container, its name and the accelerators it asks
// for: the queue's start estimate counts the GPUs of the workloads ahead
// (runs.WorkloadGPUs).
//
// The cached objects are never written back whole: TauGrid patches Jobs,
// Workloads and pods with merge patches computed against the same slim
// copy, so what was dropped is never sent.

// GeneratedJobLabels are the pod template labels the API server adds to a
// Job at creation, and so to its pods: its name and UID, each under its
// old and its batch.kubernetes.io name.
var GeneratedJobLabels = []string{"controller-uid", batchv1.ControllerUidLabel, "job-name", batchv1.JobNameLabel}

// generatedPodLabels are the labels the Job controller (GeneratedJobLabels)
// and Kueue (the pod's queues and pod set) add to a pod.
var generatedPodLabels = append(slices.Clone(GeneratedJobLabels),
	"kueue.x-k8s.io/cluster-queue-name", "kueue.x-k8s.io/local-queue-name", "kueue.x-k8s.io/podset")

// slimPodSpec drops from s, in place, what the controller does not read.
func slimPodSpec(s *corev1.PodSpec) {
	*s = corev1.PodSpec{
		NodeName:         s.NodeName,
		NodeSelector:     s.NodeSelector,
		Tolerations:      s.Tolerations,
		ImagePullSecrets: s.ImagePullSecrets,
		InitContainers:   slimContainers(s.InitContainers),
		Containers:       slimContainers(s.Containers),
		Volumes:          secretVolumes(s.Volumes),
	}
}

// slimContainers keeps each container's name, resources and the
// environment that names Secrets.
func slimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: c.Resources}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out[i].Env = append(out[i].Env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: e.ValueFrom.SecretKeyRef}})
			}
		}
		for _, f := range c.EnvFrom {
			if f.SecretRef != nil {
				out[i].EnvFrom = append(out[i].EnvFrom, corev1.EnvFromSource{SecretRef: f.SecretRef})
			}
		}
	}
	return out
}

// secretVolumes are the volumes that mount Secrets, with only their
// Secret sources.
func secretVolumes(vs []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vs {
		switch {
		case v.Secret != nil:
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Secret: v.Secret}})
		case v.Projected != nil:
			var sources []corev1.VolumeProjection
			for _, p := range v.Projected.Sources {
				if p.Secret != nil {
					sources = append(sources, corev1.VolumeProjection{Secret: p.Secret})
				}
			}
			if len(sources) > 0 {
				out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}})
			}
		}
	}
	return out
}

// slimEndedRun drops, from a run that has ended, its workload's field
// digests (about 1 KB, the largest field of a cached TauRun): they name
// what changed in a workload the policy admission check refuses, and the
// check refuses an ended run's workload for that alone, before it looks
// at what changed (controllers/admission). The stored run keeps them, and
// no status write sends them (a merge patch of the copy's changes), so
// only the cache's copy goes without.
func slimEndedRun(obj any) {
	if r, ok := obj.(*taugridv1.TauRun); ok && r.Status.Phase.Final() && r.Status.Workload != nil {
		r.Status.Workload.FieldDigests = ""
	}
}

// SlimPodSpecs slims the pod specs an object of a cached kind carries.
func SlimPodSpecs(obj any) {
	switch o := obj.(type) {
	case *corev1.Pod:
		slimPodSpec(&o.Spec)
		for _, l := range generatedPodLabels {
			delete(o.Labels, l)
		}
		if PodTerminated(o) {
			o.Spec.NodeSelector, o.Spec.Tolerations = nil, nil
			for _, cs := range [][]corev1.Container{o.Spec.InitContainers, o.Spec.Containers} {
				for i := range cs {
					cs[i].Resources = corev1.ResourceRequirements{}
				}
			}
		}
	case *batchv1.Job:
		o.Spec.Template = corev1.PodTemplateSpec{}
		o.Spec.Selector = nil
	case *kueue.Workload:
		for i := range o.Spec.PodSets {
			t := &o.Spec.PodSets[i].Template
			*t = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: acceleratorsOf(t.Spec.Containers)}}
		}
	case *rayv1.RayJob:
		if rc := o.Spec.RayClusterSpec; rc != nil {
			rc.HeadGroupSpec.Template = corev1.PodTemplateSpec{}
			for i := range rc.WorkerGroupSpecs {
				rc.WorkerGroupSpecs[i].Template = corev1.PodTemplateSpec{}
			}
		}
	}
}

// acceleratorsOf keeps of each container its name and the extended
// resources it asks for (nvidia.com/gpu, amd.com/gpu, ...), not CPU,
// memory or storage: each under its limit, or its request where it has no
// limit (an extended resource's request, if given, equals its limit).
func acceleratorsOf(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		limits := extended(c.Resources.Limits, nil)
		out[i] = corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{
			Limits: limits, Requests: extended(c.Resources.Requests, limits)}}
	}
	return out
}

// IsAccelerator reports a resource that names a device: an extended
// resource such as nvidia.com/gpu, amd.com/gpu or google.com/tpu, rather
// than CPU, memory, storage or another of Kubernetes' own.
func IsAccelerator(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/")
}

// extended is the accelerators of l not in but, nil if none.
func extended(l, but corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range l {
		if _, dup := but[name]; dup {
			continue
		}
		if IsAccelerator(name) {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}
