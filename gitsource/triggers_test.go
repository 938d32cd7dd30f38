package gitsource

import (
	"strings"
	"testing"
)

// TestValidateRunRefPrefix: a run ref prefix names a namespace only those
// who may push write. From the attacker's side: refs/pull/ is written by
// anyone who opens a pull request; a bare refs/heads/ or refs/tags/ would
// make every branch or tag a run request.
func TestValidateRunRefPrefix(t *testing.T) {
	cases := map[string]string{ // prefix → a word of the error, "" for valid
		"refs/tau/runs/":          "",
		"refs/tau/":               "",
		"refs/heads/tau-runs/":    "",
		"refs/tags/runs/nightly/": "",
		"refs/pull/":              "pull request",
		"refs/merge-requests/":    "cannot push",
		"refs/notes/":             "cannot push",
		"refs/changes/":           "cannot push",
		"refs/remotes/origin/":    "cannot push",
		"refs/heads/":             "every branch",
		"refs/tags/":              "every tag",
		"refs/tau/runs":           "end with /",
		"tau/runs/":               "start with refs/",
		"refs//runs/":             "valid part",
		"refs/tau/../pull/":       "valid part",
		"refs/tau/.hidden/":       "valid part",
		"refs/tau/x.lock/":        "valid part",
		"refs/tau/a b/":           "valid part",
		"refs/tau/*/":             "valid part",
		"refs/tau/a\x00/":         "valid part",
	}
	for prefix, want := range cases {
		err := ValidateRunRefPrefix(prefix)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v, want valid", prefix, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want an error saying %q", prefix, err, want)
		case want != "" && !strings.Contains(err.Error(), "refs/tau/<dir>/"):
			t.Errorf("%q: %v: the error should say what is accepted", prefix, err)
		}
	}
	if err := (Triggers{RunRefPrefix: "refs/pull/"}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "runRefPrefix: ") {
		t.Errorf("Validate = %v, want a runRefPrefix error", err)
	}
}
