package forge_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	clocktesting "k8s.io/utils/clock/testing"
)

const installationToken = "ghs_installation-token-for-tests"

// newApp starts a GitHub server with an App installation and returns the
// App as a forge Secret would describe it.
func newApp(t *testing.T, lifetime time.Duration) (*forgetest.Server, forge.App) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv := forgetest.New(forge.GitHub, installationToken)
	srv.App = &forgetest.App{ID: 42, InstallationID: 7, Key: &key.PublicKey, TokenLifetime: lifetime}
	t.Cleanup(srv.Close)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return srv, forge.App{APIURL: srv.URL, AppID: 42, InstallationID: 7, PrivateKey: pemKey}
}

func TestACheckRunIsCreatedOnceAndUpdatedToItsConclusion(t *testing.T) {
	srv, app := newApp(t, 0)
	tokens := &forge.AppTokens{Clock: clocktesting.NewFakePassiveClock(time.Now())}
	ctx := context.Background()
	var id int64
	for _, state := range []forge.State{forge.StatePending, forge.StateRunning, forge.StateSuccess} {
		tok, err := tokens.Token(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		p, err := forge.New(forge.Config{Type: forge.GitHub, APIURL: srv.URL, Token: tok, CheckRuns: true})
		if err != nil {
			t.Fatal(err)
		}
		s := status(state)
		s.CheckRunID = id
		posted, err := p.Post(ctx, s)
		if err != nil {
			t.Fatalf("posting %s: %v", state, err)
		}
		id = posted.ID
	}
	var got []string
	for _, c := range srv.Accepted() {
		got = append(got, c.State)
		if c.CheckRunID != id || c.Context != "tau/default r1" {
			t.Errorf("call %+v, want check run %d named tau/default r1", c, id)
		}
	}
	if diff := cmp.Diff([]string{"queued", "in_progress", "success"}, got); diff != "" {
		t.Errorf("check run states (-want +got):\n%s", diff)
	}
	if srv.App.Minted != 1 {
		t.Errorf("%d installation tokens minted for three posts, want 1", srv.App.Minted)
	}
}

func TestAnInstallationTokenIsReplacedBeforeItExpires(t *testing.T) {
	srv, app := newApp(t, 10*time.Minute)
	clk := clocktesting.NewFakeClock(time.Now())
	tokens := &forge.AppTokens{Clock: clk}
	for _, step := range []time.Duration{0, time.Minute, 5 * time.Minute} {
		clk.Step(step)
		if _, err := tokens.Token(context.Background(), app); err != nil {
			t.Fatal(err)
		}
	}
	if srv.App.Minted != 2 {
		t.Errorf("%d tokens minted, want 2: one, then a new one within 5 minutes of expiry", srv.App.Minted)
	}
}

func TestAWrongAppKeyIsTerminalAndNotRepeated(t *testing.T) {
	_, app := newApp(t, 0)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	app.PrivateKey = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	_, err = (&forge.AppTokens{}).Token(context.Background(), app)
	if err == nil || !forge.IsTerminal(err) || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("Token with a wrong key = %v, want a terminal error without the key", err)
	}
	app.PrivateKey = []byte("not a key")
	if _, err := (&forge.AppTokens{}).Token(context.Background(), app); !forge.IsTerminal(err) || strings.Contains(err.Error(), "not a key") {
		t.Errorf("Token with garbage for a key = %v, want a terminal error without it", err)
	}
}
