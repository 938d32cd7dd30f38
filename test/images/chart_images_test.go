// Package images runs the chart's own images: the controller container
// exactly as the chart's Deployment renders it, against the real API
// server, Kueue and a git server; the tau image as the run pods' init
// container; the node agent as the DaemonSet renders it.
package images

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
	"github.com/taugrid/taugrid/test/chart"
	"github.com/taugrid/taugrid/test/controlplane"
)

const root = "../.."

// built are the three images for this machine, loaded into p under the
// chart's repositories with tag.
func buildAndLoad(t *testing.T, p *podman, tag string) {
	t.Helper()
	src, err := imagebuild.ReadSource(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	out := emptyDir(t) // lowercase: podman names the image after the path
	o := imagebuild.Options{Source: src, Registry: "ghcr.io/taugrid", Tag: tag, Images: imagebuild.Specs,
		Platforms: []imagebuild.Platform{{OS: "linux", Arch: runtime.GOARCH}}, Out: out, Work: imagebuild.WorkDir(out)}
	start := time.Now()
	built, err := imagebuild.Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err := imagebuild.Write(context.Background(), o, built, key); err != nil {
		t.Fatal(err)
	}
	for _, b := range built {
		p.load(imagebuild.LayoutDir(out, b.Spec.Name), tag, b.Ref)
		t.Logf("%s: %s, %d bytes compressed", b.Ref, b.Digest, b.Platforms[0].Size)
	}
	t.Logf("built and loaded the images in %s", time.Since(start).Round(time.Second))
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := controlplane.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// fromUnstructured converts a rendered object.
func fromUnstructured[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatal("the chart rendered no such object")
	}
	out := new(T)
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// apply creates the rendered objects of kinds, as helm install does.
func apply(t *testing.T, c client.Client, r *chart.Rendered, kinds ...string) {
	t.Helper()
	for _, u := range r.Kinds(kinds...) {
		if err := c.Create(context.Background(), u.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// serviceAccountDir is what the kubelet mounts at
// /var/run/secrets/kubernetes.io/serviceaccount: a token of sa, the API
// server's CA and the namespace. With audiences, it is a projected
// token's volume: a token of sa for them.
func serviceAccountDir(t *testing.T, env *controlplane.Env, ns, sa string, audiences ...string) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)), Audiences: audiences}}
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}
	if err := env.Client.SubResource("token").Create(context.Background(), acct, tr); err != nil {
		t.Fatal(err)
	}
	return tokenDir(t, env, ns, tr.Status.Token)
}

// tokenDir is a ServiceAccount volume holding token.
func tokenDir(t *testing.T, env *controlplane.Env, ns, token string) string {
	t.Helper()
	dir := emptyDir(t)
	for name, body := range map[string][]byte{"token": []byte(token), "ca.crt": env.Config.CAData, "namespace": []byte(ns)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// inCluster is the env the kubelet gives every container: where the API
// server is.
func inCluster(t *testing.T, env *controlplane.Env) []string {
	t.Helper()
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port()}
}

// waitFor polls cond every 200 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not after %s (%s)", what, timeout, last)
}

func httpOK(u string) (bool, string) {
	resp, err := http.Get(u)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// logsOnFailure prints a container's log when the test fails.
func logsOnFailure(t *testing.T, p *podman, name string) {
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := p.run("logs", "--tail", "60", name)
			t.Logf("%s log:\n%s", name, out)
		}
	})
}

// deployment is the rendered controller Deployment's pod.
func deployment(t *testing.T, r *chart.Rendered) (corev1.Container, *corev1.PodSecurityContext) {
	t.Helper()
	d := fromUnstructured[appsv1.Deployment](t, r.Find("Deployment", "tau-controller"))
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", n)
	}
	return d.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.SecurityContext
}

func nsObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func values(tag, gitURL string, ports []int) map[string]any {
	img := map[string]any{"tag": tag}
	return map[string]any{
		"controller": map[string]any{"image": img, "replicas": 1},
		"fetchImage": img,
		"nodeAgent":  map[string]any{"image": img, "extraArgs": []any{fmt.Sprintf("--metrics-addr=127.0.0.1:%d", ports[5])}},
		"ports":      map[string]any{"metrics": ports[0], "health": ports[1], "source": ports[2], "webhook": ports[3], "api": ports[4]},
		"platform":   map[string]any{"create": true, "url": gitURL + "/platform.git", "ref": "main"},
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

func conditions(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s=%s %s: %s; ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
