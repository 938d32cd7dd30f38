package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/api/runname"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
)

// runRequestSeeds are tag messages at the edges of what the parser
// accepts, plus the parser's own fuzz corpus.
func runRequestSeeds(t testing.TB) []string {
	seeds := []string{
		"", "target: default\n", "target: ray\noverrides: {compute.gpus: \"2\"}\nrequester: alice@example.com\n",
		"target: exp.v2\n", "target: Exp_V2\n", "target: exp_v2\n", "target: -x\n", "target: x-\n", "target: \"1\"\n",
		"target: " + strings.Repeat("t", 63) + "\n", "target: " + strings.Repeat("t", 64) + "\n",
		"requester: \"" + strings.Repeat("é", 2000) + "\"\n", "requester: \"\\xff\\u0000\"\n",
		"overrides: {\"" + strings.Repeat("a", 300) + "\": \"" + strings.Repeat("v", 10000) + "\"}\n",
		"overrides:\n" + strings.Repeat("  a.b: 1\n", 1),
		manyOverrides(256), manyOverrides(257),
		"target: &t ray\nrequester: *t\n", "target: 007\n", "target: 0x1F\n", "target: null\n", "target: ~\n",
	}
	files, _ := filepath.Glob("../../gitsource/testdata/fuzz/FuzzParseRunRequest/*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, lit, _ := strings.Cut(string(b), "\nstring(")
		if s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(lit), ")")); err == nil {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

func manyOverrides(n int) string {
	var b strings.Builder
	b.WriteString("overrides:\n")
	for i := range n {
		b.WriteString("  f" + strconv.Itoa(i) + ".x: " + strconv.Itoa(i) + "\n")
	}
	return b.String()
}

// requestedRun is the TauRun the repository reconciler makes of a run ref
// carrying msg, or nil when the parser refuses msg.
func requestedRun(msg string) *taugridv1.TauRun {
	req, err := gitsource.ParseRunRequest(msg)
	if err != nil {
		return nil
	}
	repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: "research", Namespace: "default"}}
	return repoctrl.NewRun(repo, gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/r-20261130-101500-3f9a2c",
		Commit: strings.Repeat("c", 40), Target: req.Target, Overrides: req.Overrides, Requester: req.Requester})
}

// checkLocalRules: what the CRD checks, checked without a server.
func checkLocalRules(t *testing.T, msg string, run *taugridv1.TauRun) {
	t.Helper()
	if err := runname.ValidateRunName(run.Name); err != nil {
		t.Fatalf("%q: %v", msg, err)
	}
	if err := runname.ValidateTarget(run.Spec.Target); err != nil {
		t.Fatalf("%q: %v", msg, err)
	}
	for k, v := range run.Labels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			t.Fatalf("%q: label %s=%s: %v", msg, k, v, errs)
		}
	}
}

// Every run request the parser accepts yields a TauRun the API server
// accepts: the local rules always, and with the control plane up, a
// dry-run create on the real API server with the real CRD.
func FuzzRunRequestsTheParserAcceptsMakeTauRunsTheAPIServerAccepts(f *testing.F) {
	for _, s := range runRequestSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		run := requestedRun(msg)
		if run == nil {
			return
		}
		checkLocalRules(t, msg, run)
		if k8s == nil {
			return // -short: no API server
		}
		if err := k8s.Create(context.Background(), run, client.DryRunAll); err != nil {
			t.Fatalf("the parser accepted %q, the API server refused its TauRun: %v", msg, err)
		}
	})
}

// The seeds include requests the parser must refuse (the ones the API
// server would): make sure the corpus exercises both sides.
func TestTheRunRequestCorpusHasBothSides(t *testing.T) {
	accepted, refused := 0, 0
	for _, s := range runRequestSeeds(t) {
		if requestedRun(s) != nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted < 10 || refused < 5 {
		t.Errorf("corpus: %d accepted, %d refused; want both sides covered", accepted, refused)
	}
}

// The CRD refuses what the shared rules refuse: a dotted or too long name,
// a dotted target.
func TestTheAPIServerRefusesWhatTheSharedRulesRefuse(t *testing.T) {
	integration(t)
	for name, mutate := range map[string]func(*taugridv1.TauRun){
		"a dotted name":   func(r *taugridv1.TauRun) { r.Name = "research-exp.v2-1234567890" },
		"a long name":     func(r *taugridv1.TauRun) { r.Name = strings.Repeat("r", 44) },
		"a dotted target": func(r *taugridv1.TauRun) { r.Spec.Target = "exp.v2" },
	} {
		run := requestedRun("")
		mutate(run)
		local := errors.Join(runname.ValidateRunName(run.Name), runname.ValidateTarget(run.Spec.Target))
		err := k8s.Create(context.Background(), run, client.DryRunAll)
		if err == nil || local == nil {
			t.Errorf("%s: API server %v, shared rules %v; want both to refuse", name, err, local)
		}
	}
}
