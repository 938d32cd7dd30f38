package repository

import (
	"errors"
	"fmt"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/policy"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNewestHeads: where the forge will not say which pull requests are
// open, the highest-numbered head refs of either forge's kind are
// validated, by their commit.
func TestNewestHeads(t *testing.T) {
	refs := gitsource.RefSet{
		"refs/pull/1/head":            at(sha("1")),
		"refs/pull/12/head":           {SHA: sha("a"), Peeled: sha("c")}, // an annotated tag as head: its commit
		"refs/pull/9/head":            at(sha("9")),
		"refs/merge-requests/9/head":  at(sha("8")),
		"refs/pull/13/merge":          at(sha("d")),
		"refs/pull/x/head":            at(sha("e")),
		"refs/heads/main":             at(sha("f")),
		"refs/pull/100/head/extra":    at(sha("b")),
		"refs/merge-requests/2/head":  at(sha("2")),
		"refs/merge-requests/10/head": at(sha("0")),
	}
	cases := map[string]struct {
		n    int
		want map[string]string
	}{
		"the newest one": {n: 1, want: map[string]string{"refs/pull/12/head": sha("c")}},
		"a tie in number is broken by name": {n: 3, want: map[string]string{"refs/pull/12/head": sha("c"),
			"refs/merge-requests/10/head": sha("0"), "refs/merge-requests/9/head": sha("8")}},
		"more than there are: every head": {n: 50, want: map[string]string{"refs/pull/12/head": sha("c"), "refs/pull/9/head": sha("9"),
			"refs/pull/1/head": sha("1"), "refs/merge-requests/10/head": sha("0"), "refs/merge-requests/9/head": sha("8"),
			"refs/merge-requests/2/head": sha("2")}},
		"none asked": {n: 0, want: map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NewestHeads(refs, tc.n)); diff != "" {
				t.Errorf("NewestHeads (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(NewestHeads(refs, 50), pullHeads(refs)); diff != "" {
		t.Errorf("pullHeads differs from every newest head (-NewestHeads +pullHeads):\n%s", diff)
	}
}

// TestTheListingMemo: a forge listing is trusted while the spec, the
// validated heads and the head refs are as it was done for, for the same
// object, for fewer than PullListingRefresh intervals.
func TestTheListingMemo(t *testing.T) {
	heads := map[string]string{"refs/pull/1/head": sha("1"), "refs/pull/2/head": sha("2")}
	repo := research().RepositoryUID("u1").ValidatedHeads(sha("1")).Obj()
	interval := repo.Spec.Interval.Duration
	cases := map[string]struct {
		change func(repo *taugridv1.TauRepository, heads map[string]string) time.Duration // returns the time since
		forget bool
		listed bool
	}{
		"nothing changed": {listed: true},
		"nothing changed, just under the refresh": {change: func(*taugridv1.TauRepository, map[string]string) time.Duration {
			return PullListingRefresh*interval - time.Second
		}, listed: true},
		"nothing changed for PullListingRefresh intervals": {change: func(*taugridv1.TauRepository, map[string]string) time.Duration {
			return PullListingRefresh * interval
		}},
		"the spec changed": {change: func(r *taugridv1.TauRepository, _ map[string]string) time.Duration { r.Generation++; return 0 }},
		"another head was validated": {change: func(r *taugridv1.TauRepository, _ map[string]string) time.Duration {
			r.Status.ValidatedHeads = append(r.Status.ValidatedHeads, sha("2"))
			return 0
		}},
		"a head moved": {change: func(_ *taugridv1.TauRepository, h map[string]string) time.Duration {
			h["refs/pull/2/head"] = sha("3")
			return 0
		}},
		"a pull request was opened": {change: func(_ *taugridv1.TauRepository, h map[string]string) time.Duration {
			h["refs/pull/3/head"] = sha("3")
			return 0
		}},
		"the repository was recreated under its name": {change: func(r *taugridv1.TauRepository, _ map[string]string) time.Duration {
			r.UID = "u2"
			return 0
		}},
		"the listing was forgotten (a validation failed)": {forget: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &PullRequests{}
			r, h := repo.DeepCopy(), map[string]string{}
			for k, v := range heads {
				h[k] = v
			}
			p.remember(r, h, sharedtest.Now)
			var since time.Duration
			if tc.change != nil {
				since = tc.change(r, h)
			}
			if tc.forget {
				p.forget(client.ObjectKeyFromObject(r))
			}
			if got := p.listed(r, h, sharedtest.Now.Add(since)); got != tc.listed {
				t.Errorf("listed = %v, want %v", got, tc.listed)
			}
		})
	}
}

// TestDefaultBranch: main, else master.
func TestDefaultBranch(t *testing.T) {
	cases := map[string]struct {
		refs gitsource.RefSet
		want string // "" for none
	}{
		"main":            {refs: gitsource.RefSet{"refs/heads/main": at(c1)}, want: "refs/heads/main"},
		"master":          {refs: gitsource.RefSet{"refs/heads/master": at(c1)}, want: "refs/heads/master"},
		"both: main wins": {refs: gitsource.RefSet{"refs/heads/main": at(c1), "refs/heads/master": at(c2)}, want: "refs/heads/main"},
		"neither":         {refs: gitsource.RefSet{"refs/heads/trunk": at(c1)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ref, ok := defaultBranch(tc.refs)
			if got != tc.want || ok != (tc.want != "") || (ok && ref != tc.refs[tc.want]) {
				t.Errorf("defaultBranch = %q %v %v, want %q", got, ref, ok, tc.want)
			}
		})
	}
}

// TestChangedTauFiles: what a head adds or changes of tau.yaml and
// tau/*.yaml; removals and other files are not validated.
func TestChangedTauFiles(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	base := fstest.MapFS{"tau.yaml": file("a"), "tau/ray.yaml": file("r"), "tau/gone.yaml": file("g"), "train.py": file("p")}
	cases := map[string]struct {
		head fstest.MapFS
		want []string
	}{
		"the same files":     {head: fstest.MapFS{"tau.yaml": file("a"), "tau/ray.yaml": file("r"), "tau/gone.yaml": file("g")}},
		"tau.yaml changed":   {head: fstest.MapFS{"tau.yaml": file("b"), "tau/ray.yaml": file("r")}, want: []string{"tau.yaml"}},
		"a target added":     {head: fstest.MapFS{"tau.yaml": file("a"), "tau/new.yaml": file("n")}, want: []string{"tau/new.yaml"}},
		"only code changed":  {head: fstest.MapFS{"tau.yaml": file("a"), "train.py": file("q")}},
		"a nested file":      {head: fstest.MapFS{"tau/deep/x.yaml": file("x")}},
		"everything changed": {head: fstest.MapFS{"tau.yaml": file("b"), "tau/ray.yaml": file("s")}, want: []string{"tau.yaml", "tau/ray.yaml"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, changedTauFiles(tc.head, base)); diff != "" {
				t.Errorf("changedTauFiles (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPullRequestHelpers: the small decisions validation makes on the way.
func TestPullRequestHelpers(t *testing.T) {
	tau := map[string]bool{"tau.yaml": true, "tau/ray.yaml": true, "tau/x.yml": false, "tau/deep/x.yaml": false,
		"sub/tau.yaml": false, "train.py": false}
	for name, want := range tau {
		if got := isTauFile(name); got != want {
			t.Errorf("isTauFile(%q) = %v, want %v", name, got, want)
		}
	}
	sizes := map[int64]string{0: "0 KiB", 1023: "0 KiB", 10 << 10: "10 KiB", 1<<20 - 1: "1023 KiB", 1 << 20: "1 MiB", 300 << 20: "300 MiB"}
	for n, want := range sizes {
		if got := sizeOf(n); got != want {
			t.Errorf("sizeOf(%d) = %q, want %q", n, got, want)
		}
	}
	terminal := map[error]bool{
		fmt.Errorf("x: %w", policy.ErrTreeTooLarge): true, gitError(gitsource.ErrTooLarge): true, gitError(gitsource.ErrNotFound): true,
		gitError(gitsource.ErrRefMoved): true, gitError(gitsource.ErrCorrupt): true,
		gitError(gitsource.ErrUnreachable): false, gitError(gitsource.ErrAuth): false, errors.New("disk full"): false,
	}
	for err, want := range terminal {
		if got := headTerminal(err); got != want {
			t.Errorf("headTerminal(%v) = %v, want %v", err, got, want)
		}
	}
}
