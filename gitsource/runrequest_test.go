package gitsource

import (
	"errors"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/api/runname"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseRunRequest(t *testing.T) {
	tests := map[string]struct {
		msg     string
		want    RunRequest
		wantErr string
	}{
		"what tau run writes": {
			msg:  "target: ray\noverrides: {compute.gpus: \"2\"}\nrequester: alice@example.com\n",
			want: RunRequest{Target: "ray", Overrides: map[string]string{"compute.gpus": "2"}, Requester: "alice@example.com"},
		},
		"an empty message is the default target": {
			msg:  "",
			want: RunRequest{Target: "default"},
		},
		"override values of any scalar type are kept as written": {
			msg:  "overrides:\n  compute.gpus: 4\n  resilience.retry: true\n  image: registry.example.com/x:1\n",
			want: RunRequest{Target: "default", Overrides: map[string]string{"compute.gpus": "4", "resilience.retry": "true", "image": "registry.example.com/x:1"}},
		},
		"null overrides are none": {
			msg:  "target: train\noverrides:\n",
			want: RunRequest{Target: "train"},
		},
		"a target that could escape tau/": {
			msg: "target: ../../etc/passwd\n", wantErr: `line 1: target: "../../etc/passwd" is not a target name`,
		},
		"a dotted target, which the API server would refuse": {
			msg: "target: exp.v2\n", wantErr: `line 1: target: "exp.v2" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/exp-v2.yaml?)`,
		},
		"an upper-case target with an underscore": {
			msg: "target: Exp_V2\n", wantErr: `"Exp_V2" is not a target name`,
		},
		"a target longer than a label": {
			msg: "target: " + strings.Repeat("a", 64) + "\n", wantErr: "want at most 63 characters",
		},
		"an unknown field, likely a typo": {
			msg: "target: ray\noverides: {a: 1}\n", wantErr: `line 2: unknown field "overides"`,
		},
		"an override that is a mapping": {
			msg: "overrides: {compute: {gpus: 2}}\n", wantErr: "line 1: overrides.compute: want a single value",
		},
		"an override key that is not a field path": {
			msg: "overrides: {\"a b\": 1}\n", wantErr: `"a b" is not a dotted field path`,
		},
		"a field given twice": {
			msg: "target: a\ntarget: b\n", wantErr: "line 2: target: given twice",
		},
		"not a mapping": {
			msg: "- target: ray\n", wantErr: "want a mapping",
		},
		"not YAML": {
			msg: "target: [ray\n", wantErr: "not YAML",
		},
		"an alias where a mapping belongs": {
			msg: "x: &a {b: 1}\n", wantErr: `unknown field "x"`,
		},
		"too long": {
			msg: "target: ray\n# " + strings.Repeat("x", 70<<10), wantErr: "over 64 KiB",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRunRequest(tc.msg)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidRunRequest) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrInvalidRunRequest saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// A run tag's message may be prose; only a message shaped like a run
// request with a wrong value is refused for a run tag.
func TestRunRequestShapedErrors(t *testing.T) {
	for msg, shaped := range map[string]bool{
		"target: exp.v2\n":               true,
		"overrides: {compute: {a: 1}}\n": true,
		"Release candidate 3\n":          false,
		"fixes: the lr schedule\n":       false,
		"- a list\n":                     false,
		"target: [x\n":                   false,
	} {
		_, err := ParseRunRequest(msg)
		if err == nil || IsRunRequestShaped(err) != shaped {
			t.Errorf("%q: err = %v, shaped = %v, want shaped %v", msg, err, IsRunRequestShaped(err), shaped)
		}
	}
}

// FuzzParseRunRequest: any tag message either parses into a request whose
// target maps to a file under tau/ (or tau.yaml) or fails as an invalid
// request. Nothing panics.
func FuzzParseRunRequest(f *testing.F) {
	for _, seed := range []string{
		"target: ray\noverrides: {compute.gpus: \"2\"}\nrequester: alice@example.com\n",
		"", "target: default\n", "overrides:\n  a.b: 1\n", "- x\n", "target: &a x\nrequester: *a\n",
		"a: &a [*a]\n", "target: \"\\u0000\"\n", "overrides: {a: [1,2]}\n",
		"target: exp.v2\n", "target: Exp_V2\n", "target: exp_v2\n", "target: -x\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		req, err := ParseRunRequest(msg)
		if err != nil {
			if !errors.Is(err, ErrInvalidRunRequest) {
				t.Fatalf("error %v is not ErrInvalidRunRequest", err)
			}
			return
		}
		if err := runname.ValidateTarget(req.Target); err != nil {
			t.Fatalf("accepted a target the CRD refuses: %v", err)
		}
		file := TargetFile(req.Target)
		if file != "tau.yaml" && (!strings.HasPrefix(file, "tau/") || strings.Count(file, "/") != 1 || strings.Contains(file, "..")) {
			t.Fatalf("target %q maps to %q, outside tau/", req.Target, file)
		}
		for k := range req.Overrides {
			if !overrideRe.MatchString(k) {
				t.Fatalf("override key %q", k)
			}
		}
	})
}
