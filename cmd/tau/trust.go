package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A token goes only to the origin it was issued for. TAU_TOKEN goes to the
// API the user named (--api-url, TAU_API_URL); a token tau login stored
// goes to its own API; an API that only a repository's .tau/config.yaml
// names gets no token unless the user logged in to it. Each rule is one
// small check below, tested from the attacker's side in trust_test.go.

// apiChoice is everything that says which API tau talks to and with which
// token.
type apiChoice struct {
	Flag, Env string        // --api-url and TAU_API_URL: the user's own choice
	Project   projectConfig // the nearest .tau/config.yaml: the repository's
	EnvToken  string        // TAU_TOKEN: for the API the user named
	Logins    *credentials  // tau login's
}

// apiTarget is an API tau may send a token to.
type apiTarget struct {
	Base   string // the API URL, requests go to Base+"/api/v1/..."
	Origin string
	Token  string
}

// urlSource says who chose an API URL.
type urlSource int

const (
	fromFlag urlSource = iota
	fromEnv
	fromProject
	fromLogin
)

// userAPIChoice gathers the flag, the environment, the repository's
// .tau/config.yaml and tau login's file.
func userAPIChoice(flagURL string) (apiChoice, error) {
	logins := &credentials{}
	if path, err := credentialsPath(); err == nil { // no config directory: no logins
		if logins, err = readCredentials(path); err != nil {
			return apiChoice{}, err
		}
	}
	return apiChoice{Flag: flagURL, Env: os.Getenv("TAU_API_URL"), Project: loadProject("."),
		EnvToken: os.Getenv("TAU_TOKEN"), Logins: logins}, nil
}

// choose picks the API and its token, or says why no token may go there;
// ok is false when no API is configured at all.
func (c apiChoice) choose() (api apiTarget, ok bool, err error) {
	raw, from, err := c.url()
	if err != nil || raw == "" {
		return apiTarget{}, false, err
	}
	origin, err := originOf(raw)
	if err != nil {
		return apiTarget{}, true, usageError{err}
	}
	if err := c.checkRepositoryChoice(origin, raw, from); err != nil {
		return apiTarget{}, true, err
	}
	if err := checkTransport(origin); err != nil {
		return apiTarget{}, true, err
	}
	token := c.tokenFor(origin)
	if token == "" {
		return apiTarget{}, true, usageError{fmt.Errorf("no token for the TauGrid API at %s: run `tau login --api-url %s` (your platform team issues one token per team), or export TAU_TOKEN", origin, raw)}
	}
	return apiTarget{Base: strings.TrimSuffix(raw, "/"), Origin: origin, Token: token}, true, nil
}

// url is the API URL to use and who chose it: the flag, TAU_API_URL, the
// repository's file, else the one API the user logged in to.
func (c apiChoice) url() (string, urlSource, error) {
	switch {
	case c.Flag != "":
		return c.Flag, fromFlag, nil
	case c.Env != "":
		return c.Env, fromEnv, nil
	case c.Project.APIURL != "":
		return c.Project.APIURL, fromProject, nil
	}
	switch len(c.Logins.APIs) {
	case 0:
		return "", 0, nil
	case 1:
		return c.Logins.APIs[0].APIURL, fromLogin, nil
	}
	return "", 0, usageError{fmt.Errorf("you are logged in to several TauGrid APIs (%s): choose one with --api-url or TAU_API_URL, or api_url in .tau/config.yaml", c.Logins.urls())}
}

// checkRepositoryChoice refuses an API that only a repository's file names
// and the user never logged in to: anyone's repository could name their
// own server and collect the token.
func (c apiChoice) checkRepositoryChoice(origin, raw string, from urlSource) error {
	if from != fromProject {
		return nil
	}
	if _, ok := c.Logins.find(origin); ok {
		return nil
	}
	return untrustedAPIError{file: displayPath(c.Project.path), url: raw}
}

// tokenFor is the token tau may send to origin, "" when none may go there:
// TAU_TOKEN to the API the user named, a stored token to its own API,
// nothing over plain http beyond this machine.
func (c apiChoice) tokenFor(origin string) string {
	if checkTransport(origin) != nil {
		return ""
	}
	if named := firstOf(c.Flag, c.Env); named != "" && c.EnvToken != "" {
		if o, err := originOf(named); err == nil && o == origin {
			return c.EnvToken
		}
	}
	if l, ok := c.Logins.find(origin); ok {
		return l.Token
	}
	return ""
}

// untrustedAPIError: a repository's .tau/config.yaml names an API the user
// never logged in to. It is a usage error (exit 2).
type untrustedAPIError struct{ file, url string }

func (e untrustedAPIError) Error() string {
	return fmt.Sprintf("%s names the TauGrid API %s, which you have not logged in to.\n"+
		"tau no longer sends your token to an API that a repository's file names: any repository you clone could name its own server and collect your token.\n"+
		"  If you trust %s:  tau login --api-url %s\n"+
		"  Or name the API yourself:  --api-url <url>, or export TAU_API_URL", e.file, e.url, e.url, e.url)
}

// displayPath is p relative to the working directory when it is below it.
func displayPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// tokenClient is the HTTP client of every request that carries a token: a
// redirect to another origin goes without the Authorization header, and
// none may leave https for http. (Go's own client keeps the header across
// ports of one host, and on subdomains.)
func tokenClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, CheckRedirect: keepTokenHome}
}

func keepTokenHome(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refused a redirect from https to %s://%s", req.URL.Scheme, req.URL.Host)
	}
	to, err := originOf(req.URL.String())
	from, _ := originOf(via[0].URL.String())
	if err != nil || to != from {
		req.Header.Del("Authorization")
	}
	return nil
}
