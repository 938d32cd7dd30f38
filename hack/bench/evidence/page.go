package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// oneRun serves the bench run as live, as the controller's cache would.
type oneRun struct{ live *evidence.Live }

func (o oneRun) LiveRun(context.Context, string, string) (*evidence.Live, error) { return o.live, nil }

func liveRun(phase taugridv1.RunPhase) *evidence.Live {
	t0 := time.Now().Add(-time.Hour)
	at := func(m int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(m) * time.Minute)) }
	return &evidence.Live{RepositoryURL: "https://github.com/acme/research.git", Run: &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "research-bench"},
		Spec:       taugridv1.TauRunSpec{Repository: "research", Commit: strings.Repeat("a", 40), Target: "default", Trigger: taugridv1.Trigger{Kind: "RunTag", Ref: "refs/tags/run/bench"}},
		Status: taugridv1.TauRunStatus{Phase: phase, Message: "bench",
			Phases: []taugridv1.PhaseTransition{{Phase: "Pending", Time: at(0)}, {Phase: "Queued", Time: at(1)}, {Phase: "Admitted", Time: at(5)},
				{Phase: "Running", Time: at(6)}, {Phase: "Succeeded", Time: at(50)}},
			Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: "research-bench-1", Queue: "runs"}}}}
}

// measurePage fires requests from concurrent readers at the page of the
// bench run.
func measurePage(st evidence.Store, readers, requests int) error {
	done := httptest.NewServer((&evidence.Server{Store: st, Runs: oneRun{liveRun(taugridv1.PhaseSucceeded)}}).Handler())
	defer done.Close()
	running := httptest.NewServer((&evidence.Server{Store: st, Runs: oneRun{liveRun(taugridv1.PhaseRunning)}}).Handler())
	defer running.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: readers}}
	fmt.Printf("| page, %d concurrent readers, %d requests | p50 | p99 | max | requests/s | response |\n", readers, requests)
	fmt.Println("|---|---|---|---|---|---|")
	for _, c := range []struct{ format, url string }{
		{"HTML, finished run (rendered once)", done.URL + "/runs/team-a/research-bench"},
		{"JSON, finished run (rendered once)", done.URL + "/runs/team-a/research-bench.json"},
		{"HTML, running run (rendered per request)", running.URL + "/runs/team-a/research-bench"},
		{"JSON, running run (rendered per request)", running.URL + "/runs/team-a/research-bench.json"},
	} {
		format, url := c.format, c.url
		lat, size, wall, err := hammer(client, url, readers, requests)
		if err != nil {
			return err
		}
		slices.Sort(lat)
		q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
		fmt.Printf("| %s | %s | %s | %s | %.0f | %s |\n", format, q(0.50), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond),
			float64(requests)/wall.Seconds(), human(size))
	}
	return nil
}

func hammer(client *http.Client, url string, readers, requests int) ([]time.Duration, int64, time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var size int64
	var firstErr error
	work := make(chan struct{}, requests)
	for range requests {
		work <- struct{}{}
	}
	close(work)
	start := time.Now()
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for range work {
				t := time.Now()
				resp, err := client.Get(url)
				if err == nil {
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("GET %s: %s", url, resp.Status)
					}
					mu.Lock()
					size = n
					mu.Unlock()
				}
				d := time.Since(t)
				mu.Lock()
				lat = append(lat, d)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, size, time.Since(start), firstErr
}
