package forge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/taugrid/taugrid/forge"
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
	srv := acceptingForge(t)
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
	st := forge.Status{Owner: "o", Repo: "r", SHA: "abc", Context: "tau/x", State: forge.StatePending}
	for i := range 2 {
		if err := taker.Take(st); err != nil {
			t.Fatalf("take %d of the one token: %v", i, err)
		}
	}
	if _, err := p.Post(context.Background(), st); err != nil {
		t.Fatalf("the post of the taken token: %v", err)
	}
	var wait *forge.WaitError
	other, err := forge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.Context = "tau/y"
	if err := other.(forge.Taker).Take(st); !errors.As(err, &wait) || wait.After < time.Second {
		t.Errorf("another take with the bucket empty: err = %v, want a WaitError of at least a second", err)
	}
}

// Posts waiting on one credential go in turn, each told when its token is
// there, so each waits with one try more than it posts. hack/scale, 10,000
// runs on one token: each waiting run was told "in a second" and they all
// tried again each second for the one token there was.
func TestPostsWaitingOnOneCredentialGoInTurnOneTryMoreEach(t *testing.T) {
	srv := acceptingForge(t)
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	buckets := &forge.Buckets{Rate: 2, Burst: 1}
	cfg := forge.Config{Type: forge.Gitea, APIURL: srv.URL, Token: "secret-token", Clock: clk, Buckets: buckets}
	const runs = 40
	type try struct {
		at  time.Time
		run int
	}
	var due []try // what a workqueue holds: each waiting run's requeue time
	for i := range runs {
		due = append(due, try{start, i})
	}
	tries, postedAt := make([]int, runs), make([]time.Time, runs)
	var order []int
	for len(due) > 0 {
		next := 0
		for i, d := range due {
			if d.at.Before(due[next].at) {
				next = i
			}
		}
		d := due[next]
		due = append(due[:next], due[next+1:]...)
		if d.at.After(clk.Now()) {
			clk.SetTime(d.at)
		}
		p, err := forge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tries[d.run]++
		st := forge.Status{Owner: "o", Repo: "r", SHA: "abc", Context: fmt.Sprintf("tau/train run-%d", d.run), State: forge.StatePending}
		var wait *forge.WaitError
		switch _, err := p.Post(context.Background(), st); {
		case errors.As(err, &wait):
			if wait.After <= 0 {
				t.Fatalf("run %d told to wait %v", d.run, wait.After)
			}
			due = append(due, try{clk.Now().Add(wait.After), d.run})
		case err != nil:
			t.Fatalf("run %d: %v", d.run, err)
		default:
			postedAt[d.run] = clk.Now()
			order = append(order, d.run)
		}
		if buckets.Waiting() > runs {
			t.Fatalf("%d posts waiting, more than the %d runs", buckets.Waiting(), runs)
		}
	}
	for i, n := range tries {
		if n > 2 {
			t.Errorf("run %d tried %d times for one post, want at most 2 (one to be told its turn, one to post)", i, n)
		}
	}
	for i := range order {
		if order[i] != i {
			t.Fatalf("posts went in the order %v, want the order they came to wait in", order)
		}
	}
	// 2 a second with a burst of 1: the last of 40 posts 19.5 s after the first.
	if got, want := postedAt[runs-1].Sub(start), time.Duration(runs-1)*500*time.Millisecond; got != want {
		t.Errorf("the last post went %v after the first, want %v (the credential's pace, no slower, no faster)", got, want)
	}
	if n := buckets.Waiting(); n != 0 {
		t.Errorf("%d posts still waiting after all posted", n)
	}
}

// A post that asks again before its turn is told the time left and takes
// no other token; a turn nobody came for is forgotten after ten minutes.
func TestAPostAskingBeforeItsTurnTakesNoOtherToken(t *testing.T) {
	srv := acceptingForge(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	buckets := &forge.Buckets{Rate: 1, Burst: 1}
	cfg := forge.Config{Type: forge.Gitea, APIURL: srv.URL, Token: "secret-token", Clock: clk, Buckets: buckets}
	take := func(ctx string) time.Duration {
		t.Helper()
		p, err := forge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var wait *forge.WaitError
		switch err := p.(forge.Taker).Take(forge.Status{Owner: "o", Repo: "r", SHA: "abc", Context: ctx}); {
		case err == nil:
			return 0
		case errors.As(err, &wait):
			return wait.After
		default:
			t.Fatal(err)
			return 0
		}
	}
	if d := take("tau/a"); d != 0 {
		t.Fatalf("the first post waits %v, want none (the burst)", d)
	}
	if d := take("tau/b"); d != time.Second {
		t.Fatalf("b waits %v, want 1s", d)
	}
	clk.Step(400 * time.Millisecond)
	if d := take("tau/b"); d != 600*time.Millisecond {
		t.Errorf("b asking again waits %v, want the 600ms left of its turn", d)
	}
	if d := take("tau/c"); d != 1600*time.Millisecond {
		t.Errorf("c waits %v, want 1.6s: the token after b's", d)
	}
	if n := buckets.Waiting(); n != 2 {
		t.Errorf("%d posts waiting, want 2 (b and c)", n)
	}
	clk.Step(11 * time.Minute) // b and c never come back
	if d := take("tau/d"); d != 0 {
		t.Errorf("d after eleven idle minutes waits %v, want none", d)
	}
	if d := take("tau/e"); d != time.Second {
		t.Errorf("e waits %v, want 1s", d)
	}
	if n := buckets.Waiting(); n != 1 {
		t.Errorf("%d posts waiting, want 1 (e): the turns nobody came for are forgotten", n)
	}
}

// acceptingForge is a forge that takes every post.
func acceptingForge(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": 7}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}
