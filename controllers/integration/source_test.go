package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sourceFixture is one queued run of team a with a source archive, the
// source server, and the pod its Job would start, as the Job controller
// would create it from the rendered template.
type sourceFixture struct {
	*runFixture
	srv    *httptest.Server
	run    *taugridv1.TauRun
	digest string
	url    string // the init container's --url
	pod    *corev1.Pod
}

func newSourceFixture(t *testing.T, prefix string) *sourceFixture {
	t.Helper()
	f := newRunFixture(t, prefix)
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	sources := &server.Sources{Client: k8s, Git: gitClient, BaseURL: srv.URL, FetchImage: "ghcr.io/taugrid/tau:v0.1.0",
		Reviewer: server.KubeTokenReviewer{Client: k8s}, APIReader: k8s}
	// As tau-controller serves them: the archives, and beside them the
	// attempts' progress reports.
	mux := http.NewServeMux()
	mux.Handle(server.SourcePathPrefix, sources)
	mux.Handle(server.ProgressPathPrefix, &server.Progress{Client: k8s, Reviewer: server.KubeTokenReviewer{Client: k8s}, Clock: clock.RealClock{}})
	srv.Config.Handler = mux
	f.runRec.Sources = sources

	f.research.tag("run/with-source")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/with-source")
	queued := f.reconcileRun(t, run.Name, taugridv1.PhaseQueued)
	if len(queued.Status.SourceDigest) != 64 {
		t.Fatalf("run status has no source digest: %+v", queued.Status)
	}
	job := f.jobs(t)[0]
	init := job.Spec.Template.Spec.InitContainers[0]
	url := strings.TrimPrefix(init.Command[2], "--url=")
	pod := podFrom(t, f.ns, job.Name+"-x1", job.Spec.Template)
	return &sourceFixture{runFixture: f, srv: srv, run: queued, digest: queued.Status.SourceDigest, url: url, pod: pod}
}

// podFrom creates a pod from a template, with its ServiceAccount.
func podFrom(t *testing.T, ns, name string, tpl corev1.PodTemplateSpec) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	sa := tpl.Spec.ServiceAccountName
	if sa == "" {
		sa, tpl.Spec.ServiceAccountName = "default", "default"
	}
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
	pod.Name, pod.Namespace = name, ns
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// podToken is what the kubelet projects into the pod's volume: a token of
// the pod's ServiceAccount for audience, bound to the pod (nil: unbound).
func podToken(t *testing.T, ns, sa string, pod *corev1.Pod, audience string) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To(int64(600))}}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}
	if err := k8s.SubResource("token").Create(context.Background(), acct, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// initToken is the token the init container's projected volume holds.
func initToken(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	return projectedToken(t, pod, render.SourceTokenAudience)
}

// projectedToken is the token pod's projected volume for audience holds.
func projectedToken(t *testing.T, pod *corev1.Pod, audience string) string {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if p := v.Projected; p != nil && len(p.Sources) == 1 && p.Sources[0].ServiceAccountToken != nil && p.Sources[0].ServiceAccountToken.Audience == audience {
			return podToken(t, pod.Namespace, pod.Spec.ServiceAccountName, pod, audience)
		}
	}
	t.Fatalf("pod %s projects no ServiceAccount token for %s", pod.Name, audience)
	return ""
}

// fetched is what a GET answered: its status, the body read and closed.
type fetched struct {
	StatusCode int
	Status     string
}

func getWithToken(t *testing.T, url, token string) (fetched, []byte) {
	t.Helper()
	return requestWithToken(t, http.MethodGet, url, token, "")
}

// requestWithToken sends body with method to url, with token as the bearer
// ("": none).
func requestWithToken(t *testing.T, method, url, token, body string) (fetched, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return fetched{StatusCode: resp.StatusCode, Status: resp.Status}, got
}

