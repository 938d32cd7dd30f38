package gitsource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Forge is the kind of git host that sends webhooks.
type Forge string

// The forges whose webhooks are understood. Forgejo speaks Gitea's format.
const (
	ForgeGitHub Forge = "github"
	ForgeGitLab Forge = "gitlab"
	ForgeGitea  Forge = "gitea"
)

// ErrBadPayload: a signed webhook body that is not the event it claims.
var ErrBadPayload = errors.New("malformed webhook payload")

// PushEvent is what a push, tag push, create or delete webhook says. It
// only decides whether to nudge: the poll that follows re-reads the refs
// from git, never trusting the payload.
type PushEvent struct {
	// Ref is the full ref name, e.g. refs/tags/run/x.
	Ref string
	// Before and After are the old and new SHAs; After is all zeros when
	// the ref was deleted. Empty for create and delete events.
	Before, After string
	// Repository is the repository's clone URL as the forge names it.
	Repository string
}

const zeroSHA = "0000000000000000000000000000000000000000"

// Deleted reports whether the event deletes its ref.
func (e PushEvent) Deleted() bool { return e.After == zeroSHA }

// ParseWebhook reads the body of a forge event. handled is false for
// events that never change refs (ping, issues, ...), which are ignored.
// Errors match ErrBadPayload.
func ParseWebhook(forge Forge, event string, body []byte) (ev PushEvent, handled bool, err error) {
	kind, ok := eventKind(forge, event)
	if !ok {
		return PushEvent{}, false, nil
	}
	switch kind {
	case "push":
		ev, err = parsePush(body)
	case "ref":
		ev, err = parseRefEvent(forge, body)
	case "pull":
		ev, err = parsePullRequest(forge, body)
	}
	if err != nil {
		return PushEvent{}, true, err
	}
	return ev, true, nil
}

// eventKind maps a forge's event name to the payload shape: "push" for
// push and tag push, "ref" for create and delete.
func eventKind(forge Forge, event string) (string, bool) {
	switch forge {
	case ForgeGitHub, ForgeGitea:
		switch event {
		case "push":
			return "push", true
		case "create", "delete":
			return "ref", true
		case "pull_request":
			return "pull", true
		}
	case ForgeGitLab:
		switch event {
		case "Push Hook", "Tag Push Hook":
			return "push", true
		case "Merge Request Hook":
			return "pull", true
		}
	}
	return "", false
}

type pushPayload struct {
	Ref        *string `json:"ref"`
	Before     string  `json:"before"`
	After      string  `json:"after"`
	Repository *struct {
		CloneURL string `json:"clone_url"`    // GitHub, Gitea
		HTTPURL  string `json:"git_http_url"` // GitLab
	} `json:"repository"`
	Project *struct {
		HTTPURL string `json:"git_http_url"` // GitLab
	} `json:"project"`
}

func parsePush(body []byte) (PushEvent, error) {
	var p pushPayload
	if err := decodeStrict(body, &p); err != nil {
		return PushEvent{}, err
	}
	if p.Ref == nil || !validRef(*p.Ref) {
		return PushEvent{}, fmt.Errorf("%w: push without a valid ref", ErrBadPayload)
	}
	for _, sha := range []string{p.Before, p.After} {
		if sha != "" && !shaRe.MatchString(sha) {
			return PushEvent{}, fmt.Errorf("%w: %q is not a SHA", ErrBadPayload, truncate(sha, 64))
		}
	}
	ev := PushEvent{Ref: *p.Ref, Before: p.Before, After: p.After}
	switch {
	case p.Project != nil && p.Project.HTTPURL != "":
		ev.Repository = p.Project.HTTPURL
	case p.Repository != nil && p.Repository.CloneURL != "":
		ev.Repository = p.Repository.CloneURL
	case p.Repository != nil:
		ev.Repository = p.Repository.HTTPURL
	}
	return ev, nil
}

