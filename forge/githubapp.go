package forge

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// App is a GitHub App installation, as a forge Secret's "appID",
// "installationID" and "privateKey" name it.
type App struct {
	APIURL         string // as Config.APIURL
	AppID          int64
	InstallationID int64
	PrivateKey     []byte // PEM, PKCS#1 or PKCS#8
}

// AppTokens mints GitHub App installation tokens and keeps each until
// shortly before it expires (GitHub gives an hour): a multi-hour run's
// updates reuse one token an hour instead of minting one per post. The
// cache is only a saving; losing it on restart costs one call.
type AppTokens struct {
	HTTPClient *http.Client
	Clock      clock.PassiveClock
	Metrics    *Metrics

	mu     sync.Mutex
	tokens map[string]appToken
}

type appToken struct {
	token   string
	expires time.Time
}

// refreshBefore is how long before expiry a token is replaced, so a post
// never starts with a token about to lapse.
const refreshBefore = 5 * time.Minute

// Token returns a valid installation token for app.
func (a *AppTokens) Token(ctx context.Context, app App) (string, error) {
	clk := a.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	sum := sha256.Sum256(app.PrivateKey) // a rotated key gets a new token
	key := fmt.Sprintf("%s\x00%d\x00%d\x00%s", app.APIURL, app.AppID, app.InstallationID, hex.EncodeToString(sum[:]))
	a.mu.Lock()
	t, ok := a.tokens[key]
	a.mu.Unlock()
	if ok && clk.Now().Add(refreshBefore).Before(t.expires) {
		return t.token, nil
	}
	t, err := a.mint(ctx, app, clk)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	if a.tokens == nil {
		a.tokens = map[string]appToken{}
	}
	a.tokens[key] = t
	a.mu.Unlock()
	return t.token, nil
}

func (a *AppTokens) mint(ctx context.Context, app App, clk clock.PassiveClock) (appToken, error) {
	jwt, err := appJWT(app, clk.Now())
	if err != nil {
		return appToken{}, err
	}
	hc := a.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	g, err := newGitHub(Config{Type: GitHub, APIURL: app.APIURL, Token: jwt, HTTPClient: hc, Metrics: a.Metrics, Clock: clk})
	if err != nil {
		return appToken{}, err
	}
	it, resp, err := g.client.Apps.CreateInstallationToken(ctx, app.InstallationID, nil)
	err = g.classify(resp, err)
	a.Metrics.observe(GitHub, err)
	if err != nil {
		return appToken{}, err
	}
	expires := clk.Now().Add(time.Hour)
	if it.ExpiresAt != nil {
		expires = it.ExpiresAt.Time
	}
	return appToken{token: it.GetToken(), expires: expires}, nil
}

// appJWT signs the short-lived JWT a GitHub App authenticates with:
// issued a minute in the past against clock drift, valid nine minutes.
func appJWT(app App, now time.Time) (string, error) {
	key, err := parseRSAKey(app.PrivateKey)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(),
		"iss": fmt.Sprint(app.AppID)})
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", &ConfigError{Msg: "signing the GitHub App JWT failed"}
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// parseRSAKey reads a PEM private key without repeating it in errors.
func parseRSAKey(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || !strings.HasSuffix(block.Type, "PRIVATE KEY") {
		return nil, &ConfigError{Msg: "GitHub App privateKey is not a PEM private key"}
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if rk, ok := k.(*rsa.PrivateKey); err == nil && ok {
		return rk, nil
	}
	return nil, &ConfigError{Msg: "GitHub App privateKey is not an RSA key"}
}
