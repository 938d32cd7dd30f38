package gitsource

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

const hookSecret = "hook-s3cret-value"

type receivers map[string]Receiver

func (rs receivers) Receiver(_ context.Context, id string) (Receiver, error) {
	r, ok := rs[id]
	if !ok {
		return Receiver{}, ErrNotFound
	}
	return r, nil
}

type nudges struct {
	mu   sync.Mutex
	urls []string
	fail error
}

func (n *nudges) Nudge(_ context.Context, rcv Receiver) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail != nil {
		return n.fail
	}
	n.urls = append(n.urls, rcv.RepoURL)
	return nil
}

func (n *nudges) got() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.urls...)
}

const (
	githubPush = `{"ref":"refs/tags/run/x","before":"0000000000000000000000000000000000000000","after":"1111111111111111111111111111111111111111","repository":{"clone_url":"https://github.com/org/app.git"}}`
	gitlabPush = `{"object_kind":"tag_push","ref":"refs/tags/run/x","before":"0000000000000000000000000000000000000000","after":"1111111111111111111111111111111111111111","project":{"git_http_url":"https://gitlab.com/org/app.git"}}`
	giteaPush  = `{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111","after":"2222222222222222222222222222222222222222","repository":{"clone_url":"https://gitea.example.com/org/app.git"}}`
)

func sign(body string) string {
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(body))
	return hex.EncodeToString(mac.Sum(nil))
}

// hookRequest is one webhook request.
type hookRequest struct {
	method, id, body string
	header           map[string]string
}

func githubDelivery(event, body, deliveryID string) hookRequest {
	return hookRequest{id: "gh", body: body, header: map[string]string{
		"X-GitHub-Event": event, "X-GitHub-Delivery": deliveryID, "X-Hub-Signature-256": "sha256=" + sign(body)}}
}

func newHookFixture(t *testing.T) (*WebhookHandler, *nudges, *bytes.Buffer, *clocktesting.FakeClock) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs.WriteString(prefix + args + "\n")
	}, funcr.Options{})
	n := &nudges{}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rs := receivers{
		"gh":       {Forge: ForgeGitHub, RepoURL: "https://x-token:repo-token-secret@github.com/org/app.git", Secret: []byte(hookSecret)},
		"gl":       {Forge: ForgeGitLab, RepoURL: "https://gitlab.com/org/app.git", Secret: []byte(hookSecret)},
		"gt":       {Forge: ForgeGitea, RepoURL: "https://gitea.example.com/org/app.git", Secret: []byte(hookSecret)},
		"nosecret": {Forge: ForgeGitHub, RepoURL: "https://github.com/org/open.git"},
	}
	h := NewWebhookHandler(rs, n, WebhookOptions{Clock: clk, Log: log, Deliveries: 3, DeliveryTTL: time.Hour})
	return h, n, &logs, clk
}

