package sealing

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/evidence"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestTheEvidencePageReadsTheLiveRun(t *testing.T) {
	cases := map[string]struct {
		objs    []client.Object
		run     string // "": no live run
		repoURL string
	}{
		"a live run, its repository's URL without credentials": {
			objs: []client.Object{researchRepo(), sealingRun().Obj()}, run: "r", repoURL: "https://git.example.com/team-a/research.git"},
		"a live run whose repository is gone": {
			objs: []client.Object{sealingRun().Obj()}, run: "r"},
		"a run gone: no live run, no error": {
			objs: []client.Object{researchRepo()}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live, err := (&EvidenceRuns{Client: sharedtest.NewClient(tc.objs...)}).LiveRun(context.Background(), ns, "r")
			if err != nil {
				t.Fatal(err)
			}
			var got [2]string
			if live != nil {
				got = [2]string{live.Run.Name, live.RepositoryURL}
			}
			if d := cmp.Diff([2]string{tc.run, tc.repoURL}, got); d != "" {
				t.Errorf("live run, repository URL (-want +got):\n%s", d)
			}
		})
	}
}

func TestTheEvidenceLinkKeyIsCreatedOnceAndKept(t *testing.T) {
	ctx := context.Background()
	c := sharedtest.NewClient(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "short", Namespace: "taugrid-system"},
		Data: map[string][]byte{EvidenceKeyField: []byte("weak")}})
	first, err := EvidenceLinkKey(ctx, c, "taugrid-system", "link-key")
	if err != nil || len(first) < evidence.MinKeyBytes {
		t.Fatalf("first start: %d bytes, %v", len(first), err)
	}
	stored := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "taugrid-system", Name: "link-key"}, stored); err != nil || !bytes.Equal(stored.Data[EvidenceKeyField], first) {
		t.Errorf("the Secret holds %d bytes (%v), not the key returned", len(stored.Data[EvidenceKeyField]), err)
	}
	if again, err := EvidenceLinkKey(ctx, c, "taugrid-system", "link-key"); err != nil || !bytes.Equal(first, again) {
		t.Errorf("a restart read another key (%v): links signed before it would stop opening", err)
	}
	if _, err := EvidenceLinkKey(ctx, c, "taugrid-system", "short"); err == nil || strings.Contains(err.Error(), "weak") {
		t.Errorf("a 4-byte key: %v, want it refused without showing it", err)
	}
}

func TestPruningAppliesTheRetentionAtStart(t *testing.T) {
	cases := map[string]struct {
		retention evidence.Retention
		want      []string
	}{
		"no retention keeps every bundle": {want: []string{"bundles/team-a/r/1.json", "bundles/team-a/r/2.json"}},
		"last=1 keeps the newest":         {retention: evidence.Retention{KeepLast: 1}, want: []string{"bundles/team-a/r/2.json"}},
		"30 days drops the older":         {retention: evidence.Retention{MaxAge: 30 * 24 * time.Hour}, want: []string{"bundles/team-a/r/2.json"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newSealWorld(t, nil)
			for n, age := range map[int]time.Duration{1: 40 * 24 * time.Hour, 2: time.Hour} {
				sealedBefore(t, w.store, n)
				at := sharedtest.Now.Add(-age)
				if err := os.Chtimes(w.store.Root+"/"+evidence.Key{Namespace: ns, Run: "r", Attempt: n}.Path(), at, at); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // Start prunes once, then sees the end
			p := &PruneEvidence{Store: w.store, Retention: tc.retention, Interval: time.Hour, Clock: sharedtest.Clock()}
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, w.sealed(t)); d != "" {
				t.Errorf("bundles kept (-want +got):\n%s", d)
			}
		})
	}
}
