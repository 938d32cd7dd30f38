package shared

import (
	"sync"
)

// Memo is a map a reconciler's workers share, in memory only.
type Memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// memoInit guards the creation of memos on first use, so a reconciler
// built as a struct literal needs no constructor.
var memoInit sync.Mutex

// MemoOf returns *p, created on first use.
func MemoOf[K comparable, V any](p **Memo[K, V]) *Memo[K, V] {
	memoInit.Lock()
	defer memoInit.Unlock()
	if *p == nil {
		*p = &Memo[K, V]{m: map[K]V{}}
	}
	return *p
}

// Get is the value kept for k, if any.
func (m *Memo[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

// Put keeps v for k.
func (m *Memo[K, V]) Put(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[k] = v
}

// Forget drops what is kept for k.
func (m *Memo[K, V]) Forget(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}
