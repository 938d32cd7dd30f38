package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// platformCheckout is a git checkout whose policy/ directory holds
// examples/platform, committed; it returns the directory and the commit.
func platformCheckout(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "policy")
	if err := os.CopyFS(dir, os.DirFS("../../examples/platform")); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "policy")
	return dir, git("rev-parse", "HEAD")
}

// platformCluster holds the platform at commit and one queued run of
// team-a asking for eight GPUs.
func platformCluster(t *testing.T, commit string) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	pod := corev1.PodSpec{NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"},
		Containers: []corev1.Container{{Name: "main", Image: "nvcr.io/nvidia/pytorch:24.05-py3", Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(
		&taugridv1.TauPlatform{ObjectMeta: metav1.ObjectMeta{Name: "main"}, Status: taugridv1.TauPlatformStatus{Commit: commit}},
		&taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "team-a"},
			Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: "https://git.example.com/team-a/llm"}}},
		&taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "llm-7f3a", Namespace: "team-a"}, Spec: taugridv1.TauRunSpec{Repository: "llm"},
			Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseQueued, Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: "llm-7f3a-1", Workload: "job-llm-7f3a-1", Queue: "runs"}}},
		&taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "llm-0ld", Namespace: "team-a"}, Spec: taugridv1.TauRunSpec{Repository: "llm"},
			Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseSucceeded}},
		&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-llm-7f3a-1", Namespace: "team-a"}, Spec: kueue.WorkloadSpec{QueueName: "runs",
			PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: pod}}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}}},
	).Build()
}

func TestPlatformDiffPreviewsTheWorkingTreeOverThePolicyInForce(t *testing.T) {
	cases := map[string]struct {
		edit     func(t *testing.T, dir string)
		accept   bool
		base     string
		wantExit int
		want     []string
	}{
		"an unchanged checkout changes nothing": {
			edit: func(*testing.T, string) {},
			want: []string{"## Platform change: the policy in force (", "No effect on tenants' quotas, runs or nodes", "Unchanged: team-a (1 run), team-b (0 runs)."},
		},
		"a quota cut under a queued run's ask strands it and fails": {
			edit:     cutTeamAGPUs,
			wantExit: exitRunFailed,
			want: []string{"Strands 1 queued run (team-a 1)", "**Failing:**",
				"- llm-7f3a (llm, queued): would never start: ClusterQueue team-a: asks 8 nvidia.com/gpu, flavor h200 can give at most 4"},
		},
		"the platform team may accept stranding it": {
			edit:   cutTeamAGPUs,
			accept: true,
			want:   []string{"Accepted: strands 1 queued run (team-a 1)"},
		},
		"--base compares with a revision of the checkout": {
			edit: cutTeamAGPUs,
			base: "HEAD", wantExit: exitRunFailed,
			want: []string{"## Platform change: HEAD → the working tree"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir, commit := platformCheckout(t)
			tc.edit(t, dir)
			var out bytes.Buffer
			err := runPlatformDiff(context.Background(), &out, platformCluster(t, commit),
				&platformDiffOptions{Dir: dir, Base: tc.base, AcceptStranded: tc.accept})
			if got := exitCode(err); got != tc.wantExit {
				t.Errorf("exit %d (%v), want %d", got, err, tc.wantExit)
			}
			for _, s := range tc.want {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the preview lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestPlatformDiffSaysWhereTheWorkingTreeIsBroken(t *testing.T) {
	dir, commit := platformCheckout(t)
	if err := os.WriteFile(filepath.Join(dir, "profiles.yaml"), []byte("profiles:\n- name: cpu\n  max_gpus: lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runPlatformDiff(context.Background(), &bytes.Buffer{}, platformCluster(t, commit), &platformDiffOptions{Dir: dir})
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "the working tree does not load") || !strings.Contains(err.Error(), "profiles.yaml:3") {
		t.Errorf("err = %v (exit %d), want a usage error naming profiles.yaml:3", err, exitCode(err))
	}
}

func TestPlatformDiffNeedsTheCommitInForce(t *testing.T) {
	dir, _ := platformCheckout(t)
	err := runPlatformDiff(context.Background(), &bytes.Buffer{}, platformCluster(t, strings.Repeat("ab", 20)), &platformDiffOptions{Dir: dir})
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "fetch it first") {
		t.Errorf("err = %v, want one saying to fetch the commit in force", err)
	}
}

// cutTeamAGPUs gives team-a four GPUs and nothing to borrow.
func cutTeamAGPUs(t *testing.T, dir string) {
	t.Helper()
	f := filepath.Join(dir, "kueue", "cluster-queues.yaml")
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Replace(string(data), "nominalQuota: 8\n        borrowingLimit: 8", "nominalQuota: 4\n        borrowingLimit: 0", 1)
	if err := os.WriteFile(f, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
}
