package evidence

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

const (
	teamAToken = "team-a-api-token"
	teamBToken = "team-b-api-token"
)

// tokenMap is the runs API's token table: token to namespace.
type tokenMap map[string]string

func (m tokenMap) NamespaceOf(_ context.Context, token string) (string, error) { return m[token], nil }

var (
	teamTokens = tokenMap{teamAToken: "team-a", teamBToken: "team-b"}
	testLinks  = &Links{Key: []byte(strings.Repeat("k", 32)), TTL: 30 * 24 * time.Hour}
	// pageNow is the pageServer's clock.
	pageNow = sealTime.Add(41 * time.Minute)
)

// signed is the evidence link of run ns/name as the commit carries it.
func signed(base, ns, name string, expires time.Time) string {
	return base + "/runs/" + ns + "/" + name + "?" + testLinks.Query(ns, name, expires)
}

// TestASignedLinkOpensItsRunAndItsBlobsOnly: the link on the commit opens
// the run's page, and the bundles and blobs the page links to, and no
// other run's; tampered or expired links open nothing.
func TestASignedLinkOpensItsRunAndItsBlobsOnly(t *testing.T) {
	live := &Live{Run: liveRun("research-1a2b", taugridv1.PhaseSucceeded)}
	other := &Live{Run: liveRun("research-9z", taugridv1.PhaseSucceeded)}
	srv, _ := pageServer(t, liveRuns{"team-a/research-1a2b": live, "team-a/research-9z": other})
	link := signed(srv.URL, "team-a", "research-1a2b", pageNow.Add(time.Hour))

	code, body, _ := getAs(t, link, "application/json", "")
	var v View
	if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil || len(v.Bundles) != 1 {
		t.Fatalf("GET the signed link = %d, %v, %d bundles; want 200 and the run's page", code, err, len(v.Bundles))
	}
	b := v.Bundles[0]
	if b.Attestation == "" || v.SigningKey == nil {
		t.Fatalf("the page links no attestation (%q) or no signing key (%+v)", b.Attestation, v.SigningKey)
	}
	for _, path := range append([]string{b.Manifest, b.Attestation, v.SigningKey.URL}, b.Artifacts[0].URL, b.Artifacts[len(b.Artifacts)-1].URL) {
		if code, _, _ := getAs(t, srv.URL+path, "", ""); code != http.StatusOK || !strings.Contains(path, "sig=") {
			t.Errorf("GET %s, linked from the page = %d, want 200 through the link's capability", path, code)
		}
	}
	if code, html, _ := getAs(t, link, "", ""); code != http.StatusOK || !strings.Contains(html, "sig=") {
		t.Errorf("the HTML page = %d, links carry the capability: %v", code, strings.Contains(html, "sig="))
	} else if !strings.Contains(html, v.SigningKey.Fingerprint) || !strings.Contains(html, "BEGIN PUBLIC KEY") {
		t.Errorf("the HTML page shows no signing key and fingerprint %s", v.SigningKey.Fingerprint)
	}

	u, _ := url.Parse(link)
	q := u.Query()
	blob := b.Artifacts[0].SHA256
	tamperedSig := url.Values{paramExpires: {q.Get(paramExpires)}, paramSig: {flip(q.Get(paramSig))}}.Encode()
	longer := url.Values{paramExpires: {"99999999999"}, paramSig: {q.Get(paramSig)}}.Encode()
	expired := testLinks.Query("team-a", "research-1a2b", pageNow.Add(-time.Second))
	for name, target := range map[string]string{
		"a tampered signature":                  "/runs/team-a/research-1a2b?" + tamperedSig,
		"a lengthened expiry":                   "/runs/team-a/research-1a2b?" + longer,
		"an expired link":                       "/runs/team-a/research-1a2b?" + expired,
		"the link on another run":               "/runs/team-a/research-9z?" + u.RawQuery,
		"the link on another run's JSON":        "/runs/team-a/research-9z.json?" + u.RawQuery,
		"the link on another run's bundle":      "/runs/team-a/research-9z/bundles/1.json?" + u.RawQuery,
		"the link on another run's attestation": "/runs/team-a/research-9z/attestations/1.json?" + u.RawQuery,
		"the link on another run's key":         "/runs/team-a/research-9z/cosign.pub?" + u.RawQuery,
		"the link on another team's blob":       "/runs/team-b/research-1a2b/blobs/" + blob + "?" + u.RawQuery,
		"an empty signature":                    "/runs/team-a/research-1a2b?expires=99999999999&sig=",
	} {
		code, body, _ := getAs(t, srv.URL+target, "application/json", "")
		if code != http.StatusForbidden || strings.Contains(body, "research") || strings.Contains(body, "epoch") {
			t.Errorf("%s: GET = %d %q, want 403 and no data", name, code, body)
		}
	}
}

func flip(sig string) string {
	if sig == "" {
		return "A"
	}
	c := byte('A')
	if sig[0] == 'A' {
		c = 'B'
	}
	return string(c) + sig[1:]
}

// TestEverythingElseNeedsTheTeamsToken: without a link, only team a's
// token reads team a's evidence; team b's token and no token get nothing,
// and a server given no way to check credentials serves nothing.
func TestEverythingElseNeedsTheTeamsToken(t *testing.T) {
	srv, st := pageServer(t, liveRuns{"team-a/research-1a2b": {Run: liveRun("research-1a2b", taugridv1.PhaseSucceeded)}})
	m, _, _ := Load(context.Background(), st, Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1})
	paths := []string{"/runs/team-a/research-1a2b", "/runs/team-a/research-1a2b.json", "/runs/team-a/research-1a2b/bundles/1.json",
		"/runs/team-a/research-1a2b/attestations/1.json", "/runs/team-a/research-1a2b/cosign.pub"}
	for _, a := range m.Artifacts {
		paths = append(paths, "/runs/team-a/research-1a2b/blobs/"+a.SHA256) // the tau file, policy, manifests, logs
	}
	for _, p := range paths {
		if code, _, _ := getAs(t, srv.URL+p, "", teamAToken); code != http.StatusOK {
			t.Errorf("team a's token: GET %s = %d, want 200", p, code)
		}
		for who, c := range map[string]struct {
			token string
			code  int
		}{"no token": {"", http.StatusUnauthorized}, "team b's token": {teamBToken, http.StatusForbidden},
			"a made-up token": {"guess", http.StatusForbidden}} {
			if code, body, _ := getAs(t, srv.URL+p, "", c.token); code != c.code || strings.Contains(body, "epoch") || strings.Contains(body, "kind:") {
				t.Errorf("%s: GET %s = %d, want %d and no data", who, p, code, c.code)
			}
		}
	}

	bare := httptest.NewServer((&Server{Store: st}).Handler())
	defer bare.Close()
	if code, _, _ := getAs(t, bare.URL+paths[0], "", teamAToken); code != http.StatusUnauthorized {
		t.Errorf("a server with no links and no tokens: GET = %d, want 401", code)
	}
}
