package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func tokenSecret(name, token, ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
		Data: map[string][]byte{taugridv1.APITokenKey: []byte(token), taugridv1.APINamespaceKey: []byte(ns)}}
}

// auditAPI is the runs API over a store holding three entries of team-a's
// log and one of team-b's, with a token for each team.
func auditAPI(t *testing.T) http.Handler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tokenSecret("a", "tok-a", "team-a"), tokenSecret("b", "tok-b", "team-b")).Build()
	store, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	log := &evidence.AuditLog{Store: store, Clock: clocktesting.NewFakePassiveClock(now)}
	ctx := context.Background()
	for ns, runs := range map[string][]string{"team-a": {"a-1", "a-2", "a-3"}, "team-b": {"b-secret-project"}} {
		for _, run := range runs {
			if _, err := log.Append(ctx, ns, []evidence.AuditEntry{{Run: run, RunUID: run, Key: "requested", Decision: "requested", At: now}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return (&RunsAPI{Client: c, Tokens: &Tokens{Reader: c, Namespace: "tau-system", Clock: clocktesting.NewFakePassiveClock(now)}, Audit: store}).Handler()
}

func getAudit(h http.Handler, token, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestATeamReadsOnlyItsOwnAuditLog plays team A, who wants team B's log:
// its token is refused at B's namespace, and nothing of B's comes back.
func TestATeamReadsOnlyItsOwnAuditLog(t *testing.T) {
	h := auditAPI(t)
	for name, tc := range map[string]struct {
		token, path string
		code        int
	}{
		"team A's token at team B's log": {"tok-a", "/api/v1/namespaces/team-b/audit", http.StatusForbidden},
		"no token":                       {"", "/api/v1/namespaces/team-b/audit", http.StatusUnauthorized},
		"a made-up token":                {"tok-z", "/api/v1/namespaces/team-b/audit", http.StatusUnauthorized},
		"a namespace that is a path":     {"tok-a", "/api/v1/namespaces/..%2Fteam-b/audit", http.StatusForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			rec := getAudit(h, tc.token, tc.path)
			if rec.Code != tc.code || strings.Contains(rec.Body.String(), "b-secret-project") {
				t.Errorf("answer %d %s, want %d and nothing of team B's", rec.Code, rec.Body.String(), tc.code)
			}
		})
	}
	rec := getAudit(h, "tok-b", "/api/v1/namespaces/team-b/audit")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "b-secret-project") {
		t.Errorf("team B reading its own log: %d %s", rec.Code, rec.Body.String())
	}
}

// TestTheAuditLogIsReadInPages: a page holds at most limit entries and
// says where the next starts; the last says nothing more.
func TestTheAuditLogIsReadInPages(t *testing.T) {
	h := auditAPI(t)
	var seqs []int64
	after := "0"
	for range 3 {
		rec := getAudit(h, "tok-a", "/api/v1/namespaces/team-a/audit?limit=2&after="+after)
		var page evidence.AuditPage
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("answer %d %s", rec.Code, rec.Body.String())
		}
		for _, e := range page.Entries {
			seqs = append(seqs, e.Seq)
		}
		if page.NextAfter == 0 {
			break
		}
		after = strconv.FormatInt(page.NextAfter, 10)
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[2] != 3 {
		t.Errorf("pages held %v, want 1 2 3", seqs)
	}
	if rec := getAudit(h, "tok-a", "/api/v1/namespaces/team-a/audit?limit=100000"); rec.Code != http.StatusBadRequest {
		t.Errorf("an unbounded page: %d, want 400", rec.Code)
	}
}
