package gitsource

import (
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestListRefsReadsBranchesTagsAndRunRefsWithoutCloning(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	c1 := r.write("tau.yaml", "name: a\n").commit("first")
	r.git("tag", "run/light")
	r.git("tag", "-a", "-m", "annotated", "run/annotated")
	r.git("tag", "-a", "-m", "target: ray", "tmp-run")
	tagObj := r.git("rev-parse", "run/annotated")
	runObj := r.git("rev-parse", "tmp-run")
	r.push("main", "run/light", "run/annotated", "refs/tags/tmp-run:refs/tau/runs/r1")
	client, reg := newClient(t)

	got, err := client.ListRefs(ctxT(t), r.remote())
	if err != nil {
		t.Fatal(err)
	}
	want := RefSet{
		"refs/heads/main":         {SHA: c1},
		"refs/tags/run/light":     {SHA: c1},
		"refs/tags/run/annotated": {SHA: tagObj, Peeled: c1},
		"refs/tau/runs/r1":        {SHA: runObj, Peeled: c1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	if n := counter(t, reg, "taugrid_git_requests_total", "operation", "list", "result", "ok"); n != 1 {
		t.Errorf("list ok counter = %v, want 1", n)
	}
	if entries(t, client.cache.path("repos")) != nil {
		t.Error("listing wrote to the cache; it must not clone")
	}
}

func TestListRefsOfAnEmptyRepositoryIsEmpty(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("empty")
	client, _ := newClient(t)
	got, err := client.ListRefs(ctxT(t), r.remote())
	if err != nil || len(got) != 0 {
		t.Fatalf("ListRefs = %v, %v; want no refs, no error", got, err)
	}
}

func TestListRefsFailuresAreTypedAndHideSecrets(t *testing.T) {
	s := newServer(t)
	s.backend.User, s.backend.Password = "alice", "right-password"
	s.newRepo("private").write("a", "a").commit("a")
	closed := closedAddr(t)
	tests := map[string]struct {
		remote   Remote
		want     error
		requests int64 // reaching the server: terminal failures are not retried
	}{
		"a wrong password is refused once, not retried": {
			remote:   Remote{URL: s.url("private"), Auth: Credentials{Username: "alice", Password: "wrong-password"}},
			want:     ErrAuth,
			requests: 1,
		},
		"a token that is not accepted": {
			remote:   Remote{URL: s.url("private"), Auth: Credentials{Token: "ghp_secrettoken123"}},
			want:     ErrAuth,
			requests: 1,
		},
		"credentials in the URL are used, and never shown": {
			remote:   Remote{URL: strings.Replace(s.url("private"), "http://", "http://alice:url-secret@", 1)},
			want:     ErrAuth,
			requests: 1,
		},
		"no credentials for a private repository": {
			remote:   Remote{URL: s.url("private")},
			want:     ErrAuth,
			requests: 1,
		},
		"an unreachable host is retried, then reported": {
			remote: Remote{URL: "http://alice:url-secret@" + closed + "/x.git", Auth: Credentials{Token: "tok-secret"}},
			want:   ErrUnreachable,
		},
		"a file URL is refused: the controller never runs git": {
			remote: Remote{URL: "file:///etc"},
			want:   ErrUnsupported,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client, reg := newClient(t)
			before := s.backend.Requests()
			_, err := client.ListRefs(ctxT(t), tc.remote)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("err is %T, want *Error", err)
			}
			for _, secret := range []string{"wrong-password", "ghp_secrettoken123", "url-secret", "tok-secret", "right-password"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a secret", err)
				}
			}
			if tc.requests > 0 {
				if got := s.backend.Requests() - before; got != tc.requests {
					t.Errorf("server saw %d requests, want %d", got, tc.requests)
				}
			}
			if n := counter(t, reg, "taugrid_git_requests_total", "operation", "list", "result", resultLabel(tc.want)); !errors.Is(tc.want, ErrUnsupported) && n != 1 {
				t.Errorf("failure counter = %v, want 1", n)
			}
		})
	}
}

func TestListRefsOfADeletedRepositoryIsNotFound(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("gone")
	r.write("a", "a").commit("a")
	r.push("main")
	client, _ := newClient(t)
	if _, err := client.ListRefs(ctxT(t), r.remote()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(s.bare("gone")); err != nil {
		t.Fatal(err)
	}
	_, err := client.ListRefs(ctxT(t), r.remote())
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestListRefsRetriesServerErrorsWithBackoff(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("flaky")
	r.write("a", "a").commit("a")
	r.push("main")
	var failures atomic.Int32
	failures.Store(2)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if failures.Add(-1) >= 0 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		s.backend.ServeHTTP(w, req)
	}))
	t.Cleanup(flaky.Close)
	client, _ := newClient(t)
	refs, err := client.ListRefs(ctxT(t), Remote{URL: flaky.URL + "/flaky.git"})
	if err != nil {
		t.Fatalf("after two 503s and a success: %v", err)
	}
	if len(refs) != 1 {
		t.Errorf("refs = %v", refs)
	}
}

func TestListRefsOverTLSNeedsATrustedCertificate(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("tls")
	r.write("a", "a").commit("a")
	r.push("main")
	tlsSrv := httptest.NewUnstartedServer(s.backend)
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	url := tlsSrv.URL + "/tls.git"
	client, _ := newClient(t)

	_, err := client.ListRefs(ctxT(t), Remote{URL: url})
	if !errors.Is(err, ErrTLS) {
		t.Fatalf("untrusted certificate: err = %v, want ErrTLS", err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	refs, err := client.ListRefs(ctxT(t), Remote{URL: url, Auth: Credentials{CABundle: ca}})
	if err != nil || len(refs) != 1 {
		t.Fatalf("with the CA bundle: %v, %v", refs, err)
	}
}

func TestConcurrentListingsOfOneRepositoryShareOneRequest(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("shared")
	r.write("a", "a").commit("a")
	r.push("main")
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(1)
	var once sync.Once
	s.hook = func(*http.Request) {
		once.Do(arrived.Done)
		<-release
	}
	client, reg := newClient(t)
	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs, err := client.ListRefs(ctxT(t), r.remote())
			if err == nil && len(refs) != 1 {
				err = fmt.Errorf("refs = %v", refs)
			}
			errs <- err
		}()
	}
	arrived.Wait()
	time.Sleep(100 * time.Millisecond) // the other callers join the flight in microseconds
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := s.backend.Requests(); got >= callers {
		t.Errorf("server saw %d requests for %d concurrent callers, want them shared", got, callers)
	}
	if n := counter(t, reg, "taugrid_git_list_shared_total"); n == 0 {
		t.Error("no listing was counted as shared")
	}
}

// closedAddr is a local address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
