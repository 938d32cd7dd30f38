package shared

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
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
// mounts, probes, affinity) is most of a pod's size. Of the pod templates
// of Jobs, RayJobs and Kueue Workloads it keeps no spec at all: what a
// run's workload asks for is read from the objects the run reconciler
// renders (queueing, evidence), never from the cached copies (hack/scale:
// pod specs were a quarter of the heap at 10,000 runs).
//
// The cached objects are never written back whole: TauGrid patches Jobs,
// Workloads and pods with merge patches computed against the same slim
// copy, so what was dropped is never sent.

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

// SlimPodSpecs slims the pod specs an object of a cached kind carries.
func SlimPodSpecs(obj any) {
	switch o := obj.(type) {
	case *corev1.Pod:
		slimPodSpec(&o.Spec)
	case *batchv1.Job:
		o.Spec.Template.Spec = corev1.PodSpec{}
	case *kueue.Workload:
		for i := range o.Spec.PodSets {
			o.Spec.PodSets[i].Template.Spec = corev1.PodSpec{}
		}
	case *rayv1.RayJob:
		if rc := o.Spec.RayClusterSpec; rc != nil {
			rc.HeadGroupSpec.Template.Spec = corev1.PodSpec{}
			for i := range rc.WorkerGroupSpecs {
				rc.WorkerGroupSpecs[i].Template.Spec = corev1.PodSpec{}
			}
		}
	}
}
