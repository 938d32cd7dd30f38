package run

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taugrid/taugrid/api/gpus"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
)

// tokenAgent is a node agent that answers its node's report to the one
// token it accepts, 401 to the rest, and records what it was sent.
type tokenAgent struct {
	node, accept string
	mu           sync.Mutex
	seen         []string // the Authorization headers
}

func (a *tokenAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Header.Get("Authorization"))
	a.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+a.accept {
		http.Error(w, "tau-nodeagent: /gpus needs a ServiceAccount token", http.StatusUnauthorized)
		return
	}
	_ = json.NewEncoder(w).Encode(gpus.Report{Node: a.node})
}

// agentPodFor is a running agent pod on node whose metrics port is srv's.
func agentPodFor(t *testing.T, node string, srv *httptest.Server) *corev1.Pod {
	t.Helper()
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tau-nodeagent-" + node, Namespace: "taugrid-system", Labels: map[string]string{NodeAgentLabel: NodeAgentName}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "tau-nodeagent",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(p)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: host},
	}
}

// rotating is a token source that hands out its tokens in turn, as a
// projected token file does across the kubelet's rotations.
type rotating struct {
	tokens []string
	n      int
}

func (r *rotating) Token() (*oauth2.Token, error) {
	if r.n == len(r.tokens) {
		return nil, errors.New("no token")
	}
	r.n++
	return &oauth2.Token{AccessToken: r.tokens[r.n-1]}, nil
}

// TestTheAgentsAreAskedWithTheControllersCurrentToken: every read carries
// the token the source gives now, so a rotated token is used from the
// next read; without a token, or with the agent refusing, the node is
// unread, never read some other way.
func TestTheAgentsAreAskedWithTheControllersCurrentToken(t *testing.T) {
	agent := &tokenAgent{node: "gpu-1", accept: "t1"}
	srv := httptest.NewServer(agent)
	t.Cleanup(srv.Close)
	n := &NodeAgents{Reader: sharedtest.NewClient(agentPodFor(t, "gpu-1", srv)), Namespace: "taugrid-system",
		Token: &rotating{tokens: []string{"t1", "t2"}}}
	var got []string
	for range 3 {
		reps, unread := n.Reports(context.Background(), "team-a", []string{"gpu-1"})
		got = append(got, strconv.Itoa(len(reps))+" read, "+strconv.Itoa(len(unread))+" unread")
	}
	n.Token = nil
	reps, _ := n.Reports(context.Background(), "team-a", []string{"gpu-1"})
	got = append(got, strconv.Itoa(len(reps))+" read without a token")
	want := []string{
		"1 read, 0 unread", // t1, which the agent accepts
		"0 read, 1 unread", // t2, which it refuses
		"0 read, 1 unread", // the source has no token: nothing is sent
		"0 read without a token",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Bearer t1", "Bearer t2", ""}, agent.seen); diff != "" {
		t.Errorf("Authorization headers the agent saw (-want +got):\n%s", diff)
	}
}

// TestTheTokenGoesToTheAgentAndNowhereElse: whatever answers at the
// agent's address cannot redirect the controller, token and all, to
// another server.
func TestTheTokenGoesToTheAgentAndNowhereElse(t *testing.T) {
	elsewhere := &tokenAgent{node: "gpu-1", accept: "secret"}
	thief := httptest.NewServer(elsewhere)
	t.Cleanup(thief.Close)
	redirector := httptest.NewServer(http.RedirectHandler(thief.URL+gpus.Path, http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)
	n := &NodeAgents{Reader: sharedtest.NewClient(agentPodFor(t, "gpu-1", redirector)), Namespace: "taugrid-system",
		Token: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "secret"})}
	reps, unread := n.Reports(context.Background(), "team-a", []string{"gpu-1"})
	if len(reps) != 0 || len(unread) != 1 {
		t.Errorf("a redirect was followed: reports %v, unread %v", reps, unread)
	}
	if len(elsewhere.seen) != 0 {
		t.Errorf("the other server was asked, with %v", elsewhere.seen)
	}
}

// TestServiceAccountTokenReadsTheProjectedFile: the token is the file's,
// without its trailing newline; no file, no token (and no request).
func TestServiceAccountTokenReadsTheProjectedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := ServiceAccountToken(path).Token()
	if err != nil || tok.AccessToken != "the-token" {
		t.Errorf("token %+v, %v; want the file's", tok, err)
	}
	if _, err := ServiceAccountToken(filepath.Join(t.TempDir(), "none")).Token(); err == nil {
		t.Error("a token from no file")
	}
}
