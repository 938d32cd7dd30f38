package forge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of a forge Secret for a GitHub App (spec.forge.checkRuns).
const (
	SecretAppID          = "appID"
	SecretInstallationID = "installationID"
	SecretPrivateKey     = "privateKey"
)

// CredentialTTL is how long a forge Secret read is used before it is read
// again. Secrets are never cached or watched by the controller, so a
// rotated token is seen within this time, and at once after a post fails
// other than for the budget (Posters.Forget).
const CredentialTTL = time.Minute

// Posters builds the forge client of a TauRepository from its spec.forge
// and its Secret. Every controller that posts to forges (the commit
// statuses of runs, refused run requests, pull request checks) holds the
// same Posters, so a credential's budget and its cached Secret are shared.
type Posters struct {
	// Reader reads forge Secrets from the API server.
	Reader client.Reader
	Clock  clock.PassiveClock
	// NewPoster builds a forge client; nil: New.
	NewPoster func(Config) (StatusPoster, error)
	// HTTPClient is used for forge calls; nil: the default.
	HTTPClient *http.Client
	Metrics    *Metrics
	// GitHubAPIURL is used when a github forge names no API URL.
	GitHubAPIURL string
	// AppTokens mints and caches GitHub App installation tokens for check
	// runs; nil mints one per post.
	AppTokens *AppTokens
	// Buckets paces calls per credential; nil does not pace.
	Buckets *Buckets

	mu    sync.Mutex
	creds map[types.NamespacedName]credential
}

// credential is a forge Secret's data as last read, in memory only: never
// logged, written or put in an error. Runs waiting for the credential's
// budget retry every second or so; without it each try read the Secret
// from the API server before it could find the budget spent (9,006 GETs
// in 90 idle seconds at 1,000 runs, hack/scale).
type credential struct {
	data map[string][]byte
	read time.Time
}

// For reads the forge Secret (see Secret), fills in the repository's
// owner and name on s, and builds the client that posts s.
func (p *Posters) For(ctx context.Context, repo *taugridv1.TauRepository, s *Status, checkRuns bool) (StatusPoster, error) {
	cfg, err := p.Config(ctx, repo.Spec.Forge, repo.Namespace, repo.Spec.URL, s, checkRuns)
	if err != nil {
		return nil, err
	}
	return p.New(cfg)
}

// Config is the forge client's configuration for the git repository at
// url, reporting to forge f with the Secret f names in namespace: its
// token (or, for check runs, a GitHub App installation token), the API
// URL, and the shared HTTP client, metrics, clock and budget. It fills in
// the repository's owner and name on s.
func (p *Posters) Config(ctx context.Context, f *taugridv1.Forge, namespace, url string, s *Status, checkRuns bool) (Config, error) {
	owner, name, root, err := ParseRepoURL(url)
	if err != nil {
		return Config{}, err
	}
	s.Owner, s.Repo = owner, name
	data, err := p.Secret(ctx, types.NamespacedName{Namespace: namespace, Name: f.SecretRef.Name})
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Type: Type(f.Type), APIURL: f.APIURL, Token: string(data[gitsource.SecretToken]),
		HTTPClient: p.HTTPClient, Metrics: p.Metrics, Clock: p.Clock, CheckRuns: checkRuns, Buckets: p.Buckets}
	if cfg.APIURL == "" {
		cfg.APIURL = root
		if cfg.Type == GitHub {
			cfg.APIURL = p.GitHubAPIURL
		}
	}
	if checkRuns {
		if cfg.Token, err = p.AppToken(ctx, cfg.APIURL, data); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// New builds the client that posts with cfg.
func (p *Posters) New(cfg Config) (StatusPoster, error) {
	newPoster := p.NewPoster
	if newPoster == nil {
		newPoster = New
	}
	return newPoster(cfg)
}

// AppToken returns an installation token of the GitHub App the Secret
// data describes.
func (p *Posters) AppToken(ctx context.Context, apiURL string, data map[string][]byte) (string, error) {
	appID, err1 := strconv.ParseInt(string(data[SecretAppID]), 10, 64)
	installation, err2 := strconv.ParseInt(string(data[SecretInstallationID]), 10, 64)
	if err1 != nil || err2 != nil || len(data[SecretPrivateKey]) == 0 {
		return "", &ConfigError{Msg: "check runs need the Secret keys appID, installationID and privateKey"}
	}
	tokens := p.AppTokens
	if tokens == nil {
		tokens = &AppTokens{HTTPClient: p.HTTPClient, Clock: p.Clock, Metrics: p.Metrics}
	}
	return tokens.Token(ctx, App{APIURL: apiURL, AppID: appID, InstallationID: installation, PrivateKey: data[SecretPrivateKey]})
}

// Secret returns the data of the forge Secret key, read at most once per
// CredentialTTL. Treat it as read-only.
func (p *Posters) Secret(ctx context.Context, key types.NamespacedName) (map[string][]byte, error) {
	now := p.Clock.Now()
	p.mu.Lock()
	got, ok := p.creds[key]
	p.mu.Unlock()
	if ok && now.Sub(got.read) < CredentialTTL {
		return got.data, nil
	}
	var secret corev1.Secret
	if err := p.Reader.Get(ctx, key, &secret); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, fmt.Errorf("%w: %s/%s", gitsource.ErrMissingSecret, key.Namespace, key.Name)
		}
		return nil, err
	}
	p.mu.Lock()
	if p.creds == nil {
		p.creds = map[types.NamespacedName]credential{}
	}
	p.creds[key] = credential{data: secret.Data, read: now}
	p.mu.Unlock()
	return secret.Data, nil
}

// Forget drops the Secret's data, so the next use reads it again: a post
// failed, perhaps because the Secret changed.
func (p *Posters) Forget(key types.NamespacedName) {
	p.mu.Lock()
	delete(p.creds, key)
	p.mu.Unlock()
}
