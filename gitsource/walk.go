package gitsource

import (
	"container/heap"
	"errors"
)

// walk visits the commits reachable from its starting points and not in
// seen, newest committer time first (ties by SHA, so the order is stable),
// at most limit of them.
type walk struct {
	g         Graph
	seen      map[string]bool
	queued    map[string]bool
	queue     commitHeap
	limit     int
	visited   int
	truncated bool
}

func newWalk(g Graph, seen map[string]bool, limit int) *walk {
	return &walk{g: g, seen: seen, queued: make(map[string]bool), limit: limit}
}

// push queues a commit; one missing from the graph marks the walk
// truncated.
func (w *walk) push(sha string) error {
	if w.seen[sha] || w.queued[sha] {
		return nil
	}
	w.queued[sha] = true
	c, err := w.g.Commit(sha)
	if errors.Is(err, ErrNotFound) {
		w.truncated = true
		return nil
	}
	if err != nil {
		return err
	}
	heap.Push(&w.queue, c)
	return nil
}

// next pops the newest queued commit and queues its parents.
func (w *walk) next() (Commit, bool, error) {
	if w.queue.Len() == 0 {
		return Commit{}, false, nil
	}
	if w.visited >= w.limit {
		w.truncated = true
		return Commit{}, false, nil
	}
	c := heap.Pop(&w.queue).(Commit)
	w.visited++
	for _, p := range c.Parents {
		if err := w.push(p); err != nil {
			return Commit{}, false, err
		}
	}
	return c, true, nil
}

type commitHeap []Commit

func (h commitHeap) Len() int { return len(h) }
func (h commitHeap) Less(i, j int) bool {
	if !h[i].Time.Equal(h[j].Time) {
		return h[i].Time.After(h[j].Time)
	}
	return h[i].SHA < h[j].SHA
}
func (h commitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *commitHeap) Push(x any)   { *h = append(*h, x.(Commit)) }
func (h *commitHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
