package render

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxFileSize is the largest config or policy file TauGrid reads.
const MaxFileSize = 1 << 20

// maxNodeVisits bounds the values one document may stand for, so anchors and
// aliases cannot expand a small file into an enormous value ("billion laughs").
const maxNodeVisits = 50_000

// pos is where a value starts in its file, and where the key that names it
// starts (zero for list items and the document root).
type pos struct{ line, col, keyLine, keyCol int }

// positions maps a dotted field path to where its value was written, so that
// validation, which runs on Go values, can still name the line and column.
type positions map[string]pos

// decodeStrict decodes exactly one YAML document into out (a pointer to a
// struct), refusing everything plain YAML decoding lets through: unknown keys,
// duplicate keys, wrong scalar types, several documents, oversized or
// non-UTF-8 input and alias expansion bombs. Every error carries the file,
// line, column and field path.
func decodeStrict(file string, data []byte, out any) (positions, error) {
	return decodeStrictWith(file, data, out, nil)
}

// decodeStrictWith applies overrides to the parsed document before
// decoding it.
func decodeStrictWith(file string, data []byte, out any, overrides map[string]string) (positions, error) {
	root, err := parseOne(file, data)
	if err != nil {
		return nil, err
	}
	if len(overrides) > 0 {
		if root, err = applyOverrides(file, root, overrides); err != nil {
			return nil, err
		}
	}
	d := &decoder{file: file, pos: make(positions, 64)}
	if root != nil {
		d.walk(root, reflect.ValueOf(out).Elem(), "")
	}
	return d.pos, d.errs.orNil()
}

// parseOne parses data into a single YAML document node. It returns a nil
// node for a file that holds only comments or nothing.
func parseOne(file string, data []byte) (*yaml.Node, error) {
	if len(data) > MaxFileSize {
		return nil, &FieldError{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("file is %d bytes; the limit is %d (1 MiB)", len(data), MaxFileSize)}
	}
	if !utf8.Valid(data) {
		line, col := invalidUTF8At(data)
		return nil, &FieldError{File: file, Line: line, Col: col, Msg: "file is not valid UTF-8"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(file, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &FieldError{File: file, Line: next.Line, Col: next.Column,
			Msg: "a second YAML document starts here; the file must hold exactly one (remove the '---' separator)"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(file, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if hasAlias(root) && expandedSize(root, map[*yaml.Node]int{}) > maxNodeVisits {
		return nil, &FieldError{File: file, Line: root.Line, Col: root.Column,
			Msg: fmt.Sprintf("the document expands to more than %d values through anchors and aliases; write it out plainly", maxNodeVisits)}
	}
	return root, nil
}

// hasAlias reports whether a document uses aliases at all; most do not, and
// then its size is simply bounded by the file's.
func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

// expandedSize counts the values a node stands for once every alias is
// replaced by what it names, without expanding anything: each node is
// counted once and its total reused, so a "billion laughs" document is
// measured in linear time. Totals saturate just past the limit.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if size, ok := memo[n]; ok {
		return size
	}
	memo[n] = maxNodeVisits + 1 // an alias cycle counts as too large
	size := 1
	for _, c := range n.Content {
		size = min(size+expandedSize(c, memo), maxNodeVisits+1)
	}
	memo[n] = size
	return size
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserProblems are the YAML parser's (not scanner's) errors, whose line
// go.yaml.in/yaml/v3 reports 0-based: the line where the unfinished
// mapping, list or node starts.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":    true,
	"did not find expected ',' or '}'":    true,
	"did not find expected '-' indicator": true,
	"did not find expected key":           true,
	"did not find expected node content":  true,
	"found undefined tag handle":          true,
}

// syntaxError turns the YAML parser's "yaml: line N: msg" into a FieldError.
func syntaxError(file string, err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if parserProblems[m[2]] {
			line++ // the parser reports its 0-based context line; the scanner does not
		}
		return &FieldError{File: file, Line: line, Col: 1, Msg: "invalid YAML: " + m[2]}
	}
	return &FieldError{File: file, Line: 1, Col: 1, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// invalidUTF8At returns the line and column of the first byte that is not
// valid UTF-8.
func invalidUTF8At(data []byte) (line, col int) {
	line, col = 1, 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return line, col
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		data = data[size:]
	}
	return line, col
}

type decoder struct {
	file string
	errs ErrorList
	pos  positions
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.file, Line: n.Line, Col: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	wholeNumberRE   = regexp.MustCompile(`^[-+]?[0-9_]+$`)
)

// walk decodes node n into v. Paths use dots for fields and map keys and
// [i] for list items.
func (d *decoder) walk(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		d.walk(n.Alias, v, path)
		d.pos[path] = pos{line: n.Line, col: n.Column}
		return
	}
	d.pos[path] = pos{line: n.Line, col: n.Column}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.walk(n, v.Elem(), path)
		return
	}
	if d.custom(n, v, path) {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.walkStruct(n, v, path)
	case reflect.Map:
		d.walkMap(n, v, path)
	case reflect.Slice:
		d.walkSlice(n, v, path)
	default:
		d.scalar(n, v, path)
	}
}

