package render

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// FieldError is one problem in a config or policy file, located precisely
// enough for an editor to jump to it: "tau.yaml:12:5: compute.gpus: must be
// at least 0".
type FieldError struct {
	File string // the file as the user names it, e.g. "tau.yaml" or "tau/ray.yaml"
	Line int    // 1-based; 0 when the problem is the whole file
	Col  int    // 1-based
	Path string // dotted field path, e.g. "runtime.env.FOO"; empty for syntax errors
	Msg  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, max(e.Col, 1))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one input, in file order. A config with
// any error renders nothing.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// sorted orders the list by file and position, so output is stable whatever
// order the checks ran in.
func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return l
}

// orNil returns the list as an error, or nil when it is empty.
func (l ErrorList) orNil() error {
	if len(l) == 0 {
		return nil
	}
	return l.sorted()
}

// Errors returns the individual problems in err, whether it is a single
// FieldError or an ErrorList; nil for other errors.
func Errors(err error) []*FieldError {
	var list ErrorList
	if errors.As(err, &list) {
		return list
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return nil
}
