package platform

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hookSecret is spec.webhook's Secret, named hook, in namespace ns.
func hookSecret(ns string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// hooked is the platform with spec.webhook naming the Secret hook.
func hooked() *taugridv1.TauPlatform {
	p := platform().Obj()
	p.Spec.Webhook = &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: "hook"}}
	return p
}

// TestThePlatformsWebhookPath: status.webhookPath is derived from
// spec.webhook's Secret in the controller's namespace, published even when
// git cannot be reached, never the path of a TauRepository of the same
// name; when the Secret goes, the path goes with one Warning, and polling
// goes on.
func TestThePlatformsWebhookPath(t *testing.T) {
	path := taugridv1.WebhookPathPrefix + gitsource.WebhookID("", platformName, []byte("s3cret"))
	for _, ns := range []string{"taugrid-system", "default", "team-a"} {
		if repo := taugridv1.WebhookPathPrefix + gitsource.WebhookID(ns, platformName, []byte("s3cret")); repo == path {
			t.Fatalf("TauRepository %s/%s with the same token would share the platform's path %s", ns, platformName, path)
		}
	}

	t.Run("published from the Secret, then cleared with one Warning when it goes", func(t *testing.T) {
		secret := hookSecret("taugrid-system", map[string]string{gitsource.SecretToken: "s3cret"})
		w := newWorld(t, nil, hooked(), secret)
		w.git.push(sha("a1"), exampleTree(t, nil))
		w.mustReconcile(t)
		if got := w.platform(t).Status.WebhookPath; got != path {
			t.Fatalf("webhookPath = %q, want %q", got, path)
		}
		if evs := w.drain(); containsReason(evs, ReasonMissingSecret) {
			t.Errorf("a MissingSecret event with the Secret there: %q", evs)
		}

		if err := w.c.Delete(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		w.mustReconcile(t)
		p := w.platform(t)
		if p.Status.WebhookPath != "" {
			t.Errorf("webhookPath = %q after the Secret went, want none", p.Status.WebhookPath)
		}
		want := []string{"Warning MissingSecret spec.webhook.secretRef: Secret taugrid-system/hook does not exist: webhook deliveries are refused until it does; polling goes on"}
		if diff := cmp.Diff(want, missingSecretEvents(w.drain())); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if p.Status.Commit != sha("a1") {
			t.Errorf("commit %q: the policy in force went with the webhook's Secret", p.Status.Commit)
		}
		w.mustReconcile(t)
		if evs := missingSecretEvents(w.drain()); len(evs) != 0 {
			t.Errorf("a second poll without the Secret warned again: %q", evs)
		}
	})

	t.Run("published while git cannot be reached", func(t *testing.T) {
		w := newWorld(t, nil, hooked(), hookSecret("taugrid-system", map[string]string{gitsource.SecretToken: "s3cret"}))
		w.git.listErr = &gitsource.Error{Op: "ls-remote", URL: platformURL, Kind: gitsource.ErrUnreachable}
		if _, err := w.reconcile(t); err == nil {
			t.Fatal("no error with git unreachable")
		}
		if got := w.platform(t).Status.WebhookPath; got != path {
			t.Errorf("webhookPath = %q with git unreachable, want %q", got, path)
		}
	})

	cases := map[string]struct {
		secret *corev1.Secret
		want   string
	}{
		"the Secret has no token": {
			secret: hookSecret("taugrid-system", map[string]string{"other": "x"}),
			want:   `Warning MissingSecret spec.webhook.secretRef: Secret taugrid-system/hook has no key "token": webhook deliveries are refused until it does; polling goes on`},
		"the Secret is in another namespace than the controller's": {
			secret: hookSecret("default", map[string]string{gitsource.SecretToken: "s3cret"}),
			want:   "Warning MissingSecret spec.webhook.secretRef: Secret taugrid-system/hook does not exist: webhook deliveries are refused until it does; polling goes on"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, nil, hooked(), tc.secret)
			w.git.push(sha("a1"), exampleTree(t, nil))
			w.mustReconcile(t)
			p := w.platform(t)
			if p.Status.WebhookPath != "" {
				t.Errorf("webhookPath = %q, want none", p.Status.WebhookPath)
			}
			if diff := cmp.Diff([]string{tc.want}, missingSecretEvents(w.drain())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if p.Status.Commit != sha("a1") {
				t.Errorf("commit %q: polling stopped for want of the webhook's Secret", p.Status.Commit)
			}
		})
	}

	t.Run("no webhook: a path published before is cleared, silently", func(t *testing.T) {
		p := platform().Obj()
		p.Status.WebhookPath = path
		w := newWorld(t, nil, p)
		w.git.push(sha("a1"), exampleTree(t, nil))
		w.mustReconcile(t)
		if got := w.platform(t).Status.WebhookPath; got != "" {
			t.Errorf("webhookPath = %q without spec.webhook, want none", got)
		}
		if evs := missingSecretEvents(w.drain()); len(evs) != 0 {
			t.Errorf("events without spec.webhook: %q", evs)
		}
	})
}

// missingSecretEvents are the MissingSecret events among evs.
func missingSecretEvents(evs []string) []string {
	var out []string
	for _, e := range evs {
		if containsReason([]string{e}, ReasonMissingSecret) {
			out = append(out, e)
		}
	}
	return out
}

func containsReason(evs []string, reason string) bool {
	for _, r := range reasons(evs) {
		if r == "Warning "+reason {
			return true
		}
	}
	return false
}