// TestSourceArchivesAreServedOnlyToTheirRunsInitContainer: the rendered
// init container mounts a pod-bound token for the source audience, and
// with it gets exactly the archive its status names.
func TestSourceArchivesAreServedOnlyToTheirRunsInitContainer(t *testing.T) {
	f := newSourceFixture(t, "rt9")
	spec := f.pod.Spec
	init := spec.InitContainers[0]
	if !slices.Contains(init.Command, "--token-file="+render.SourceTokenDir+"/token") {
		t.Errorf("init container command %q has no --token-file", init.Command)
	}
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == render.SourceTokenDir {
				t.Errorf("container %s mounts the source token; only the init container may", c.Name)
			}
		}
	}
	token := initToken(t, f.pod)
	resp, body := getWithToken(t, f.url, token)
	sum := sha256.Sum256(body)
	if resp.StatusCode != http.StatusOK || hex.EncodeToString(sum[:]) != f.digest {
		t.Fatalf("GET %s with the init container's token: %s, %d bytes with sha256 %x; want 200 and %s", f.url, resp.Status, len(body), sum, f.digest)
	}
	for name, path := range map[string]string{
		"another digest":   "/source/" + f.ns + "/" + f.run.Name + "/" + strings.Repeat("a", 64) + ".tar.gz",
		"no such run":      "/source/" + f.ns + "/nobody/" + f.digest + ".tar.gz",
		"another tenant":   "/source/rt1-a/" + f.run.Name + "/" + f.digest + ".tar.gz",
		"a path traversal": "/source/" + f.ns + "/../../etc/passwd",
	} {
		resp, body := getWithToken(t, f.srv.URL+path, token)
		if resp.StatusCode == http.StatusOK || len(body) > 100 {
			t.Errorf("%s: GET %s = %s with %d bytes, want a refusal without data", name, path, resp.Status, len(body))
		}
	}
}

// TestSourceArchivesRefuseEveryOtherCredential is the attacker's side:
// team b, its pods, tokens of the wrong audience or of no pod, pods of
// another run, and the run's own pod once the run is final, get nothing.
func TestSourceArchivesRefuseEveryOtherCredential(t *testing.T) {
	f := newSourceFixture(t, "sa10")
	ctx := context.Background()
	sa := f.pod.Spec.ServiceAccountName
	// Team b's pod claims to be team a's run: same labels, its own namespace.
	teamB := f.ns[:len(f.ns)-2] + "-b"
	bPod := podFrom(t, teamB, f.pod.Name, corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: f.pod.Labels}, Spec: f.pod.Spec})
	// A pod of team a that is not of this run.
	other := podFrom(t, f.ns, "someone-else", corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{render.LabelRun: "another-run", render.LabelAttempt: "1"}}, Spec: f.pod.Spec})
	// A pod of this run's next attempt, before the run started it.
	nextLabels := map[string]string{render.LabelRun: f.run.Name, render.LabelAttempt: "2"}
	next := podFrom(t, f.ns, "next-attempt", corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: nextLabels}, Spec: f.pod.Spec})

	for name, token := range map[string]string{
		"no token":                        "",
		"a token that is no token":        "not-a-token",
		"team b's init container token":   initToken(t, bPod),
		"the pod's token for the API":     podToken(t, f.ns, sa, f.pod, "https://kubernetes.default.svc"),
		"another audience":                podToken(t, f.ns, sa, f.pod, "taugrid.dev/other"),
		"the right audience, but no pod":  podToken(t, f.ns, sa, nil, render.SourceTokenAudience),
		"another pod of team a":           initToken(t, other),
		"a pod of an attempt not started": initToken(t, next),
	} {
		resp, body := getWithToken(t, f.url, token)
		want := http.StatusForbidden
		if token == "" {
			want = http.StatusUnauthorized
		}
		if resp.StatusCode != want || strings.Contains(string(body), "\x1f\x8b") || len(body) > 100 {
			t.Errorf("%s: GET %s = %s with %d bytes, want %d and no data", name, f.url, resp.Status, len(body), want)
		}
	}

	// Once the run is final, even its own init container gets nothing, and
	// nothing is rebuilt.
	token := initToken(t, f.pod)
	if resp, _ := getWithToken(t, f.url, token); resp.StatusCode != http.StatusOK {
		t.Fatalf("the run's own init container: %s, want 200", resp.Status)
	}
	base := f.run.DeepCopy()
	f.run.Status.Phase = taugridv1.PhaseCancelled
	if err := k8s.Status().Patch(ctx, f.run, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if resp, body := getWithToken(t, f.url, token); resp.StatusCode != http.StatusForbidden || len(body) > 100 {
		t.Errorf("a cancelled run's archive: %s with %d bytes, want 403 and no data", resp.Status, len(body))
	}
}
