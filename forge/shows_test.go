package forge_test

import (
	"context"
	"testing"

	"github.com/taugrid/taugrid/forge"
)

// Each forge is asked for the latest status of one context on a commit:
// what was posted last shows, an earlier state or another context does not.
func TestEachForgeSaysWhetherTheCommitShowsAStatus(t *testing.T) {
	for _, typ := range []forge.Type{forge.GitHub, forge.Gitea, forge.GitLab} {
		t.Run(string(typ), func(t *testing.T) {
			p, srv := newPoster(t, typ, token, nil)
			ctx := context.Background()
			other := status(forge.StatePending)
			other.Context = "tau/default r2"
			for _, s := range []forge.Status{status(forge.StatePending), status(forge.StateRunning), other} {
				if _, err := p.Post(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			cases := map[string]struct {
				s    forge.Status
				want bool
			}{
				"the last state posted":        {s: status(forge.StateRunning), want: true},
				"a state not yet posted":       {s: status(forge.StateSuccess), want: false},
				"another context's status":     {s: other, want: true},
				"a context with no status yet": {s: forge.Status{Owner: "team-a", Repo: "research", SHA: sha, Context: "tau/default r3", State: forge.StatePending}, want: false},
			}
			for name, tc := range cases {
				_, got, err := p.Shows(ctx, tc.s)
				if err != nil || got != tc.want {
					t.Errorf("%s: shows %v, %v; want %v", name, got, err, tc.want)
				}
			}
			if n := srv.Reads(); n != len(cases) {
				t.Errorf("%d reads for %d questions", n, len(cases))
			}
		})
	}
}
