package main

import (
	"context"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// probe measures the API server's own floor under the load: once a second
// it writes a ConfigMap and times the write's response and the watch event
// that shows it. A TauRun that follows the cluster is one write and one
// watch event behind what it follows, so no controller on this API server
// can follow closer than the probe's "seen" time.
type probe struct {
	mu      sync.Mutex
	sent    map[int]time.Time // by write number, until seen
	written []time.Duration   // write → response
	seen    []time.Duration   // write → watch event
}

const probeName = "scale-probe"

// run writes and watches the probe's ConfigMap until ctx ends.
func (p *probe) run(ctx context.Context, k8s client.Client, wc client.WithWatch, watches *watchStats) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"taugrid.dev/scale-probe": "true"}}}
	if err := k8s.Create(ctx, cm); err != nil {
		return err
	}
	p.sent = map[int]time.Time{}
	go watches.follow(ctx, wc, "the probe", &corev1.ConfigMapList{}, client.MatchingLabels(cm.Labels), func(ev watch.Event, now time.Time) {
		if c, ok := ev.Object.(*corev1.ConfigMap); ok {
			if n, err := strconv.Atoi(c.Data["n"]); err == nil {
				p.saw(n, now)
			}
		}
	})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			patch := client.RawPatch("application/merge-patch+json", []byte(`{"data":{"n":"`+strconv.Itoa(n)+`"}}`))
			at := time.Now()
			p.mu.Lock()
			p.sent[n] = at
			p.mu.Unlock()
			err := k8s.Patch(ctx, cm, patch)
			p.mu.Lock()
			if err == nil {
				p.written = append(p.written, time.Since(at))
			} else {
				delete(p.sent, n) // nothing was written, so no event is to come
			}
			p.mu.Unlock()
		}
	}()
	return nil
}

func (p *probe) saw(n int, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if at, ok := p.sent[n]; ok {
		p.seen = append(p.seen, now.Sub(at))
		delete(p.sent, n)
	}
}

// take returns the write and watch times (p50, p99) since the last take,
// and forgets them.
func (p *probe) take() (written, seen [2]time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	written, seen = pcts(p.written), pcts(p.seen)
	p.written, p.seen = nil, nil
	return written, seen
}
