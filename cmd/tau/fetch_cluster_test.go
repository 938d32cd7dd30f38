package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cachedArchive is the controller's archive cache holding one archive.
type cachedArchive struct {
	policy.Git
	path string
}

func (c cachedArchive) OpenArchive(string) (*os.File, error) { return os.Open(c.path) }

// TestFetchSourceWithTheInitContainersTokenEndToEnd: the init container's
// command, with the pod-bound token the kubelet projects for the source
// audience, fetches and unpacks its run's archive from the controller's
// source server, which asks the real API server who the token is; without
// the token it gets nothing.
func TestFetchSourceWithTheInitContainersTokenEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real API server; run without -short")
	}
	env := controlplane.ForTest(t, controlplane.Options{CRDDirectoryPaths: []string{"../../api/crds"}})
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body, sum := archive(t, entry{name: "train.py", body: "print('team a')\n"})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "archive.tar.gz"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "research-1a2b", Namespace: "team-a"},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: strings.Repeat("c", 40), Target: "default",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunTag, Ref: "refs/tags/run/x"}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: "team-a"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "research-1a2b-1-abcde", Namespace: "team-a",
		Labels: map[string]string{render.LabelRun: run.Name, render.LabelAttempt: "1"}},
		Spec: corev1.PodSpec{ServiceAccountName: "runner", Containers: []corev1.Container{{Name: "main", Image: "python:3.12"}}}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, sa, run, pod} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	run.Status = taugridv1.TauRunStatus{Phase: taugridv1.PhaseAdmitted, SourceDigest: sum,
		Attempts: []taugridv1.Attempt{{Number: 1, Workload: run.Name + "-1"}}}
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{render.SourceTokenAudience},
		ExpirationSeconds: ptr.To(int64(600)), BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&server.Sources{Client: c, Git: cachedArchive{path: filepath.Join(dir, "archive.tar.gz")},
		Reviewer: server.KubeTokenReviewer{Client: c}, APIReader: c})
	defer srv.Close()
	url := srv.URL + server.SourcePathPrefix + "team-a/" + run.Name + "/" + sum + ".tar.gz"

	dest := filepath.Join(dir, "source")
	out, _, err := tau(t, "fetch-source", "--url="+url, "--sha256="+sum, "--dest="+dest, "--token-file="+tokenFile)
	if err != nil || !strings.Contains(out, "unpacked 1 entries") {
		t.Fatalf("fetch-source with the init container's token: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "train.py")); string(got) != "print('team a')\n" {
		t.Errorf("train.py = %q", got)
	}
	empty := filepath.Join(dir, "nothing")
	if _, _, err := tau(t, "fetch-source", "--url="+url, "--sha256="+sum, "--dest="+empty); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("fetch-source without a token: %v, want 401", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "train.py")); err == nil {
		t.Error("fetch-source without a token unpacked the archive")
	}
	if strings.Contains(out, tr.Status.Token) {
		t.Error("fetch-source printed its token")
	}
}
