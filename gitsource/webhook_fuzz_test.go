package gitsource

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzWebhookDeliveriesToAnyReceiver sends arbitrary deliveries to any
// receiver ID of any forge: any path, headers and body. Whatever arrives, it answers with a status it
// documents, never panics, never nudges without a valid signature and
// never echoes the repository's credentials or the webhook secret.
func FuzzWebhookDeliveriesToAnyReceiver(f *testing.F) {
	f.Add("gh", "push", "sha256="+sign(githubPush), githubPush)
	f.Add("gh", "create", "sha256="+sign(`{"ref":"run/x","ref_type":"tag"}`), `{"ref":"run/x","ref_type":"tag"}`)
	f.Add("gh", "push", "sha256=00", githubPush)
	f.Add("gt", "push", sign(giteaPush), giteaPush)
	f.Add("gl", "Tag Push Hook", hookSecret, gitlabPush)
	f.Add("nosecret", "push", "", `{"ref":`)
	f.Add("unknown", "push", "", strings.Repeat("{", 1000))
	f.Add("../../etc", "", "sha256=", "\x00\xff")
	f.Fuzz(func(t *testing.T, id, event, signature, body string) {
		h, n, logs, _ := newHookFixture(t)
		req := httptest.NewRequest(http.MethodPost, "/hooks/x", strings.NewReader(body))
		req.URL.Path = "/hooks/" + id
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-Gitea-Event", event)
		req.Header.Set("X-Gitlab-Event", event)
		req.Header.Set("X-GitHub-Delivery", "d-"+id)
		req.Header.Set("X-Hub-Signature-256", signature)
		req.Header.Set("X-Gitea-Signature", signature)
		req.Header.Set("X-Gitlab-Token", signature)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound,
			http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable, http.StatusInternalServerError:
		default:
			t.Fatalf("status %d for id %q event %q", rec.Code, id, event)
		}
		signed := signature == "sha256="+sign(body) || signature == sign(body) || signature == hookSecret
		if len(n.got()) > 0 && !signed && id != "nosecret" {
			t.Fatalf("an unsigned delivery to %q nudged %v", id, n.got())
		}
		for _, secret := range []string{"repo-token-secret", hookSecret} {
			sent := strings.Contains(id+event+signature+body, secret)
			if strings.Contains(rec.Body.String()+logs.String(), secret) && !sent {
				t.Fatalf("%q leaked: %q / %q", secret, rec.Body.String(), logs.String())
			}
		}
	})
}
