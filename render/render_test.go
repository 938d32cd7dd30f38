package render

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkInvariants asserts what every rendered attempt must hold, whatever the
// tau file said: suspended for Kueue, in the tenant's queue, labelled,
// retried only by TauGrid, and restricted.
func checkInvariants(t *testing.T, objs []client.Object) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("rendered nothing")
	}
	for _, o := range objs {
		l := o.GetLabels()
		for _, k := range []string{LabelRun, LabelManagedBy, LabelAttempt} {
			if l[k] == "" {
				t.Errorf("%T %s lacks label %s", o, o.GetName(), k)
			}
		}
		if o.GetNamespace() != "team-a" {
			t.Errorf("%T namespace = %q, want the tenant's team-a", o, o.GetNamespace())
		}
		switch w := o.(type) {
		case *batchv1.Job:
			if w.Spec.Suspend == nil || !*w.Spec.Suspend {
				t.Error("Job is not suspended: Kueue must admit it")
			}
			if *w.Spec.BackoffLimit != 0 {
				t.Errorf("Job backoffLimit = %d, want 0: TauGrid owns retries", *w.Spec.BackoffLimit)
			}
			checkQueued(t, o)
			checkPod(t, &w.Spec.Template.Spec)
		case *rayv1.RayJob:
			if !w.Spec.Suspend {
				t.Error("RayJob is not suspended: Kueue must admit it")
			}
			// An ended Ray run frees its cluster at once; only the record stays.
			if !w.Spec.ShutdownAfterJobFinishes || w.Spec.TTLSecondsAfterFinished != 0 {
				t.Errorf("RayJob shutdownAfterJobFinishes = %v, ttlSecondsAfterFinished = %d; want true and 0: the cluster must go when the job ends",
					w.Spec.ShutdownAfterJobFinishes, w.Spec.TTLSecondsAfterFinished)
			}
			if keep := w.Annotations[AnnotationKeepAfterFinished]; keep != "86400" {
				t.Errorf("RayJob keeps its record for %q s, want the policy's ttl_after_finished, 86400", keep)
			}
			checkQueued(t, o)
			checkPod(t, &w.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec)
			for _, g := range w.Spec.RayClusterSpec.WorkerGroupSpecs {
				checkPod(t, &g.Template.Spec)
			}
			checkPod(t, &w.Spec.SubmitterPodTemplate.Spec)
		case *corev1.Service:
			if _, ok := l[LabelQueueName]; ok {
				t.Error("the Service carries a queue label; only workloads go through Kueue")
			}
		case *networkingv1.NetworkPolicy:
			checkFenced(t, w, objs[0])
		default:
			t.Errorf("unexpected object %T", o)
		}
	}
}

// checkFenced: the policy selects every pod of the workload, and lets in
// only pods of the same run (the example profiles add no peers).
func checkFenced(t *testing.T, np *networkingv1.NetworkPolicy, workload client.Object) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range podTemplates(workload) {
		if !sel.Matches(labels.Set(tmpl.Labels)) {
			t.Errorf("the NetworkPolicy %s does not select pod labels %v", np.Name, tmpl.Labels)
		}
	}
	want := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelRun: workload.GetLabels()[LabelRun]}}}}}}
	if diff := cmp.Diff(want, np.Spec.Ingress); diff != "" || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("the NetworkPolicy lets in more than the run's own pods (-want +got):\n%s", diff)
	}
}

// podTemplates are the pod templates of a Job or RayJob.
func podTemplates(o client.Object) []corev1.PodTemplateSpec {
	switch w := o.(type) {
	case *batchv1.Job:
		return []corev1.PodTemplateSpec{w.Spec.Template}
	case *rayv1.RayJob:
		ts := []corev1.PodTemplateSpec{w.Spec.RayClusterSpec.HeadGroupSpec.Template, *w.Spec.SubmitterPodTemplate}
		for _, g := range w.Spec.RayClusterSpec.WorkerGroupSpecs {
			ts = append(ts, g.Template)
		}
		return ts
	}
	return nil
}

func checkQueued(t *testing.T, o client.Object) {
	t.Helper()
	if q := o.GetLabels()[LabelQueueName]; q != "runs" {
		t.Errorf("%T queue label = %q, want runs", o, q)
	}
	for _, a := range []string{AnnotationCommit, AnnotationConfigDigest, AnnotationPolicyDigest} {
		if o.GetAnnotations()[a] == "" {
			t.Errorf("%T lacks provenance annotation %s", o, a)
		}
	}
}