func send(h http.Handler, d hookRequest) *httptest.ResponseRecorder {
	method := d.method
	if method == "" {
		method = http.MethodPost
	}
	req := httptest.NewRequest(method, "/hooks/"+d.id, strings.NewReader(d.body))
	for k, v := range d.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestWebhookHandler(t *testing.T) {
	tests := map[string]struct {
		d          hookRequest
		wantStatus int
		wantNudge  bool
	}{
		"a signed GitHub tag push nudges": {
			d: githubDelivery("push", githubPush, "d-1"), wantStatus: 202, wantNudge: true,
		},
		"a signed GitHub create event nudges": {
			d: githubDelivery("create", `{"ref":"run/x","ref_type":"tag"}`, "d-2"), wantStatus: 202, wantNudge: true,
		},
		"a GitHub ping is answered and ignored": {
			d: githubDelivery("ping", `{"zen":"hi"}`, "d-3"), wantStatus: 200,
		},
		"a GitLab tag push with the right token nudges": {
			d: hookRequest{id: "gl", body: gitlabPush, header: map[string]string{
				"X-Gitlab-Event": "Tag Push Hook", "X-Gitlab-Token": hookSecret, "X-Gitlab-Event-UUID": "u-1"}},
			wantStatus: 202, wantNudge: true,
		},
		"a Gitea push with its signature nudges": {
			d: hookRequest{id: "gt", body: giteaPush, header: map[string]string{
				"X-Gitea-Event": "push", "X-Gitea-Signature": sign(giteaPush), "X-Gitea-Delivery": "g-1"}},
			wantStatus: 202, wantNudge: true,
		},
		"a Forgejo push with its own headers nudges": {
			d: hookRequest{id: "gt", body: giteaPush, header: map[string]string{
				"X-Forgejo-Event": "push", "X-Forgejo-Signature": sign(giteaPush), "X-Forgejo-Delivery": "f-1"}},
			wantStatus: 202, wantNudge: true,
		},
		"an unsigned GitHub push is refused": {
			d: hookRequest{id: "gh", body: githubPush, header: map[string]string{"X-GitHub-Event": "push"}}, wantStatus: 401,
		},
		"a GitHub push signed with another secret is refused": {
			d: hookRequest{id: "gh", body: githubPush, header: map[string]string{"X-GitHub-Event": "push",
				"X-Hub-Signature-256": "sha256=" + strings.Repeat("ab", 32)}},
			wantStatus: 401,
		},
		"a signature over another body is refused": {
			d: hookRequest{id: "gh", body: githubPush, header: map[string]string{"X-GitHub-Event": "push",
				"X-Hub-Signature-256": "sha256=" + sign(githubPush+" ")}},
			wantStatus: 401,
		},
		"a GitLab token that is wrong is refused": {
			d: hookRequest{id: "gl", body: gitlabPush, header: map[string]string{
				"X-Gitlab-Event": "Tag Push Hook", "X-Gitlab-Token": hookSecret + "x"}},
			wantStatus: 401,
		},
		"a GitLab request without a token is refused": {
			d: hookRequest{id: "gl", body: gitlabPush, header: map[string]string{"X-Gitlab-Event": "Tag Push Hook"}}, wantStatus: 401,
		},
		"a Gitea signature that is not hex is refused": {
			d:          hookRequest{id: "gt", body: giteaPush, header: map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": "zz"}},
			wantStatus: 401,
		},
		"a receiver without a secret refuses everything": {
			d: hookRequest{id: "nosecret", body: githubPush, header: map[string]string{"X-GitHub-Event": "push",
				"X-Hub-Signature-256": "sha256=" + sign(githubPush)}},
			wantStatus: 401,
		},
		"an unknown receiver is not found, signed or not": {
			d: githubDelivery("push", githubPush, "d-4"), wantStatus: 404,
		},
		"a GET is not allowed": {
			d: hookRequest{method: http.MethodGet, id: "gh"}, wantStatus: 405,
		},
		"a signed body that is not JSON is a bad request": {
			d: githubDelivery("push", `{"ref": "refs/tags/x"`, "d-5"), wantStatus: 400,
		},
		"a signed push with a ref that is not a ref": {
			d: githubDelivery("push", `{"ref":"../../etc","after":"1111111111111111111111111111111111111111"}`, "d-6"), wantStatus: 400,
		},
		"a signed push with a SHA that is not one": {
			d: githubDelivery("push", `{"ref":"refs/heads/main","after":"1111; rm -rf /"}`, "d-7"), wantStatus: 400,
		},
		"a body over 3 MiB is refused before anything else": {
			d: githubDelivery("push", `{"ref":"refs/heads/main","x":"`+strings.Repeat("a", MaxWebhookBody)+`"}`, "d-8"), wantStatus: 413,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, n, logs, _ := newHookFixture(t)
			if name == "an unknown receiver is not found, signed or not" {
				tc.d.id = "no-such-receiver"
			}
			rec := send(h, tc.d)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if got := len(n.got()) == 1; got != tc.wantNudge {
				t.Errorf("nudged %v, want %v", n.got(), tc.wantNudge)
			}
			for _, out := range []string{rec.Body.String(), logs.String()} {
				for _, secret := range []string{hookSecret, "repo-token-secret"} {
					if strings.Contains(out, secret) {
						t.Errorf("a secret leaked: %q", out)
					}
				}
			}
		})
	}
}

func TestWebhookNudgesTheReceiversRepositoryNotThePayloads(t *testing.T) {
	h, n, _, _ := newHookFixture(t)
	body := strings.Replace(githubPush, "org/app", "evil/other", 1)
	if rec := send(h, githubDelivery("push", body, "d-1")); rec.Code != 202 {
		t.Fatal(rec.Code)
	}
	if diff := cmp.Diff([]string{"https://x-token:repo-token-secret@github.com/org/app.git"}, n.got()); diff != "" {
		t.Errorf("nudges (-want +got):\n%s", diff)
	}
}

func TestWebhookRedeliveriesNudgeOnce(t *testing.T) {
	h, n, _, clk := newHookFixture(t)
	d := githubDelivery("push", githubPush, "same-id")
	for i, want := range []int{202, 200, 200} {
		if rec := send(h, d); rec.Code != want {
			t.Fatalf("delivery %d: status %d, want %d", i, rec.Code, want)
		}
	}
	if len(n.got()) != 1 {
		t.Errorf("nudges = %v, want one", n.got())
	}
	clk.Step(2 * time.Hour)
	if rec := send(h, d); rec.Code != 202 {
		t.Errorf("after the TTL: status %d, want 202", rec.Code)
	}
	t.Run("memory stays bounded", func(t *testing.T) {
		for i := range 100 {
			send(h, githubDelivery("push", githubPush, fmt.Sprint("id-", i)))
		}
		if got := h.deliveries.len(); got > 3 {
			t.Errorf("%d deliveries remembered, want at most 3", got)
		}
	})
	t.Run("deliveries without an ID are never deduplicated", func(t *testing.T) {
		before := len(n.got())
		send(h, githubDelivery("push", githubPush, ""))
		send(h, githubDelivery("push", githubPush, ""))
		if got := len(n.got()) - before; got != 2 {
			t.Errorf("%d nudges, want 2", got)
		}
	})
}

func TestWebhookNudgeFailureIsRetriable(t *testing.T) {
	h, n, logs, _ := newHookFixture(t)
	n.fail = errors.New("apiserver unavailable")
	d := githubDelivery("push", githubPush, "d-1")
	if rec := send(h, d); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", rec.Code)
	}
	n.fail = nil
	if rec := send(h, d); rec.Code != http.StatusAccepted {
		t.Fatalf("redelivery after a failure: status %d, want 202", rec.Code)
	}
	if strings.Contains(logs.String(), "repo-token-secret") {
		t.Error("the repository's credentials were logged")
	}
}

