package integration

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/taugrid/taugrid/runs"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/taugrid/taugrid/controllers/janitor"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/shared"
)

// renderedPodSpecs are the pod specs of the render package's golden Jobs
// and RayJobs (what TauGrid submits), each given the Secret references a
// platform's tau files can add, and a node.
func renderedPodSpecs(t *testing.T) map[string]*corev1.PodSpec {
	t.Helper()
	files, err := filepath.Glob("../../render/testdata/golden/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("golden files: %v (%d)", err, len(files))
	}
	out := map[string]*corev1.PodSpec{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range splitYAML(t, data) {
			var kind struct{ Kind string }
			if err := yaml.Unmarshal(doc, &kind); err != nil {
				t.Fatal(err)
			}
			switch kind.Kind {
			case "Job":
				var j batchv1.Job
				decodeYAML(t, doc, &j)
				out[filepath.Base(f)+" job"] = &j.Spec.Template.Spec
			case "RayJob":
				var r rayv1.RayJob
				decodeYAML(t, doc, &r)
				out[filepath.Base(f)+" head"] = &r.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec
				for i := range r.Spec.RayClusterSpec.WorkerGroupSpecs {
					out[filepath.Base(f)+" worker "+r.Spec.RayClusterSpec.WorkerGroupSpecs[i].GroupName] = &r.Spec.RayClusterSpec.WorkerGroupSpecs[i].Template.Spec
				}
			}
		}
	}
	for _, s := range out {
		s.NodeName = "gpu-node-0007"
		s.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}
		s.ImagePullSecrets = append(s.ImagePullSecrets, corev1.LocalObjectReference{Name: "registry"})
		c := &s.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "WANDB_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "wandb"}, Key: "key"}}})
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}}},
			corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}})
		s.Volumes = append(s.Volumes,
			corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s3"}}},
			corev1.Volume{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "trust"}}},
			}}}})
	}
	return out
}

func splitYAML(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func decodeYAML(t *testing.T, doc []byte, into any) {
	t.Helper()
	if err := yaml.Unmarshal(doc, into); err != nil {
		t.Fatal(err)
	}
}

// Everything the controller reads from a cached pod spec reads the same
// from its slim copy: the Secrets it names (evidence and logs mask their
// values), where it runs, what it asks for, whether a node could hold it;
// and the copy is a fraction of the spec's size.
func TestASlimPodSpecReadsAsTheWholeOne(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("200"), corev1.ResourceMemory: resource.MustParse("2000Gi"),
	}}}
	node.Labels = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}
	small := node.DeepCopy()
	small.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("0")
	var whole, slim int
	for name, spec := range renderedPodSpecs(t) {
		pod := &corev1.Pod{Spec: *spec.DeepCopy()}
		cut := pod.DeepCopy()
		shared.SlimPodSpecs(cut)
		want, got := map[string]bool{}, map[string]bool{}
		runs.SecretNames(&pod.Spec, want)
		runs.SecretNames(&cut.Spec, got)
		if !maps.Equal(want, got) || len(want) < 5 {
			t.Errorf("%s: Secrets named %v, slim %v", name, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)))
		}
		if !equality.Semantic.DeepEqual(runctrl.PodRequestTotals(pod), runctrl.PodRequestTotals(cut)) || janitor.Accelerators(pod) != janitor.Accelerators(cut) {
			t.Errorf("%s: requests %v (%q), slim %v (%q)", name, runctrl.PodRequestTotals(pod), janitor.Accelerators(pod), runctrl.PodRequestTotals(cut), janitor.Accelerators(cut))
		}
		for _, n := range []*corev1.Node{node, small} {
			if runctrl.CouldHold(n, pod) != runctrl.CouldHold(n, cut) {
				t.Errorf("%s: couldHold %v, slim %v", name, runctrl.CouldHold(n, pod), runctrl.CouldHold(n, cut))
			}
		}
		if cut.Spec.NodeName != pod.Spec.NodeName || len(cut.Spec.InitContainers) != len(pod.Spec.InitContainers) || len(cut.Spec.Containers) != len(pod.Spec.Containers) {
			t.Errorf("%s: node %q, %d+%d containers; slim %q, %d+%d", name, pod.Spec.NodeName, len(pod.Spec.InitContainers), len(pod.Spec.Containers),
				cut.Spec.NodeName, len(cut.Spec.InitContainers), len(cut.Spec.Containers))
		}
		whole += jsonSize(t, pod)
		slim += jsonSize(t, cut)
	}
	if slim*2 > whole {
		t.Errorf("slim pod specs %d bytes of %d: want under half", slim, whole)
	}
	t.Logf("pod specs as JSON: %d bytes, slim %d (%.0f%%)", whole, slim, 100*float64(slim)/float64(whole))
}

