package repository

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestTheWebhookPath: status.webhookPath is derived from the webhook
// Secret's token; without it the path goes, with one Warning, and polling
// goes on.
func TestTheWebhookPath(t *testing.T) {
	earlier := sharedtest.Now.Add(-time.Minute)
	path := taugridv1.WebhookPathPrefix + gitsource.WebhookID(ns, "research", []byte("s3cret"))
	missing := "Warning MissingSecret spec.webhook.secretRef: Secret team-a/hook does not exist: webhook deliveries are refused until it does; polling goes on"
	cases := map[string]struct {
		repo    *taugridv1.TauRepository
		objs    []client.Object
		faults  *interceptor.Funcs
		wantErr bool
		path    string
		events  []string
	}{
		"no webhook: a path published before is cleared": {
			repo: research().WebhookPath("/hooks/old").Polled(earlier, 1).Obj()},
		"a Secret with a token: its path is published": {
			repo: research().WebhookSecret("hook").Obj(), objs: []client.Object{secret("hook", map[string]string{gitsource.SecretToken: "s3cret"})},
			path: path},
		"the Secret is missing at the first poll: one Warning": {
			repo: research().WebhookSecret("hook").Obj(), events: []string{missing}},
		"the Secret went: the path goes, with a Warning": {
			repo: research().WebhookSecret("hook").WebhookPath(path).Polled(earlier, 1).Obj(), events: []string{missing}},
		"the Secret is still missing: no second Warning": {
			repo: research().WebhookSecret("hook").Polled(earlier, 1).Obj()},
		"the Secret has no token": {
			repo: research().WebhookSecret("hook").Obj(), objs: []client.Object{secret("hook", map[string]string{"other": "x"})},
			events: []string{`Warning MissingSecret spec.webhook.secretRef: Secret team-a/hook has no key "token": webhook deliveries are refused until it does; polling goes on`}},
		"the Secret cannot be read now: retried with backoff, the path kept": {
			repo: research().WebhookSecret("hook").WebhookPath(path).Polled(earlier, 1).Obj(), objs: []client.Object{secret("hook", nil)},
			faults: secretsUnreadable, wantErr: true, path: path},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepoWorld(t, tc.faults, append([]client.Object{tc.repo}, tc.objs...)...)
			_, err := w.reconcile(t)
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile error = %v, want one: %v", err, tc.wantErr)
			}
			got := w.repo(t)
			if got.Status.WebhookPath != tc.path {
				t.Errorf("webhookPath = %q, want %q", got.Status.WebhookPath, tc.path)
			}
			if diff := cmp.Diff(tc.events, w.drain()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if polled := w.git.polls > 0; polled == tc.wantErr {
				t.Errorf("polled = %v; a webhook problem must not stop the poll, an unreadable Secret must", polled)
			}
		})
	}
}
