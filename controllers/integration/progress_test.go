package integration

import (
	"context"
	"net/http"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func postWithToken(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	resp, b := requestWithToken(t, http.MethodPost, url, token, body)
	return resp.StatusCode, string(b)
}

// A run's training container reports its progress to the URL its
// environment names, with the pod-bound token its volume holds, as the
// API server vouches for it; the run records it. That token fetches no
// source, and nothing but that pod's own token reports for the run: not
// the source token, not team b's pod claiming the run's labels, not
// another run's pod, not a token bound to no pod.
func TestARunsPodReportsItsProgressWithItsOwnTokenOnly(t *testing.T) {
	f := newSourceFixture(t, "pg1")
	env := map[string]string{}
	for _, e := range f.pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	url := env["TAU_PROGRESS_URL"]
	if want := f.srv.URL + "/progress/" + f.ns + "/" + f.run.Name; url != want || env["TAU_PROGRESS_TOKEN_FILE"] != render.ProgressTokenDir+"/token" {
		t.Fatalf("the training container reports to %q with %q; want %s", url, env["TAU_PROGRESS_TOKEN_FILE"], want)
	}
	sa := f.pod.Spec.ServiceAccountName
	teamB := f.ns[:len(f.ns)-2] + "-b"
	bPod := podFrom(t, teamB, f.pod.Name, corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: f.pod.Labels}, Spec: f.pod.Spec})
	other := podFrom(t, f.ns, "someone-else", corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{render.LabelRun: "another-run", render.LabelAttempt: "1"}}, Spec: f.pod.Spec})
	for name, token := range map[string]string{
		"the init container's source token":  initToken(t, f.pod),
		"team b's pod with the run's labels": projectedToken(t, bPod, render.ProgressTokenAudience),
		"another run's pod":                  projectedToken(t, other, render.ProgressTokenAudience),
		"the pod's token for the API":        podToken(t, f.ns, sa, f.pod, "https://kubernetes.default.svc"),
		"the right audience, but no pod":     podToken(t, f.ns, sa, nil, render.ProgressTokenAudience),
	} {
		if code, body := postWithToken(t, url, token, "0.9"); code != http.StatusForbidden {
			t.Errorf("%s: %d %q, want 403", name, code, body)
		}
	}
	ctx := context.Background()
	run := &taugridv1.TauRun{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f.run), run); err != nil || run.Status.Progress != nil {
		t.Fatalf("refused reports recorded %+v (%v)", run.Status.Progress, err)
	}

	token := projectedToken(t, f.pod, render.ProgressTokenAudience)
	if code, body := postWithToken(t, url, token, "0.42"); code != http.StatusOK {
		t.Fatalf("the run's own pod: %d %q, want 200", code, body)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f.run), run); err != nil {
		t.Fatal(err)
	}
	if p := run.Status.Progress; p == nil || p.Percent != 42 || p.Attempt != 1 || p.Time.IsZero() {
		t.Errorf("the run records %+v, want 42%% of attempt 1", p)
	}
	if resp, body := getWithToken(t, f.url, token); resp.StatusCode != http.StatusForbidden || len(body) > 100 {
		t.Errorf("the progress token fetched the source: %s, %d bytes; want 403", resp.Status, len(body))
	}
}