type pullPayload struct {
	Number      int `json:"number"` // GitHub, Gitea
	PullRequest *struct {
		Head struct {
			SHA string `json:"sha"`
		} `json:"head"`
	} `json:"pull_request"`
	ObjectAttributes *struct { // GitLab
		IID        int `json:"iid"`
		LastCommit struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

// parsePullRequest reads a pull (merge) request event as a push to its head
// ref, refs/pull/<n>/head or refs/merge-requests/<n>/head, so the nudge
// makes the poll validate it.
func parsePullRequest(forge Forge, body []byte) (PushEvent, error) {
	var p pullPayload
	if err := decodeStrict(body, &p); err != nil {
		return PushEvent{}, err
	}
	var ev PushEvent
	switch {
	case forge == ForgeGitLab && p.ObjectAttributes != nil && p.ObjectAttributes.IID > 0:
		ev = PushEvent{Ref: fmt.Sprintf("refs/merge-requests/%d/head", p.ObjectAttributes.IID), After: p.ObjectAttributes.LastCommit.ID}
	case forge != ForgeGitLab && p.Number > 0 && p.PullRequest != nil:
		ev = PushEvent{Ref: fmt.Sprintf("refs/pull/%d/head", p.Number), After: p.PullRequest.Head.SHA}
	default:
		return PushEvent{}, fmt.Errorf("%w: %s pull request event without a number", ErrBadPayload, forge)
	}
	if ev.After != "" && !shaRe.MatchString(ev.After) {
		return PushEvent{}, fmt.Errorf("%w: %q is not a SHA", ErrBadPayload, truncate(ev.After, 64))
	}
	return ev, nil
}

type refPayload struct {
	Ref     *string `json:"ref"`
	RefType string  `json:"ref_type"`
}

// parseRefEvent reads a create or delete event, whose ref is short
// ("run/x") with its type beside it.
func parseRefEvent(forge Forge, body []byte) (PushEvent, error) {
	var p refPayload
	if err := decodeStrict(body, &p); err != nil {
		return PushEvent{}, err
	}
	if p.Ref == nil || *p.Ref == "" {
		return PushEvent{}, fmt.Errorf("%w: %s event without a ref", ErrBadPayload, forge)
	}
	ref := *p.Ref
	switch p.RefType {
	case "tag":
		ref = "refs/tags/" + strings.TrimPrefix(ref, "refs/tags/")
	case "branch":
		ref = "refs/heads/" + strings.TrimPrefix(ref, "refs/heads/")
	default:
		return PushEvent{}, fmt.Errorf("%w: unknown ref_type %q", ErrBadPayload, truncate(p.RefType, 32))
	}
	if !validRef(ref) {
		return PushEvent{}, fmt.Errorf("%w: %q is not a ref name", ErrBadPayload, truncate(ref, 256))
	}
	return PushEvent{Ref: ref}, nil
}

// decodeStrict decodes one JSON object, refusing trailing data and
// numbers or nesting that would make the decoder work hard.
func decodeStrict(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrBadPayload)
	}
	if depth(trimmed) > 64 {
		return fmt.Errorf("%w: nested too deeply", ErrBadPayload)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s", ErrBadPayload, jsonMessage(err))
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the JSON object", ErrBadPayload)
	}
	return nil
}

// depth is the deepest nesting of JSON brackets, ignoring strings.
func depth(b []byte) int {
	d, most, inStr, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}

func jsonMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %s has the wrong type", truncate(te.Field, 64))
	}
	return "invalid JSON"
}

// validRef is a loose check of git's ref name rules: enough to refuse
// garbage, not to be git's check-ref-format.
func validRef(r string) bool {
	if !strings.HasPrefix(r, "refs/") || len(r) > 1024 || strings.Contains(r, "..") ||
		strings.HasSuffix(r, "/") || strings.HasSuffix(r, ".lock") {
		return false
	}
	for _, c := range r {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