// The cache keeps no pod template of Jobs and RayJobs, nor a Job's
// selector (what they ask for is read from the rendered objects), and of a
// Workload's templates only what the queue's start estimate reads: the
// GPUs each pod set asks for. It leaves their other fields alone.
func TestTheCacheSlimsEveryCachedPodTemplate(t *testing.T) {
	specs := renderedPodSpecs(t)
	spec := specs[slices.Sorted(maps.Keys(specs))[0]]
	job := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(4)), Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "c289fae7"}}}}
	job.Spec.Template.Labels = map[string]string{"taugrid.dev/attempt": "2"}
	job.Labels = map[string]string{"taugrid.dev/attempt": "2"}
	wl := &kueue.Workload{Spec: kueue.WorkloadSpec{QueueName: "runs", PodSets: []kueue.PodSet{{Name: "main", Count: 4, Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}}}}}
	wl.Spec.PodSets[0].Template.Labels = map[string]string{"taugrid.dev/attempt": "2"}
	gpus := runs.WorkloadGPUs(wl)
	ray := &rayv1.RayJob{Spec: rayv1.RayJobSpec{Entrypoint: "python train.py", RayClusterSpec: &rayv1.RayClusterSpec{
		HeadGroupSpec:    rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "gpu", Replicas: ptr.To(int32(2)), Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}}},
	}}}
	for _, obj := range []any{job, wl, ray} {
		if _, err := shared.CacheTransform(obj); err != nil {
			t.Fatal(err)
		}
	}
	for what, s := range map[string]*corev1.PodTemplateSpec{"job": &job.Spec.Template,
		"ray head": &ray.Spec.RayClusterSpec.HeadGroupSpec.Template, "ray worker": &ray.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template} {
		if !equality.Semantic.DeepEqual(*s, corev1.PodTemplateSpec{}) {
			t.Errorf("%s: template kept: %+v", what, s)
		}
	}
	if job.Spec.Selector != nil {
		t.Errorf("job: selector kept: %v", job.Spec.Selector)
	}
	if got := runs.WorkloadGPUs(wl); got != gpus || gpus != 4 {
		t.Errorf("the cached workload asks for %d GPUs, the whole one %d; want 4 (4 pods of 1)", got, gpus)
	}
	keep := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: spec.Containers[0].Name,
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{runs.GPU: resource.MustParse("1")}}}}}}
	if !equality.Semantic.DeepEqual(wl.Spec.PodSets[0].Template, keep) {
		t.Errorf("workload: template kept %+v, want only %+v", wl.Spec.PodSets[0].Template, keep)
	}
	if *job.Spec.Parallelism != 4 || job.Labels["taugrid.dev/attempt"] != "2" || wl.Spec.QueueName != "runs" || wl.Spec.PodSets[0].Count != 4 ||
		ray.Spec.Entrypoint == "" || *ray.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas != 2 {
		t.Errorf("fields beside the pod templates changed: job %+v, workload %+v, ray %+v", job.Spec, wl.Spec, ray.Spec)
	}
}

// A pod that has terminated keeps what the sealer and the run's phase
// read (its node, its containers' names, the Secrets it names) and drops
// what only pods that wait or run are read for: what it asks for and
// where it could run.
func TestATerminatedPodKeepsWhatItsEndIsReadFor(t *testing.T) {
	for name, spec := range renderedPodSpecs(t) {
		pod := &corev1.Pod{Spec: *spec.DeepCopy(), Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
		cut := pod.DeepCopy()
		shared.SlimPodSpecs(cut)
		want, got := map[string]bool{}, map[string]bool{}
		runs.SecretNames(&pod.Spec, want)
		runs.SecretNames(&cut.Spec, got)
		if !maps.Equal(want, got) {
			t.Errorf("%s: Secrets named %v, slim %v", name, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)))
		}
		if cut.Spec.NodeName != pod.Spec.NodeName || len(cut.Spec.InitContainers) != len(pod.Spec.InitContainers) || len(cut.Spec.Containers) != len(pod.Spec.Containers) ||
			cut.Spec.Containers[0].Name != pod.Spec.Containers[0].Name {
			t.Errorf("%s: node %q, %d+%d containers; slim %q, %d+%d", name, pod.Spec.NodeName, len(pod.Spec.InitContainers), len(pod.Spec.Containers),
				cut.Spec.NodeName, len(cut.Spec.InitContainers), len(cut.Spec.Containers))
		}
		if cut.Spec.NodeSelector != nil || cut.Spec.Tolerations != nil || janitor.Accelerators(cut) != "" || len(runctrl.PodRequestTotals(cut)) != 0 {
			t.Errorf("%s: a terminated pod keeps node selector %v, tolerations %v, accelerators %q, requests %v", name,
				cut.Spec.NodeSelector, cut.Spec.Tolerations, janitor.Accelerators(cut), runctrl.PodRequestTotals(cut))
		}
	}
}

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
