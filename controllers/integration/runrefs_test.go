package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/gitsource/gittest"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
)

// unrunOf decodes the fingerprints of the refs a repository's last poll
// saw that started no run.
func unrunOf(t testing.TB, repo *taugridv1.TauRepository) gitsource.Fingerprints {
	t.Helper()
	if repo.Status.RunRefs == nil {
		return nil
	}
	fps, err := gitsource.DecodeFingerprints(repo.Status.RunRefs.Unrun)
	if err != nil {
		t.Fatal(err)
	}
	return fps
}

// A repository with 20,000 run tags (5,000 annotated) already there when
// it is registered, a quarter year of a team's runs, registers and stays
// Ready with a TauRepository far under etcd's request limit, starts nothing
// for them, and starts a run for a tag pushed afterwards at the next poll,
// also after a controller restart.
func TestARepositoryWith20000RunTagsStaysReadyAndRunsANewTagAtTheNextPoll(t *testing.T) {
	f := newRunFixture(t, "rt20k", func(r *gitRepo) {
		head := strings.TrimSpace(r.git("-C", r.work, "rev-parse", "HEAD"))
		r.git("-C", r.work, "push", "--quiet", "origin", "main")
		bare := filepath.Join(gitRoot, strings.TrimPrefix(r.URL, gitServer.URL+"/"))
		if err := gittest.AddRunTags(r.env, bare, head, "sweep", 20_000, 5_000); err != nil {
			t.Fatal(err)
		}
	})
	repo := f.get(t)
	if !apimeta.IsStatusConditionTrue(repo.Status.Conditions, taugridv1.ConditionReady) {
		t.Fatalf("not Ready: %+v", repo.Status.Conditions)
	}
	if l := repo.Status.RunRefs; l == nil || l.Count != 20_000 || len(unrunOf(t, repo)) != 20_000 {
		t.Errorf("runRefs = %v, want 20,000 run tags recorded as unrun", l != nil)
	}
	const limit = 256 << 10
	size := objectSize(t, repo)
	if size > limit {
		t.Errorf("the TauRepository takes %d bytes, want at most %d", size, limit)
	}
	t.Logf("the TauRepository of 20,000 run tags takes %d bytes", size)
	if n := len(f.listRuns(t)); n != 0 {
		t.Fatalf("%d runs for tags already there, want none", n)
	}

	f.research.tag("run/after")
	res, err := f.repos.Reconcile(context.Background(), requestFor(f.repo))
	if err != nil {
		t.Fatal(err)
	}
	if iv := f.repo.Spec.Interval.Duration; res.RequeueAfter > iv+iv/10 {
		t.Errorf("next poll in %s, want within the interval %s and its jitter", res.RequeueAfter, iv)
	}
	if r := f.runOf(t, "refs/tags/run/after"); r.Annotations[repoctrl.AnnotationRefObject] != r.Spec.Commit {
		t.Errorf("the new tag's run records object %q, want its commit %s", r.Annotations[repoctrl.AnnotationRefObject], r.Spec.Commit)
	}

	// A restarted controller (a new reconciler, nothing in memory) sees an
	// unchanged listing: no run, no write.
	before := f.get(t)
	restarted := *f.repos
	if _, err := restarted.Reconcile(context.Background(), requestFor(f.repo)); err != nil {
		t.Fatal(err)
	}
	if after := f.get(t); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("an idle poll of 20,000 refs rewrote the status: %s", cmp.Diff(before.Status, after.Status))
	}
	f.research.deleteRemoteTag("run/sweep-00042") // an annotated one
	f.research.tag("run/after-2")
	f.poll(t)
	if n := len(f.listRuns(t)); n != 2 {
		t.Errorf("%d runs after one more tag and a deleted one, want 2", n)
	}
	if l := f.get(t).Status.RunRefs; l == nil || l.Count != 20_001 {
		t.Errorf("runRefs count = %v, want 20,001", l)
	}
}

// objectSize is the size of obj as the API server stores it (JSON).
func objectSize(t testing.TB, obj any) int {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}