// custom decodes types that bring their own decoding: TextUnmarshalers from
// strings, and JSONUnmarshalers (such as resource.Quantity) from scalars.
func (d *decoder) custom(n *yaml.Node, v reflect.Value, path string) bool {
	pt := reflect.PointerTo(v.Type())
	switch {
	case pt.Implements(textUnmarshaler):
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.errorf(n, path, "expected a string, got %s", describe(n))
			return true
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.errorf(n, path, "%v", err)
		}
		return true
	case pt.Implements(jsonUnmarshaler):
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "expected a scalar, got %s", describe(n))
			return true
		}
		if v.Type() == quantityType {
			q, err := ParseQuantity(n.Value)
			if err != nil {
				d.errorf(n, path, "%v", err)
			} else {
				v.Set(reflect.ValueOf(q))
			}
			return true
		}
		raw := n.Value
		if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
			b, _ := json.Marshal(n.Value)
			raw = string(b)
		}
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON([]byte(raw)); err != nil {
			d.errorf(n, path, "invalid value %q: %v", n.Value, err)
		}
		return true
	}
	return false
}

func (d *decoder) walkStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		name, ok := d.key(k, path, seen)
		if !ok {
			continue
		}
		idx, known := fields.byName[name]
		if !known {
			d.errorf(k, join(path, name), "unknown field%s", suggest(name, fields.names))
			continue
		}
		d.walk(val, v.FieldByIndex(idx), join(path, name))
		d.keyAt(join(path, name), k)
	}
}

func (d *decoder) walkMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(n.Content)/2))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		name, ok := d.key(k, path, seen)
		if !ok {
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.walk(val, elem, join(path, name))
		d.keyAt(join(path, name), k)
		v.SetMapIndex(reflect.ValueOf(name).Convert(v.Type().Key()), elem)
	}
}

// keyAt records where the key naming path was written.
func (d *decoder) keyAt(path string, k *yaml.Node) {
	p := d.pos[path]
	p.keyLine, p.keyCol = k.Line, k.Column
	d.pos[path] = p
}

// key reads a mapping key, which must be a plain string written once.
func (d *decoder) key(k *yaml.Node, path string, seen map[string]int) (string, bool) {
	if k.Kind == yaml.AliasNode {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		d.errorf(k, path, "mapping keys must be strings, got %s", describe(k))
		return "", false
	}
	if first, dup := seen[k.Value]; dup {
		d.errorf(k, join(path, k.Value), "duplicate key (first written on line %d)", first)
		return "", false
	}
	seen[k.Value] = k.Line
	return k.Value, true
}

