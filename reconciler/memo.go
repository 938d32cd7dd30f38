package reconciler

import "sync"

// memo is a map a reconciler's workers share, in memory only.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// memoInit guards the creation of memos on first use, so a reconciler
// built as a struct literal needs no constructor.
var memoInit sync.Mutex

// memoOf returns *p, created on first use.
func memoOf[K comparable, V any](p **memo[K, V]) *memo[K, V] {
	memoInit.Lock()
	defer memoInit.Unlock()
	if *p == nil {
		*p = &memo[K, V]{m: map[K]V{}}
	}
	return *p
}

func (m *memo[K, V]) get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

func (m *memo[K, V]) put(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[k] = v
}

func (m *memo[K, V]) forget(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}
