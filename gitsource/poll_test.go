package gitsource

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// poller polls one repository the way the reconciler will, keeping the
// observed refs between polls.
type poller struct {
	t        *testing.T
	client   *Client
	remote   Remote
	triggers Triggers
	prev     RefSet
}

func newPoller(t *testing.T, r *repo, tr Triggers) *poller {
	client, _ := newClient(t)
	p := &poller{t: t, client: client, remote: r.remote(), triggers: tr}
	refs, err := client.ListRefs(ctxT(t), p.remote)
	if err != nil {
		t.Fatal(err)
	}
	p.prev = tr.Baseline(refs)
	return p
}

// poll returns the events since the last poll, ignoring the tag object
// SHAs (checked elsewhere).
func (p *poller) poll() []Event {
	p.t.Helper()
	res, err := p.client.Poll(ctxT(p.t), p.remote, p.prev, p.triggers)
	if err != nil {
		p.t.Fatal(err)
	}
	if len(res.Problems) > 0 {
		p.t.Fatalf("problems: %+v", res.Problems)
	}
	p.prev = res.Refs
	for i := range res.Events {
		res.Events[i].Tag = ""
	}
	return res.Events
}

func (p *poller) expect(step string, want ...Event) {
	p.t.Helper()
	if diff := cmp.Diff(want, p.poll(), cmpopts.EquateEmpty()); diff != "" {
		p.t.Errorf("%s: events (-want +got):\n%s", step, diff)
	}
}

const alice = "Alice <alice@example.com>"

func TestPollTurnsPushesIntoRunRequests(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("research")
	c1 := r.write("tau.yaml", "name: a\n", "train.py", "print(1)\n").commit("first")
	r.push("main")
	p := newPoller(t, r, Triggers{Branches: []string{"main"}})
	p.expect("nothing pushed yet")

	r.git("tag", "run/light")
	r.git("tag", "-a", "-m", "first experiment", "run/annotated")
	r.push("run/light", "run/annotated")
	p.expect("a lightweight and an annotated run tag",
		Event{Kind: KindRunTag, Ref: "refs/tags/run/annotated", Commit: c1, Target: "default", Tagger: alice, Requester: "alice@example.com"},
		Event{Kind: KindRunTag, Ref: "refs/tags/run/light", Commit: c1, Target: "default"},
	)

	r.git("tag", "-a", "-m", "target: ray\noverrides: {compute.gpus: \"2\"}\nrequester: carol@example.com", "r-1")
	r.git("tag", "-a", "-m", "target: ray", "r-2")
	r.push("refs/tags/r-1:refs/tau/runs/r-1", "refs/tags/r-2:refs/tau/runs/r-2")
	p.expect("two run refs on one commit are two runs",
		Event{Kind: KindRunRef, Ref: "refs/tau/runs/r-1", Commit: c1, Target: "ray", Tagger: alice,
			Requester: "carol@example.com", Overrides: map[string]string{"compute.gpus": "2"}},
		Event{Kind: KindRunRef, Ref: "refs/tau/runs/r-2", Commit: c1, Target: "ray", Tagger: alice, Requester: "alice@example.com"},
	)

	r.push(":refs/tags/run/light", ":refs/tau/runs/r-1")
	p.expect("deleted run refs and tags cancel",
		Event{Kind: KindCancel, Ref: "refs/tags/run/light", Commit: c1},
		Event{Kind: KindCancel, Ref: "refs/tau/runs/r-1", Commit: c1},
	)

	r.write("train.py", "print(2)\n").commit("code only")
	r.push("main")
	p.expect("a commit that changes no tau file")

	c3 := r.write("tau.yaml", "name: b\n").commit("tau change")
	r.write("README", "docs\n").commit("docs")
	c5 := r.write("tau/eval.yaml", "name: e\n").commit("new target")
	r.write("README", "more docs\n").commit("docs again")
	r.push("main")
	p.expect("several commits: one run, for the newest tau change",
		Event{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: c5, Target: "eval", Requester: "alice@example.com"},
	)

	r.git("reset", "--hard", "--quiet", c3)
	c6 := r.write("tau/ray.yaml", "name: r\n").commit("rewritten")
	r.push("+main")
	p.expect("a force-push runs the new history only",
		Event{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: c6, Target: "ray", Requester: "alice@example.com"},
	)

	r.git("reset", "--hard", "--quiet", c3)
	r.push("+main")
	p.expect("a force-push back to an older commit runs nothing")

	r.git("tag", "-f", "-a", "-m", "moved", "run/annotated", c3)
	r.push("+refs/tags/run/annotated")
	p.expect("a moved run tag cancels the old and runs the new",
		Event{Kind: KindCancel, Ref: "refs/tags/run/annotated", Commit: c1},
		Event{Kind: KindRunTag, Ref: "refs/tags/run/annotated", Commit: c3, Target: "default", Tagger: alice, Requester: "alice@example.com"},
	)
}