func TestWebhookServerLimits(t *testing.T) {
	srv := NewWebhookServer(":0", http.NotFoundHandler())
	if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.MaxHeaderBytes != 256<<10 {
		t.Errorf("server without limits: %+v", srv)
	}
	if id := WebhookID("team-a", "app", []byte("s")); len(id) != 64 || id == WebhookID("team-a", "app", []byte("t")) {
		t.Errorf("WebhookID = %q", id)
	}
}

func TestParseWebhook(t *testing.T) {
	tests := map[string]struct {
		forge       Forge
		event, body string
		want        PushEvent
		handled     bool
		wantErr     bool
	}{
		"a GitHub push":                   {ForgeGitHub, "push", githubPush, PushEvent{Ref: "refs/tags/run/x", Before: zeroSHA, After: strings.Repeat("1", 40), Repository: "https://github.com/org/app.git"}, true, false},
		"a GitLab tag push":               {ForgeGitLab, "Tag Push Hook", gitlabPush, PushEvent{Ref: "refs/tags/run/x", Before: zeroSHA, After: strings.Repeat("1", 40), Repository: "https://gitlab.com/org/app.git"}, true, false},
		"a Gitea delete":                  {ForgeGitea, "delete", `{"ref":"run/x","ref_type":"tag"}`, PushEvent{Ref: "refs/tags/run/x"}, true, false},
		"a GitHub branch create":          {ForgeGitHub, "create", `{"ref":"exp","ref_type":"branch"}`, PushEvent{Ref: "refs/heads/exp"}, true, false},
		"an issue event":                  {ForgeGitHub, "issues", `{}`, PushEvent{}, false, false},
		"a GitLab merge request":          {ForgeGitLab, "Merge Request Hook", `{"object_attributes":{"iid":7,"last_commit":{"id":"2222222222222222222222222222222222222222"}}}`, PushEvent{Ref: "refs/merge-requests/7/head", After: "2222222222222222222222222222222222222222"}, true, false},
		"a GitHub pull request":           {ForgeGitHub, "pull_request", `{"action":"synchronize","number":12,"pull_request":{"head":{"sha":"2222222222222222222222222222222222222222"}}}`, PushEvent{Ref: "refs/pull/12/head", After: "2222222222222222222222222222222222222222"}, true, false},
		"a Gitea pull request":            {ForgeGitea, "pull_request", `{"number":3,"pull_request":{"head":{"sha":"2222222222222222222222222222222222222222"}}}`, PushEvent{Ref: "refs/pull/3/head", After: "2222222222222222222222222222222222222222"}, true, false},
		"a pull request without a number": {ForgeGitHub, "pull_request", `{"action":"opened"}`, PushEvent{}, true, true},
		"a pull request with a bad SHA":   {ForgeGitHub, "pull_request", `{"number":1,"pull_request":{"head":{"sha":"nope"}}}`, PushEvent{}, true, true},
		"a push without a ref":            {ForgeGitHub, "push", `{"after":"x"}`, PushEvent{}, true, true},
		"a ref that is a number":          {ForgeGitHub, "push", `{"ref":1}`, PushEvent{}, true, true},
		"an array":                        {ForgeGitHub, "push", `[1]`, PushEvent{}, true, true},
		"trailing data":                   {ForgeGitHub, "push", githubPush + `{}`, PushEvent{}, true, true},
		"deep nesting":                    {ForgeGitHub, "push", `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, PushEvent{}, true, true},
		"an unknown ref type":             {ForgeGitHub, "create", `{"ref":"x","ref_type":"repository"}`, PushEvent{}, true, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, handled, err := ParseWebhook(tc.forge, tc.event, []byte(tc.body))
			if (err != nil) != tc.wantErr || handled != tc.handled {
				t.Fatalf("handled %v, err %v; want %v, error %v", handled, err, tc.handled, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBadPayload) {
				t.Errorf("err %v is not ErrBadPayload", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseWebhook: any body, for any forge and event, parses into a
// well-formed event or fails with ErrBadPayload; nothing panics.
func FuzzParseWebhook(f *testing.F) {
	for _, s := range []struct{ forge, event, body string }{
		{"github", "push", githubPush},
		{"gitlab", "Tag Push Hook", gitlabPush},
		{"gitea", "push", giteaPush},
		{"github", "create", `{"ref":"run/x","ref_type":"tag"}`},
		{"gitea", "delete", `{"ref":"main","ref_type":"branch"}`},
		{"github", "push", `{"ref":"refs/heads/\u0000"}`},
		{"github", "push", `{"ref":"refs/heads/a","repository":null,"project":{}}`},
		{"github", "pull_request", `{"number":1,"pull_request":{"head":{"sha":"` + strings.Repeat("3", 40) + `"}}}`},
		{"gitlab", "Merge Request Hook", `{"object_attributes":{"iid":2,"last_commit":{"id":"` + strings.Repeat("4", 40) + `"}}}`},
	} {
		f.Add(s.forge, s.event, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, forge, event string, body []byte) {
		ev, handled, err := ParseWebhook(Forge(forge), event, body)
		if err != nil {
			if !errors.Is(err, ErrBadPayload) || !handled {
				t.Fatalf("error %v (handled %v)", err, handled)
			}
			return
		}
		if handled && !validRef(ev.Ref) {
			t.Fatalf("accepted ref %q", ev.Ref)
		}
		for _, sha := range []string{ev.Before, ev.After} {
			if sha != "" && !shaRe.MatchString(sha) {
				t.Fatalf("accepted SHA %q", sha)
			}
		}
	})
}

// FuzzWebhookHandler sends arbitrary signed bodies and headers through the
// whole handler: it answers with one of its documented statuses, never
// panics, and nudges only for events that parse.
func FuzzWebhookHandler(f *testing.F) {
	f.Add("push", []byte(githubPush), "id", true)
	f.Add("create", []byte(`{"ref":"x","ref_type":"tag"}`), "", true)
	f.Add("push", []byte(`{`), "id", false)
	f.Fuzz(func(t *testing.T, event string, body []byte, id string, signed bool) {
		h, n, _, _ := newHookFixture(t)
		hdr := map[string]string{"X-GitHub-Event": event, "X-GitHub-Delivery": id}
		if signed {
			hdr["X-Hub-Signature-256"] = "sha256=" + sign(string(body))
		}
		rec := send(h, hookRequest{id: "gh", body: string(body), header: hdr})
		switch rec.Code {
		case 200, 202, 400, 401, 413:
		default:
			t.Fatalf("status %d", rec.Code)
		}
		if (rec.Code == 202) != (len(n.got()) == 1) {
			t.Fatalf("status %d with nudges %v", rec.Code, n.got())
		}
		if rec.Code == 202 && !signed {
			t.Fatal("an unsigned request nudged")
		}
	})
}

// countingReceivers counts lookups, as the reconciler's receivers would
// count Secret reads.
type countingReceivers struct {
	receivers
	mu sync.Mutex
	n  int
}

func (c *countingReceivers) Receiver(ctx context.Context, id string) (Receiver, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.receivers.Receiver(ctx, id)
}

// A client that keeps getting refused is answered 429 until it earns
// budget back; an unknown receiver costs a look-up, never a body read;
// other clients and real deliveries go on.
func TestWebhookHandlerLimitsRefusedRequestsPerClient(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rs := &countingReceivers{receivers: receivers{"gh": {Forge: ForgeGitHub, RepoURL: "https://github.com/org/app.git", Secret: []byte(hookSecret)}}}
	n := &nudges{}
	h := NewWebhookHandler(rs, n, WebhookOptions{Clock: clk, ClientRefusals: 1, ClientBurst: 5})
	from := func(addr string, d hookRequest) int { return sendFrom(h, addr, nil, d) }
	codes := map[int]int{}
	for i := range 100 {
		codes[from("203.0.113.7:4000", hookRequest{id: fmt.Sprintf("guess-%d", i), body: "{}"})]++
	}
	if diff := cmp.Diff(map[int]int{404: 5, 429: 95}, codes); diff != "" {
		t.Errorf("answers to 100 guesses (-want +got):\n%s", diff)
	}
	if got := from("198.51.100.1:5000", githubDelivery("push", githubPush, "d-1")); got != 202 {
		t.Errorf("the forge's delivery from another address got %d, want 202", got)
	}
	clk.Step(time.Second)
	if got := from("203.0.113.7:4000", hookRequest{id: "guess-again", body: "{}"}); got != 404 {
		t.Errorf("a second later the client got %d, want one more 404", got)
	}
	if got := from("203.0.113.7:4000", hookRequest{id: "guess-more", body: "{}"}); got != 429 {
		t.Errorf("then %d, want 429", got)
	}
	for range 50 {
		if got := from("198.51.100.1:5000", githubDelivery("push", githubPush, fmt.Sprintf("ok-%d", clk.Now().UnixNano()))); got != 202 && got != 200 {
			t.Fatalf("the forge's deliveries are never limited, got %d", got)
		}
		clk.Step(time.Millisecond)
	}
	if rs.n > 100+2+1+1 {
		t.Errorf("%d look-ups: the known receiver should be looked up once per TTL", rs.n)
	}
}

// From the attacker's side, behind an Ingress: every request reaches the
// controller from the Ingress's address, the stranger's and the forge's
// alike. The stranger's guesses and forgeries spend budgets, and are
// answered 429, but the forge's deliveries, which the receiver's secret
// verifies, are served all the same; and forgeries at one receiver never
// limit another's.
func TestAStrangersRefusedRequestsNeverBlockTheForgeBehindOneIngress(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rs := &countingReceivers{receivers: receivers{
		"gh":    {Forge: ForgeGitHub, RepoURL: "https://github.com/org/app.git", Secret: []byte(hookSecret)},
		"other": {Forge: ForgeGitHub, RepoURL: "https://github.com/org/other.git", Secret: []byte("another-secret")},
	}}
	h := NewWebhookHandler(rs, &nudges{}, WebhookOptions{Clock: clk, ClientRefusals: 1, ClientBurst: 5})
	const ingress = "10.0.0.5:40000"
	for i := range 50 {
		sendFrom(h, ingress, nil, hookRequest{id: fmt.Sprintf("guess-%d", i), body: "{}"})
		forged := githubDelivery("push", githubPush, fmt.Sprintf("f-%d", i))
		forged.header["X-Hub-Signature-256"] = "sha256=" + strings.Repeat("0", 64)
		sendFrom(h, ingress, nil, forged)
	}
	forged := githubDelivery("push", githubPush, "f-last")
	forged.header["X-Hub-Signature-256"] = "sha256=" + strings.Repeat("0", 64)
	if got := sendFrom(h, ingress, nil, forged); got != 429 {
		t.Errorf("the stranger's next forgery got %d, want 429", got)
	}
	for i := range 5 {
		if got := sendFrom(h, ingress, nil, githubDelivery("push", githubPush, fmt.Sprintf("real-%d", i))); got != 202 {
			t.Fatalf("the forge's delivery %d through the same Ingress got %d, want 202", i, got)
		}
	}
	other := hookRequest{id: "other", body: githubPush, header: map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "o-1",
		"X-Hub-Signature-256": "sha256=" + strings.Repeat("1", 64)}}
	if got := sendFrom(h, ingress, nil, other); got != 401 {
		t.Errorf("a wrong signature at another receiver got %d, want 401: its budget is its own", got)
	}
}

// X-Forwarded-For names the client only when the connection comes from a
// proxy the platform trusts: from anywhere else it is the sender's own
// words and is ignored, so a stranger cannot pass as the forge's address,
// nor spend another client's budget by naming it.
func TestTheClientIsForwardedOnlyByTrustedProxies(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.168.1.7")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		remote, xff, want string
	}{
		"no proxy":                           {"203.0.113.7:4000", "", "203.0.113.7"},
		"an untrusted peer's header ignored": {"203.0.113.7:4000", "198.51.100.1", "203.0.113.7"},
		"a trusted proxy's client":           {"10.0.0.5:4000", "198.51.100.1", "198.51.100.1"},
		"the hop before the trusted chain":   {"10.0.0.5:4000", "6.6.6.6, 198.51.100.1, 192.168.1.7", "198.51.100.1"},
		"all hops trusted":                   {"10.0.0.5:4000", "10.1.1.1", "10.0.0.5"},
		"a hop that is not an address":       {"10.0.0.5:4000", "evil, garbage", "10.0.0.5"},
		"a trusted proxy without the header": {"10.0.0.5:4000", "", "10.0.0.5"},
		"an IPv4-mapped IPv6 proxy":          {"[::ffff:10.0.0.5]:4000", "198.51.100.1", "198.51.100.1"},
	}
	for name, tc := range cases {
		r := httptest.NewRequest(http.MethodPost, "/hooks/x", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := ClientAddress(r, trusted); got != tc.want {
			t.Errorf("%s: client %q, want %q", name, got, tc.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "ingress", "10.0.0.1-10.0.0.9"} {
		if _, err := ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "CIDR") {
			t.Errorf("ParseTrustedProxies(%q) = %v, want an error saying what is expected", bad, err)
		}
	}

	// A stranger who reaches the controller directly cannot spend the
	// budget of the forge's address by writing it in X-Forwarded-For.
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := NewWebhookHandler(receivers{}, &nudges{}, WebhookOptions{Clock: clk, ClientRefusals: 1, ClientBurst: 2, TrustedProxies: trusted})
	for i := range 10 {
		sendFrom(h, "203.0.113.7:4000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, hookRequest{id: fmt.Sprintf("g-%d", i), body: "{}"})
	}
	if got := sendFrom(h, "10.0.0.5:4000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, hookRequest{id: "g", body: "{}"}); got != 404 {
		t.Errorf("the forge's address through the trusted Ingress got %d, want 404: its budget is untouched", got)
	}
}

// sendFrom sends d to h from addr with the extra headers, returning the
// status.
func sendFrom(h http.Handler, addr string, extra map[string]string, d hookRequest) int {
	req := httptest.NewRequest(http.MethodPost, "/hooks/"+d.id, strings.NewReader(d.body))
	req.RemoteAddr = addr
	for k, v := range d.header {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}
