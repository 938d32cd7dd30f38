package shared

import (
	"reflect"
	"sync"
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

var interned = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

func intern(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	interned.Lock()
	defer interned.Unlock()
	if v, ok := interned.m[s]; ok {
		return v
	}
	if len(interned.m) >= internMax {
		clear(interned.m)
	}
	interned.m[s] = s
	return s
}

// internStrings replaces, in place, each string that obj (a pointer to a
// decoded object) reaches through exported fields, slices, maps and
// pointers with its interned copy. Maps are built again, right-sized, with
// interned keys and values, and slices with room to spare are cut to
// their length.
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
		v.Set(m)
	}
}