func TestPollReportsAMalformedRunRequestAsAProblem(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("research")
	c := r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	p := newPoller(t, r, Triggers{})
	r.git("tag", "-a", "-m", "target: [unclosed", "bad")
	r.push("refs/tags/bad:refs/tau/runs/bad")
	res, err := p.client.Poll(ctxT(t), p.remote, p.prev, p.triggers)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 0 || len(res.Problems) != 1 || res.Problems[0].Commit != c ||
		!strings.Contains(res.Problems[0].Err.Error(), "not YAML") {
		t.Fatalf("poll = %+v", res)
	}
}

func TestPollOfAnUnchangedRepositoryOnlyListsRefs(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("research")
	r.write("tau.yaml", "name: a\n").commit("first")
	r.git("tag", "-a", "-m", "x", "run/a")
	r.push("main", "run/a")
	p := newPoller(t, r, Triggers{Branches: []string{"main"}})
	p.prev = nil
	p.poll() // fetches the tag object and main's recent history once
	before := s.backend.Requests()
	for range 3 {
		p.expect("unchanged")
	}
	if got := s.backend.Requests() - before; got != 3 {
		t.Errorf("%d requests for 3 idle polls, want 3 ref listings", got)
	}
}

func TestPollOfTenThousandRunRefs(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("many")
	c := r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	const n = 10_000
	writePackedRefs(t, s.bare("many"), c, n)
	client, _ := newClient(t)
	start := time.Now()
	refs, err := client.ListRefs(ctxT(t), r.remote())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("listed %d refs in %v", len(refs), time.Since(start))
	if len(refs) != n+1 {
		t.Fatalf("%d refs, want %d", len(refs), n+1)
	}
	tr := Triggers{}
	d, err := Detect(nil, tr.Watched(refs), tr, newGraph())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Events) != n {
		t.Fatalf("%d events for %d new run refs", len(d.Events), n)
	}
	d, err = Detect(tr.Watched(refs), tr.Watched(refs), tr, newGraph())
	if err != nil || len(d.Events) != 0 {
		t.Fatalf("unchanged: %d events, %v", len(d.Events), err)
	}
}

// writePackedRefs adds n run refs at commit to a bare repository by writing
// its packed-refs file: fast, unlike n ref updates.
func writePackedRefs(t testing.TB, bare, commit string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	for i := range n {
		fmt.Fprintf(&b, "%s refs/tau/runs/r%05d\n", commit, i)
	}
	if err := os.WriteFile(filepath.Join(bare, "packed-refs"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPollFetchesNoBlobsFromAServerWithPartialClone(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("research")
	s.git(s.bare("research"), "config", "uploadpack.allowFilter", "true")
	r.write("tau.yaml", "name: a\n", "data.bin", randomText(32<<10)).commit("first")
	r.push("main")
	p := newPoller(t, r, Triggers{Branches: []string{"main"}})
	p.poll()
	r.git("tag", "-a", "-m", "target: default", "r-1")
	r.push("refs/tags/r-1:refs/tau/runs/r-1")
	c := r.write("tau.yaml", "name: b\n").commit("change")
	r.push("main")
	events := p.poll()
	if len(events) != 2 {
		t.Fatalf("events = %+v", events)
	}
	sess, err := p.client.open(p.remote)
	if err != nil {
		t.Fatal(err)
	}
	blob := r.git("rev-parse", c+":data.bin")
	has := sess.store.has(blob)
	sess.close()
	if has {
		t.Error("detection fetched blobs though the server filters them")
	}
	a, err := p.client.Archive(ctxT(t), p.remote, "refs/heads/main", c)
	if err != nil {
		t.Fatal(err)
	}
	if got := archiveFiles(t, a.Path)["tau.yaml"]; got != "name: b\n" {
		t.Errorf("tau.yaml in the archive = %q", got)
	}
	run := events[1] // refs/heads/main sorts first
	if got, err := p.client.ReadFile(ctxT(t), p.remote, run.Ref, run.Commit, "data.bin"); err != nil || len(got) != 32<<10 {
		t.Errorf("ReadFile after a filtered fetch: %d bytes, %v", len(got), err)
	}
}
