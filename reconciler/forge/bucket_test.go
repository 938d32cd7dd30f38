package forge_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/taugrid/taugrid/reconciler/forge"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestOneCredentialIsPacedAndItsRemainingQuotaIsExported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "4321")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": 7}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	m, err := forge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	buckets := &forge.Buckets{Rate: 1, Burst: 2}
	cfg := forge.Config{Type: forge.Gitea, APIURL: srv.URL, Token: "secret-token", Metrics: m, Clock: clk, Buckets: buckets}
	post := func() error {
		p, err := forge.New(cfg) // a new poster per post, as the reconciler builds them
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Post(context.Background(), forge.Status{Owner: "o", Repo: "r", SHA: "abc", Context: "tau/x", State: forge.StatePending})
		return err
	}
	for i := range 2 {
		if err := post(); err != nil {
			t.Fatalf("post %d within the burst: %v", i, err)
		}
	}
	var wait *forge.WaitError
	if err := post(); !errors.As(err, &wait) {
		t.Fatalf("third post at once: err = %v, want a WaitError", err)
	}
	clk.Step(time.Second)
	if err := post(); err != nil {
		t.Errorf("a post after a token came back: %v", err)
	}
	if got := testutil.ToFloat64(m.Remaining(forge.Gitea)); got != 4321 {
		t.Errorf("taugrid_forge_rate_limit_remaining = %v, want 4321", got)
	}
}

func TestATakenTokenIsTheNextPostsAndTakingAgainTakesNoOther(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": 7}`))
	}))
	defer srv.Close()
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := forge.Config{Type: forge.Gitea, APIURL: srv.URL, Token: "secret-token", Clock: clk, Buckets: &forge.Buckets{Rate: 1, Burst: 1}}
	p, err := forge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	taker, ok := p.(forge.Taker)
	if !ok {
		t.Fatalf("a poster with buckets is a %T, want a forge.Taker", p)
	}
	for i := range 2 {
		if err := taker.Take(); err != nil {
			t.Fatalf("take %d of the one token: %v", i, err)
		}
	}
	if _, err := p.Post(context.Background(), forge.Status{Owner: "o", Repo: "r", SHA: "abc", Context: "tau/x", State: forge.StatePending}); err != nil {
		t.Fatalf("the post of the taken token: %v", err)
	}
	var wait *forge.WaitError
	other, err := forge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.(forge.Taker).Take(); !errors.As(err, &wait) || wait.After < time.Second {
		t.Errorf("another take with the bucket empty: err = %v, want a WaitError of at least a second", err)
	}
}