func (d *decoder) walkSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.walk(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected %s, got %s", kindName(v.Kind()), describe(n))
		return
	}
	tag := n.ShortTag()
	switch v.Kind() {
	case reflect.String:
		if tag != "!!str" {
			d.errorf(n, path, "expected a string, got %s (quote it: %q)", describe(n), n.Value)
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if tag != "!!bool" {
			d.errorf(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if tag == "!!float" && wholeNumberRE.MatchString(n.Value) {
			d.errorf(n, path, "%s is out of range", n.Value)
			return
		}
		if tag != "!!int" {
			d.errorf(n, path, "expected a whole number, got %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, v.Type().Bits())
		if err != nil {
			d.errorf(n, path, "%s is out of range", n.Value)
			return
		}
		v.SetInt(i)
	default:
		d.errorf(n, path, "unsupported field type %s", v.Type())
	}
}

// describe names what a node holds, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return describe(n.Alias)
	}
	switch n.ShortTag() {
	case "!!int":
		return "a number (" + n.Value + ")"
	case "!!float":
		return "a number (" + n.Value + ")"
	case "!!bool":
		return "a boolean (" + n.Value + ")"
	case "!!null":
		return "null"
	case "!!str":
		return fmt.Sprintf("a string (%q)", n.Value)
	}
	return n.ShortTag()
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	default:
		return "a whole number"
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

type structFields struct {
	byName map[string][]int
	names  []string
}

var fieldCache sync.Map // reflect.Type -> *structFields

// fieldsOf indexes a struct's fields by their JSON names, flattening
// embedded and ",inline" structs as encoding/json does.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string][]int{}}
	addFields(sf, t, nil)
	fieldCache.Store(t, sf)
	return sf
}

func addFields(sf *structFields, t reflect.Type, prefix []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		idx := append(append([]int(nil), prefix...), i)
		if (f.Anonymous && name == "") || strings.Contains(opts, "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(sf, ft, idx)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		sf.byName[name] = idx
		sf.names = append(sf.names, name)
	}
}

// suggest returns ` (did you mean "x"?)` when a known name is a likely typo
// of name, and a list of the known names otherwise.
func suggest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(name), strings.ToLower(k)); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return "; expected one of: " + strings.Join(known, ", ")
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// boundedQuantity is a resource quantity with at most 24 digits and a
// two-digit exponent. resource.ParseQuantity accepts exponents of any size,
// and comparing or printing 1e999999999 then takes practically forever: a
// denial of service from one line of YAML.
var boundedQuantity = regexp.MustCompile(`^[+-]?([0-9]{1,24}(\.[0-9]{0,24})?|\.[0-9]{1,24})(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]{1,2}))?$`)

// ParseQuantity parses a Kubernetes resource quantity from untrusted input,
// refusing the oversized forms resource.ParseQuantity would accept.
func ParseQuantity(s string) (resource.Quantity, error) {
	if !boundedQuantity.MatchString(s) {
		return resource.Quantity{}, fmt.Errorf("invalid quantity %q: expected a number with an optional unit, such as 8, 500m or 64Gi", s)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("invalid quantity %q: expected a number with an optional unit, such as 8, 500m or 64Gi", s)
	}
	return q, nil
}

// maxOverrides bounds a run request's overrides.
const maxOverrides = 64

// applyOverrides sets dotted paths in a document to YAML scalar values,
// creating mappings on the way. An override names a field, not a list
// element, and its value is one scalar.
func applyOverrides(file string, root *yaml.Node, overrides map[string]string) (*yaml.Node, error) {
	if len(overrides) > maxOverrides {
		return nil, &FieldError{File: file, Msg: fmt.Sprintf("%d overrides; the limit is %d", len(overrides), maxOverrides)}
	}
	if root == nil {
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	if root.Kind != yaml.MappingNode {
		return root, nil // decoding reports the wrong type
	}
	for _, path := range slices.Sorted(maps.Keys(overrides)) {
		var val yaml.Node
		if err := yaml.Unmarshal([]byte(overrides[path]), &val); err != nil || len(val.Content) != 1 || val.Content[0].Kind != yaml.ScalarNode {
			return nil, &FieldError{File: file + " (--set " + path + ")", Path: path, Msg: fmt.Sprintf("value %q is not a single YAML scalar", overrides[path])}
		}
		n := root
		parts := strings.Split(path, ".")
		for i, part := range parts {
			if n.Kind != yaml.MappingNode {
				return nil, &FieldError{File: file + " (--set " + path + ")", Path: strings.Join(parts[:i], "."), Msg: "is not a mapping; an override can only set a field"}
			}
			n = child(n, part, i == len(parts)-1, val.Content[0])
		}
	}
	return root, nil
}

// child returns the value of key in mapping n, adding it if absent; the
// last element of a path is replaced by val.
func child(n *yaml.Node, key string, last bool, val *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			if last {
				v := *val
				n.Content[i+1] = &v
			} else if n.Content[i+1].Kind == yaml.AliasNode {
				n.Content[i+1] = n.Content[i+1].Alias
			}
			return n.Content[i+1]
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if last {
		c := *val
		v = &c
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v
}
