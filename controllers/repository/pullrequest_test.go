package repository

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/policy"
)

// fakePoster records the statuses posted.
type fakePoster struct{ posted *[]forge.Status }

func (p fakePoster) Post(_ context.Context, s forge.Status) (forge.Posted, error) {
	*p.posted = append(*p.posted, s)
	return forge.Posted{}, nil
}

func (p fakePoster) Shows(context.Context, forge.Status) (forge.Posted, bool, error) {
	return forge.Posted{}, false, nil
}

// posted is a status as a test says it: commit, state, description.
type posted struct{ SHA, State, Description string }

// prWorld is a repository with a Gitea forge whose token may post statuses
// but not list pull requests (the Secret holds none: the newest head refs
// are validated), main at c1 with the example tau.yaml.
type prWorld struct {
	*repoWorld
	posts []forge.Status
}

func newPRWorld(t *testing.T) *prWorld {
	t.Helper()
	tau, err := os.ReadFile("../../examples/research/tau.yaml")
	if err != nil {
		t.Fatal(err)
	}
	repo := research().RepositoryUID("u1").Obj()
	repo.Spec.Forge = &taugridv1.Forge{Type: "gitea", APIURL: "https://git.example.com/api/v1", SecretRef: taugridv1.LocalObjectReference{Name: "forge"}}
	w := &prWorld{repoWorld: newRepoWorld(t, nil, repo, secret("forge", map[string]string{"user": "tau"}))}
	w.r.PullRequests = &PullRequests{Client: w.c, Git: w.git, Policies: w.r.Policies,
		Posters: &forge.Posters{Reader: w.c, Clock: sharedtest.Clock(), NewPoster: func(forge.Config) (forge.StatusPoster, error) {
			return fakePoster{posted: &w.posts}, nil
		}}}
	w.git.commit(c1, "", map[string]string{"tau.yaml": string(tau), "train.py": "print(1)"})
	w.git.refs["refs/heads/main"] = at(c1)
	return w
}

// head pushes pull request n's head at a commit of main's files changed
// by files.
func (w *prWorld) head(n string, commit string, files map[string]string) {
	tree := map[string]string{}
	for k, v := range w.git.trees[c1] {
		tree[k] = v
	}
	for k, v := range files {
		tree[k] = v
	}
	w.git.commit(commit, c1, tree)
	w.git.refs["refs/pull/"+n+"/head"] = at(commit)
}

// statuses are the statuses posted since the last call; each must be a
// tau/validate status on team-a/research.
func (w *prWorld) statuses(t *testing.T) []posted {
	t.Helper()
	var out []posted
	for _, s := range w.posts {
		if s.Context != ValidateContext || s.Owner != "team-a" || s.Repo != "research" {
			t.Errorf("a status of context %q on %s/%s, want %s on team-a/research", s.Context, s.Owner, s.Repo, ValidateContext)
		}
		out = append(out, posted{s.SHA, string(s.State), s.Description})
	}
	w.posts = nil
	return out
}

