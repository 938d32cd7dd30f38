package shared

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The objects a cache holds repeat the same strings: every pod of every run
// carries the same label keys, the same queue, profile and node names, the
// same condition reasons and messages, and the decoder gives each its own
// copy (BenchmarkCachedBytesOfARun: a fifth of a run's cached bytes). The
// cache's transform replaces each short string of a cached object with the
// first copy of the same text it kept (internStrings), so the objects share
// it. Strings are immutable, so nothing that reads an object can tell.

// internMaxLen is the longest string kept: longer ones (digests lists,
// messages that name a run) are rarely repeated.
const internMaxLen = 128

// internMax bounds the table: names and UIDs, which are not repeated, are
// kept too, and once it holds internMax strings it starts again, so it
// never holds more than a few MB; a repeated string then has a copy per
// round, not one per object.
const internMax = 1 << 16

var interned = newFirstCopies[string, string](internMax)

func intern(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	return interned.keep(s, s)
}

// firstCopies keeps the first value put under each key, up to limit
// keys; then it starts again.
type firstCopies[K comparable, V any] struct {
	mu    sync.Mutex
	m     map[K]V
	limit int
}

func newFirstCopies[K comparable, V any](limit int) *firstCopies[K, V] {
	return &firstCopies[K, V]{m: map[K]V{}, limit: limit}
}

// first is the value kept under k, if one is.
func (f *firstCopies[K, V]) first(k K) (V, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[k]
	return v, ok
}

// keep is the value first kept under k, v if none is (v is kept).
func (f *firstCopies[K, V]) keep(k K, v V) V {
	f.mu.Lock()
	defer f.mu.Unlock()
	if first, ok := f.m[k]; ok {
		return first
	}
	if len(f.m) >= f.limit {
		clear(f.m)
	}
	f.m[k] = v
	return v
}

// Maps cost more than the text they hold: the smallest (up to 8 entries)
// is a group of 8 slots, about 340 bytes with string values and 700 with
// quantities, whatever it holds. Many repeat from object to object: a
// Workload's flavors and resource usage ({cpu: 8, memory: 32Gi,
// nvidia.com/gpu: 1}), its pod sets' accelerators, a pod's resources, a
// node selector. A map whose text is all that of one kept before (same
// type, same entries, sharedMapKeyOf) is replaced by that one, so the
// objects share it; so do an object's versions, one after the other. The
// cache hands out deep copies (and readers of its own copies only read),
// so no reader can change a shared map.

// sharedMapMaxEntries and sharedMapMaxKey bound the maps kept: the table
// holds each one's text as its key, and a large map is rarely repeated.
const (
	sharedMapMaxEntries = 16
	sharedMapMaxKey     = 1024
)

// sharedMapMax bounds the table of kept maps, as internMax does strings'.
const sharedMapMax = 1 << 12

type sharedMapKey struct {
	t       reflect.Type
	entries string
}

var sharedMaps = newFirstCopies[sharedMapKey, reflect.Value](sharedMapMax)

var quantityType = reflect.TypeFor[resource.Quantity]()

// sharedMapKeyOf is what names m's entries in the table of kept maps;
// false where they cannot be compared as text (only maps from strings to
// strings or quantities are kept) or m is too large to be worth keeping.
func sharedMapKeyOf(m reflect.Value) (sharedMapKey, bool) {
	t := m.Type()
	if t.Key().Kind() != reflect.String || (t.Elem().Kind() != reflect.String && t.Elem() != quantityType) || m.Len() > sharedMapMaxEntries {
		return sharedMapKey{}, false
	}
	entries := make([]string, 0, m.Len())
	size := 0
	it := m.MapRange()
	for it.Next() {
		var v string
		if t.Elem() == quantityType {
			q := it.Value().Interface().(resource.Quantity)
			// The text and its format: 8 as a decimal and as a binary
			// amount read alike, but what is computed from them does not.
			v = q.String() + "/" + string(q.Format)
		} else {
			v = it.Value().String()
		}
		e := it.Key().String() + "\x00" + v + "\x00"
		size += len(e)
		if size > sharedMapMaxKey {
			return sharedMapKey{}, false
		}
		entries = append(entries, e)
	}
	slices.Sort(entries)
	return sharedMapKey{t: t, entries: strings.Join(entries, "")}, true
}

// internStrings replaces, in place, each string that obj (a pointer to a
// decoded object) reaches through exported fields, slices, maps and
// pointers with its interned copy. Maps are built again, right-sized, with
// interned keys and values, or replaced by a kept map of the same entries
// (sharedMaps), and slices with room to spare are cut to their length.
func internStrings(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	internValue(v.Elem())
}

func internValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(intern(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			internValue(v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				internValue(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes, not text
		}
		if v.Kind() == reflect.Slice && v.Cap() > v.Len() && v.CanSet() {
			// The JSON decoder grows a slice by doubling it: the room
			// left would be kept with the object.
			exact := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(exact, v)
			v.Set(exact)
		}
		for i := range v.Len() {
			internValue(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() || !v.CanSet() {
			return
		}
		key, shareable := sharedMapKeyOf(v)
		if shareable {
			if kept, ok := sharedMaps.first(key); ok {
				v.Set(kept)
				return
			}
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		// One settable key and element, reused: SetMapIndex copies them.
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		it := v.MapRange()
		for it.Next() {
			k.Set(it.Key())
			internValue(k)
			e.Set(it.Value())
			internValue(e)
			m.SetMapIndex(k, e)
		}
		if shareable {
			m = sharedMaps.keep(key, m)
		}
		v.Set(m)
	}
}
