package gitsource

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/taugrid/taugrid/api/runname"

	"go.yaml.in/yaml/v3"
)

// ErrInvalidRunRequest: a run ref's tag message is not a valid run request.
// The user must fix it; nothing runs.
var ErrInvalidRunRequest = errors.New("invalid run request")

// errNotARequest marks messages that are not shaped like a run request at
// all (not YAML, not a mapping, unknown fields): a run tag's message may
// be any text, and such a message just runs the default target.
var errNotARequest = errors.New("not a run request")

// RunRequest is what `tau run` writes in the message of the annotated tag
// it pushes as a run ref:
//
//	target: ray
//	overrides: {compute.gpus: "2"}
//	requester: alice@example.com
type RunRequest struct {
	// Target is the tau file to run: "default" (tau.yaml) or the name of
	// tau/<target>.yaml. Empty means "default".
	Target string
	// Overrides set dotted fields of the tau file, e.g. compute.gpus.
	Overrides map[string]string
	// Requester is who asked, as `tau run` recorded it.
	Requester string
}

const (
	maxRunRequestBytes = 64 << 10
	maxOverrides       = 256
)

var (
	overrideRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$`)
)

// ParseRunRequest reads a run request from a tag message. An empty message
// is the default target with no overrides. Errors match
// ErrInvalidRunRequest and say which field is wrong.
func ParseRunRequest(msg string) (RunRequest, error) {
	if len(msg) > maxRunRequestBytes {
		return RunRequest{}, invalidRequest("the message is over %d KiB", maxRunRequestBytes>>10)
	}
	if strings.TrimSpace(msg) == "" {
		return RunRequest{Target: "default"}, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(msg), &doc); err != nil {
		return RunRequest{}, notARequest("not YAML: %s", yamlMessage(err))
	}
	if len(doc.Content) == 0 {
		return RunRequest{Target: "default"}, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return RunRequest{}, notARequest("line %d: want a mapping with target, overrides and requester", root.Line)
	}
	return parseRequestFields(root)
}

func parseRequestFields(root *yaml.Node) (RunRequest, error) {
	req := RunRequest{Target: "default"}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			return req, invalidRequest("line %d: %s: given twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "target":
			req.Target, err = scalar(k.Value, v)
			if err == nil {
				if verr := runname.ValidateTarget(req.Target); verr != nil {
					err = invalidRequest("line %d: target: %v", v.Line, verr)
				}
			}
		case "requester":
			req.Requester, err = scalar(k.Value, v)
		case "overrides":
			req.Overrides, err = parseOverrides(v)
		default:
			err = notARequest("line %d: unknown field %q (want target, overrides, requester)", k.Line, k.Value)
		}
		if err != nil {
			return RunRequest{}, err
		}
	}
	return req, nil
}

func parseOverrides(v *yaml.Node) (map[string]string, error) {
	if v.Tag == "!!null" {
		return nil, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, invalidRequest("line %d: overrides: want a mapping of field: value", v.Line)
	}
	if len(v.Content)/2 > maxOverrides {
		return nil, invalidRequest("line %d: overrides: more than %d", v.Line, maxOverrides)
	}
	out := make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || !overrideRe.MatchString(k.Value) {
			return nil, invalidRequest("line %d: overrides: %q is not a dotted field path", k.Line, k.Value)
		}
		if _, dup := out[k.Value]; dup {
			return nil, invalidRequest("line %d: overrides.%s: given twice", k.Line, k.Value)
		}
		s, err := scalar("overrides."+k.Value, val)
		if err != nil {
			return nil, err
		}
		out[k.Value] = s
	}
	return out, nil
}

func scalar(field string, v *yaml.Node) (string, error) {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind != yaml.ScalarNode {
		return "", invalidRequest("line %d: %s: want a single value", v.Line, field)
	}
	return v.Value, nil
}

func invalidRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRunRequest, fmt.Sprintf(format, args...))
}

func notARequest(format string, args ...any) error {
	return shapeError{invalidRequest(format, args...)}
}

// shapeError is an invalid request that is not shaped like one.
type shapeError struct{ error }

func (e shapeError) Unwrap() []error { return []error{e.error, errNotARequest} }

// IsRunRequestShaped reports whether err, from ParseRunRequest, is about a
// message that is a run request with a wrong value, rather than text that
// is no run request at all.
func IsRunRequestShaped(err error) bool {
	return errors.Is(err, ErrInvalidRunRequest) && !errors.Is(err, errNotARequest)
}

func yamlMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
