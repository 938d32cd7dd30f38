package integration

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/render"

	"github.com/taugrid/taugrid/controllers/forgestatus"
)

func TestACheckRunFollowsOneRunAndSurvivesARestart(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv := forgetest.New(forge.GitHub, forgeToken)
	t.Cleanup(srv.Close)
	srv.App = &forgetest.App{ID: 42, InstallationID: 7, Key: &key.PublicKey}
	f := newForgeFixtureOn(t, "fs3", srv, map[string][]byte{forge.SecretAppID: []byte("42"), forge.SecretInstallationID: []byte("7"),
		forge.SecretPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})}, true)
	f.r.Posters.AppTokens = &forge.AppTokens{Clock: f.clock}
	f.research.tag("run/checked")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/checked")

	f.mustReconcileForge(t, run.Name)
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	f.clock.Step(forgestatus.ProgressInterval)
	f.mustReconcileForge(t, run.Name)
	tokens := f.r.Posters.AppTokens
	f.r = f.reconciler() // a restart: the check run's ID comes from the status
	f.r.Posters.AppTokens = tokens
	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))
	f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)
	f.mustReconcileForge(t, run.Name)
	f.mustReconcileForge(t, run.Name)

	want := []string{"queued: accepted: preparing the run", "in_progress: admitted in runs: starting", "success: succeeded"}
	if diff := cmp.Diff(want, f.posted()); diff != "" {
		t.Errorf("check run updates (-want +got):\n%s", diff)
	}
	calls := srv.Accepted()
	for _, c := range calls {
		if c.CheckRunID != calls[0].CheckRunID || c.CheckRunID == 0 {
			t.Errorf("call %+v, want every update on check run %d", c, calls[0].CheckRunID)
		}
	}
	if srv.App.Minted != 1 {
		t.Errorf("%d installation tokens minted, want 1", srv.App.Minted)
	}
	f.noTokenIn(t, run.Name)
}