// TestValidatingPullRequests: each open pull request's head is validated
// once and gets a tau/validate status saying what its tau files are
// worth; a head that changes none gets none; a head that cannot be read
// for a reason of its own says so. An unchanged listing is not redone.
func TestValidatingPullRequests(t *testing.T) {
	w := newPRWorld(t)
	tau := w.git.trees[c1]["tau.yaml"]
	w.head("1", sha("a1"), map[string]string{"tau.yaml": strings.Replace(tau, `"--epochs", "2"`, `"--epochs", "3"`, 1)})
	w.head("2", sha("a2"), map[string]string{"train.py": "print(2)"})
	w.head("3", sha("a3"), map[string]string{"tau.yaml": "schema_version: 1\nname: [\n"})
	w.head("4", sha("a4"), map[string]string{"tau/bad.yaml": tau + "no_such_field: 1\n"})
	w.head("5", sha("a5"), nil)
	w.git.archiveErr[sha("a5")] = gitError(gitsource.ErrNotFound)
	w.head("6", sha("a6"), nil)
	w.git.sizes[sha("a6")] = 300 << 20
	w.mustReconcile(t)

	got := w.statuses(t)
	want := []posted{
		{sha("a1"), "success", "tau.yaml valid under the platform policy"},
		{sha("a3"), "failure", "tau.yaml:3:1: invalid YAML: did not find expected node content"},
		{sha("a4"), "failure", "tau/bad.yaml:25:1: no_such_field: unknown field"}, // and what the fields are, shortened
		{sha("a5"), "error", "not validated: git list " + repoURL + ": not found"},
		{sha("a6"), "error", "not validated: " + policy.ErrTreeTooLarge.Error() + ": its source archive is 300 MiB, over the 256 MiB pull requests are validated up to"},
	}
	for i := range got {
		if i < len(want) && strings.HasPrefix(got[i].Description, want[i].Description) {
			got[i].Description = want[i].Description
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses posted (-want +got):\n%s", diff)
	}
	wantValidated := []string{sha("a1"), sha("a2"), sha("a3"), sha("a4"), sha("a5"), sha("a6")}
	if diff := cmp.Diff(wantValidated, w.repo(t).Status.ValidatedHeads); diff != "" {
		t.Errorf("validatedHeads (-want +got):\n%s", diff)
	}

	archives := len(w.git.archives)
	w.mustReconcile(t)
	if n := len(w.git.archives) - archives; n != 0 {
		t.Errorf("an unchanged listing archived %d heads again", n)
	}
	if s := w.statuses(t); len(s) > 0 {
		t.Errorf("an unchanged listing posted %v again", s)
	}
	if evs := w.drain(); len(evs) > 0 {
		t.Errorf("events %q, want none", evs)
	}
}

// TestAPullRequestThatCannotBeValidatedNowIsRetried: a head whose archive
// failed for a passing reason gets no status and is not recorded; the
// poll warns, forgets its listing, and the next poll validates it.
func TestAPullRequestThatCannotBeValidatedNowIsRetried(t *testing.T) {
	w := newPRWorld(t)
	w.head("1", sha("a1"), map[string]string{"tau.yaml": w.git.trees[c1]["tau.yaml"] + "\n# tuned\n"})
	w.git.archiveErr[sha("a1")] = gitError(gitsource.ErrUnreachable)
	w.mustReconcile(t)
	if s := w.statuses(t); len(s) > 0 {
		t.Errorf("posted %v for a head not read", s)
	}
	if v := w.repo(t).Status.ValidatedHeads; v != nil {
		t.Errorf("validatedHeads = %v, want none", v)
	}
	if diff := cmp.Diff([]string{"Warning PullRequestValidationFailed"}, reasons(w.drain())); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Ready=True/Polled"}, conditions(w.repo(t))); diff != "" {
		t.Errorf("conditions: a pull request must not fail the poll (-want +got):\n%s", diff)
	}
	delete(w.git.archiveErr, sha("a1"))
	w.mustReconcile(t)
	if diff := cmp.Diff([]posted{{sha("a1"), "success", "tau.yaml valid under the platform policy"}}, w.statuses(t)); diff != "" {
		t.Errorf("statuses on the retry (-want +got):\n%s", diff)
	}
}

// TestPullRequestsWithNothingToValidate: no default branch, or no pull
// request heads, asks neither git for archives nor the forge.
func TestPullRequestsWithNothingToValidate(t *testing.T) {
	cases := map[string]func(w *prWorld){
		"no pull request heads: validatedHeads cleared": func(w *prWorld) {},
		"no main nor master branch": func(w *prWorld) {
			w.head("1", sha("a1"), map[string]string{"tau.yaml": "x"})
			w.git.refs["refs/heads/trunk"] = w.git.refs["refs/heads/main"]
			delete(w.git.refs, "refs/heads/main")
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			w := newPRWorld(t)
			repo := w.repo(t)
			repo.Status.ValidatedHeads = []string{sha("0")}
			if err := w.c.Status().Update(context.Background(), repo); err != nil {
				t.Fatal(err)
			}
			setup(w)
			w.mustReconcile(t)
			if len(w.git.archives) > 0 || len(w.statuses(t)) > 0 {
				t.Errorf("archived %v, posted statuses; want nothing done", w.git.archives)
			}
			got := w.repo(t).Status.ValidatedHeads
			if _, noMain := w.git.refs["refs/heads/trunk"]; noMain != (got != nil) {
				t.Errorf("validatedHeads = %v", got)
			}
		})
	}
}
