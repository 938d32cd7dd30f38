package gitsource

import (
	"container/list"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// deliveries remembers recent webhook delivery IDs, at most max of them
// for at most ttl, so a redelivered event does not nudge twice. Memory is
// bounded whatever the forge sends.
type deliveries struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	clock clock.PassiveClock
	order *list.List // oldest first
	items map[string]*list.Element
}

type delivery struct {
	key string
	at  time.Time
}

func newDeliveries(max int, ttl time.Duration, clk clock.PassiveClock) *deliveries {
	return &deliveries{max: max, ttl: ttl, clock: clk, order: list.New(), items: map[string]*list.Element{}}
}

// begin reports whether key is new and claims it, also against a
// concurrent duplicate; an empty key always is new.
func (d *deliveries) begin(key string) bool {
	if key == "" {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	d.expire(now)
	if _, seen := d.items[key]; seen {
		return false
	}
	d.items[key] = d.order.PushBack(&delivery{key: key, at: now})
	for d.order.Len() > d.max {
		d.remove(d.order.Front())
	}
	return true
}

// abort forgets key, so the forge's retry is handled.
func (d *deliveries) abort(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.items[key]; ok {
		d.remove(e)
	}
}

func (d *deliveries) expire(now time.Time) {
	for e := d.order.Front(); e != nil; e = d.order.Front() {
		if now.Sub(e.Value.(*delivery).at) < d.ttl {
			return
		}
		d.remove(e)
	}
}

func (d *deliveries) remove(e *list.Element) {
	d.order.Remove(e)
	delete(d.items, e.Value.(*delivery).key)
}

// len is how many deliveries are remembered.
func (d *deliveries) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.order.Len()
}