func checkPod(t *testing.T, pod *corev1.PodSpec) {
	t.Helper()
	checkMounts(t, "pod", pod)
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod may run as root")
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container %s is not restricted: %+v", c.Name, sc)
		}
	}
	main := pod.Containers[0]
	if strings.HasPrefix(main.Name, "ray-job-submitter") {
		return
	}
	var names []string
	for _, e := range main.Env {
		if strings.HasPrefix(e.Name, "TAU_") {
			names = append(names, e.Name)
		}
	}
	want := []string{"TAU_RUN", "TAU_COMMIT", "TAU_REPOSITORY", "TAU_ATTEMPT", "TAU_OUTPUT_DIR", "TAU_CHECKPOINT_DIR"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("container %s TAU_* environment (-want +got):\n%s", main.Name, diff)
	}
}

func TestResolveFillsDefaultsFromPolicy(t *testing.T) {
	pol := examplePolicy(t)
	tests := map[string]struct {
		tauYAML string
		want    func(p *Plan) []any
		wantVal []any
	}{
		"a bare file gets the tenant's default profile, queue, priority and run time": {
			tauYAML: "schema_version: 1\nentrypoint: a.py\nruntime: {image: python:3}\n",
			want: func(p *Plan) []any {
				return []any{p.Profile.Name, p.Queue, p.PriorityClass, p.GPUs, p.CPU.String(), p.Timeout.String()}
			},
			wantVal: []any{"h200-1", "runs", "tau-normal", 1, "12", "24h0m0s"},
		},
		"a RayJob takes head sizes from its profile": {
			tauYAML: "schema_version: 1\nentrypoint: a.py\nruntime: {image: docker.io/rayproject/ray:2}\ncompute: {workers: 2}\npolicy: {profile: h200-8}\n",
			want: func(p *Plan) []any {
				return []any{p.Engine, p.Workers, p.GPUs, p.HeadCPU.String(), p.HeadMemory.String()}
			},
			wantVal: []any{EngineRayJob, 2, 8, "4", "16Gi"},
		},
		"torchrun runs one process per GPU unless told otherwise": {
			tauYAML: "schema_version: 1\nentrypoint: a.py\nruntime: {image: python:3}\nexecution: {launcher: torchrun}\ncompute: {gpus: 8, nodes: 2}\npolicy: {profile: h200-8}\n",
			want:    func(p *Plan) []any { return []any{p.Nodes, p.ProcessesPerNode} },
			wantVal: []any{2, 8},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rc, err := LoadConfig("tau.yaml", []byte(tc.tauYAML))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Resolve(rc, pol, "team-a", testRun)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantVal, tc.want(p)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestImageAllowListMatchesOnlyAtPathBoundaries(t *testing.T) {
	im := ImagePolicy{Allow: []string{"docker.io/library/python", "ghcr.io/taugrid/", "registry.allowed.com"}}
	tests := map[string]bool{
		"python:3.12": true,
		"docker.io/library/python@sha256:" + strings.Repeat("a", 64): true,
		"ghcr.io/taugrid/tau-fetch:v1":                               true,
		"registry.allowed.com/team/x:1":                              true,
		"docker.io/library/python-evil:3":                            false,
		"ghcr.io/taugrid-evil/x:1":                                   false,
		"pythonista/python:3":                                        false,
		"registry.allowed.com:5000/team/x:1":                         false, // another port is another server
		"registry.allowed.com.evil/team/x:1":                         false,
	}
	for image, want := range tests {
		ref, err := qualifyImage(image)
		if err != nil {
			t.Fatalf("qualifyImage(%q): %v", image, err)
		}
		if got := im.allows(ref); got != want {
			t.Errorf("allows(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestRenderedTorchrunWiresRendezvous(t *testing.T) {
	pol := examplePolicy(t)
	data := "schema_version: 1\nentrypoint: train.py\nruntime: {image: python:3}\nexecution: {launcher: torchrun}\ncompute: {gpus: 8, nodes: 2}\npolicy: {profile: h200-8}\n"
	objs, err := renderFile(pol, "tau.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	j, svc := objs[0].(*batchv1.Job), objs[1].(*corev1.Service)
	if *j.Spec.CompletionMode != batchv1.IndexedCompletion || *j.Spec.Completions != 2 || *j.Spec.Parallelism != 2 {
		t.Errorf("Job is not an Indexed Job of 2 pods: %+v", j.Spec)
	}
	if j.Spec.Template.Spec.Subdomain != svc.Name || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("pods are not reachable through the headless Service %s", svc.Name)
	}
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if want := "demo-7f3k2-1-0.demo-7f3k2-1"; env["MASTER_ADDR"] != want {
		t.Errorf("MASTER_ADDR = %q, want rank 0's stable name %q", env["MASTER_ADDR"], want)
	}
	cmd := strings.Join(j.Spec.Template.Spec.Containers[0].Command, " ")
	if !strings.Contains(cmd, "--nnodes=2") || !strings.Contains(cmd, "--node-rank=$(NODE_RANK)") {
		t.Errorf("torchrun command lacks multi-node flags: %s", cmd)
	}
}

// Every training container of every pod may report its progress, with a
// token for the progress audience only; the init container holds only the
// source token, the training containers never hold it.
func TestTrainingContainersReportProgressWithTheirOwnToken(t *testing.T) {
	pol := examplePolicy(t)
	run := testRun
	src := *testRun.Source
	src.Progress = "http://tau-controller.tau-system.svc:9090/progress/team-a/demo-7f3k2"
	run.Source = &src
	for _, file := range []string{"torchrun-single.yaml", "ray-inferred.yaml"} {
		data, err := os.ReadFile("testdata/valid/" + file)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := LoadConfig("tau.yaml", data)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := RenderConfig(rc, pol, "team-a", run)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, tmpl := range podTemplates(objs[0]) {
			spec := tmpl.Spec
			checkMounts(t, file, &spec)
			audience := map[string]string{} // volume: token audience
			for _, v := range spec.Volumes {
				if p := v.Projected; p != nil && len(p.Sources) == 1 && p.Sources[0].ServiceAccountToken != nil {
					audience[v.Name] = p.Sources[0].ServiceAccountToken.Audience
				}
			}
			mounted := func(c corev1.Container) []string {
				var auds []string
				for _, m := range c.VolumeMounts {
					if a, ok := audience[m.Name]; ok {
						auds = append(auds, a)
					}
				}
				return auds
			}
			for _, c := range spec.InitContainers {
				if got := mounted(c); !slices.Equal(got, []string{SourceTokenAudience}) {
					t.Errorf("%s: init container %s holds tokens for %v, want the source's only", file, c.Name, got)
				}
			}
			for _, c := range spec.Containers {
				if strings.HasPrefix(c.Name, "ray-job-submitter") && len(spec.InitContainers) == 0 {
					continue // fetches no source: reports nothing either
				}
				if got := mounted(c); !slices.Equal(got, []string{ProgressTokenAudience}) {
					t.Errorf("%s: container %s holds tokens for %v, want the progress one only", file, c.Name, got)
				}
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				if env["TAU_PROGRESS_URL"] != src.Progress || env["TAU_PROGRESS_TOKEN_FILE"] != ProgressTokenDir+"/token" {
					t.Errorf("%s: container %s reports progress to %q with %q", file, c.Name, env["TAU_PROGRESS_URL"], env["TAU_PROGRESS_TOKEN_FILE"])
				}
				checked++
			}
		}
		if checked == 0 {
			t.Errorf("%s: no training container was checked", file)
		}
	}
	// Without a progress URL, no token and no variable.
	objs, err := renderFile(pol, "tau.yaml", []byte("schema_version: 1\nentrypoint: train.py\nruntime: {image: python:3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range podTemplates(objs[0])[0].Spec.Volumes {
		if v.Name == progressTokenVolume {
			t.Error("a pod with nowhere to report its progress got a progress token")
		}
	}
}

// checkMounts: every container mounts only volumes its pod has (the API
// server refuses the pod, or KubeRay's submitter Job, otherwise).
func checkMounts(t *testing.T, what string, spec *corev1.PodSpec) {
	t.Helper()
	vols := map[string]bool{}
	for _, v := range spec.Volumes {
		vols[v.Name] = true
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, m := range c.VolumeMounts {
			if !vols[m.Name] {
				t.Errorf("%s: container %s mounts %q, which its pod does not have", what, c.Name, m.Name)
			}
		}
	}
}
