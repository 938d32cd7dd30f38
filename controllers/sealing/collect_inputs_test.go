package sealing

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestTheBundleHoldsWhatTheAttemptWasRenderedFrom(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	policy := []string{"policy/images.yaml", "policy/limits.yaml", "policy/priorities.yaml", "policy/profiles.yaml", "policy/security.yaml", "policy/tenants.yaml"}
	all := append(append([]string{"manifests.yaml"}, policy...), "record.json", "render-inputs.json", "tau-file/tau.yaml")
	cases := map[string]struct {
		objs         []client.Object
		tau          string // the tau file served; "" the example's
		noTau        bool
		artifacts    []string
		policyCommit string
		notes        []string // each note's start
	}{
		"the tau file, the policy and the manifests at the commits recorded": {
			objs: []client.Object{researchRepo(), attemptJob(), attemptWorkload()}, artifacts: all, policyCommit: policyHead},
		"the Job's policy commit wins over the run's": {
			objs:      []client.Object{researchRepo(), attemptJob(), attemptWorkload(), sealingRun().PolicyAt("0000000000000000000000000000000000000000").Obj()},
			artifacts: all, policyCommit: policyHead},
		"the run's policy commit when the Job is gone": {
			objs: []client.Object{researchRepo()}, artifacts: all, policyCommit: policyHead,
			notes: []string{"workload r-1 is gone"}},
		"a policy commit that cannot be read: noted, nothing rendered": {
			objs:      []client.Object{researchRepo(), sealingRun().PolicyAt("0000000000000000000000000000000000000000").Obj()},
			artifacts: []string{"record.json"}, policyCommit: "0000000000000000000000000000000000000000",
			notes: []string{"workload r-1 is gone", "reading the policy at 0000000000000000000000000000000000000000: commit 0000000000000000000000000000000000000000: "}},
		"the repository gone: noted, no file read": {
			objs: []client.Object{attemptJob(), attemptWorkload()}, artifacts: []string{"record.json"}, policyCommit: policyHead,
			notes: []string{"repository research is gone"}},
		"a tau file gone from the commit: noted": {
			objs: []client.Object{researchRepo(), attemptJob(), attemptWorkload()}, noTau: true, artifacts: []string{"record.json"}, policyCommit: policyHead,
			notes: []string{"reading tau.yaml at " + commit + ": tau.yaml at " + commit + ": "}},
		"a tau file that no longer renders: noted, no file kept without its manifests": {
			objs: []client.Object{researchRepo(), attemptJob(), attemptWorkload()}, tau: "schema_version: 1\nname: x\n", artifacts: []string{"record.json"},
			policyCommit: policyHead, notes: []string{"rendering attempt 1 again: "}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := append([]client.Object{hfSecret()}, tc.objs...)
			if !slices.ContainsFunc(objs, func(o client.Object) bool { return o.GetName() == "r" }) {
				objs = append(objs, sealingRun().Obj())
			}
			w := newSealWorld(t, nil, objs...)
			files := w.e.Files.(*fakeFiles).files
			switch {
			case tc.noTau:
				delete(files, "tau.yaml")
			case tc.tau != "":
				files["tau.yaml"] = []byte(tc.tau)
			}
			if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
				t.Fatal(err)
			}
			m, rec, _ := w.bundle(t, 1)
			var names []string
			for _, a := range m.Artifacts {
				names = append(names, a.Name)
			}
			if d := cmp.Diff(tc.artifacts, names); d != "" {
				t.Errorf("artifacts (-want +got):\n%s", d)
			}
			if rec.Inputs.PolicyCommit != tc.policyCommit {
				t.Errorf("policy commit %q, want %q", rec.Inputs.PolicyCommit, tc.policyCommit)
			}
			notes := slices.DeleteFunc(slices.Clone(rec.Notes), func(n string) bool { return n == "no pod of attempt 1 is left to inspect" })
			if len(notes) != len(tc.notes) {
				t.Fatalf("notes %q, want %d starting %q", notes, len(tc.notes), tc.notes)
			}
			for i := range notes {
				if !strings.HasPrefix(notes[i], tc.notes[i]) {
					t.Errorf("note %q, want it to start %q", notes[i], tc.notes[i])
				}
			}
		})
	}
}

func TestTheBundleNamesTheRepositoryWithoutItsCredentials(t *testing.T) {
	w := newSealWorld(t, nil, researchRepo(), hfSecret(), sealingRun().Obj(), attemptJob())
	if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	_, rec, _ := w.bundle(t, 1)
	if want := "https://git.example.com/team-a/research.git"; rec.Run.RepositoryURL != want {
		t.Errorf("repository URL %q, want %q", rec.Run.RepositoryURL, want)
	}
	if files := w.storeHolds(t, "git-password-42"); len(files) > 0 {
		t.Errorf("the git password is stored in %q", files)
	}
}
