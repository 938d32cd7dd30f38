package gitsource

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh"
)

// Remote is a repository and the credentials to read it.
type Remote struct {
	// URL is https://, http://, ssh:// or scp-like (git@host:org/repo.git).
	// Credentials in the URL are moved into Auth and never shown.
	URL  string
	Auth Credentials
}

// Credentials are what a TauRepository's Secret holds. Set at most one of
// basic auth, token or SSH key.
type Credentials struct {
	// Username and Password: HTTPS basic auth.
	Username, Password string
	// Token: an HTTPS access token, sent as the basic-auth password (how
	// GitHub, GitLab and Gitea accept tokens over git). Username defaults
	// to "git".
	Token string
	// SSHPrivateKey is a PEM private key; SSHPassphrase decrypts it.
	SSHPrivateKey []byte
	SSHPassphrase string
	// KnownHosts lists the trusted SSH host keys, in OpenSSH known_hosts
	// format. Required with SSH: unknown hosts are refused.
	KnownHosts []byte
	// CABundle adds PEM certificates to trust for HTTPS.
	CABundle []byte
}

// secrets are the values to mask in any message.
func (c Credentials) secrets() []string {
	return []string{c.Password, c.Token, c.SSHPassphrase}
}

// identity distinguishes credentials without revealing them, so results
// shared between callers are only shared between holders of the same ones.
func (c Credentials) identity() string {
	return hashString(c.Username, c.Password, c.Token, string(c.SSHPrivateKey), c.SSHPassphrase,
		string(c.KnownHosts), string(c.CABundle))
}

// endpoint is a parsed remote, ready for go-git's transports.
type endpoint struct {
	ep       *transport.Endpoint
	display  string // the URL without credentials, for messages and metrics keys
	auth     transport.AuthMethod
	redactor redactor
}

// newEndpoint validates the URL and builds the auth method. Its errors are
// *Error values with the credentials already removed.
func newEndpoint(r Remote, dialTimeout time.Duration) (*endpoint, error) {
	creds := r.Auth
	raw, user, pass := splitUserinfo(r.URL)
	if creds.Username == "" && user != "" {
		creds.Username = user
	}
	if creds.Password == "" && creds.Token == "" && pass != "" {
		creds.Password = pass
	}
	red := newRedactor(append(creds.secrets(), pass)...)
	fail := func(kind error, format string, args ...any) (*endpoint, error) {
		return nil, &Error{Op: "connect", URL: red.mask(raw), Kind: kind, Detail: red.mask(fmt.Sprintf(format, args...))}
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return fail(ErrUnsupported, "invalid repository URL")
	}
	e := &endpoint{ep: ep, display: red.mask(raw), redactor: red}
	switch ep.Protocol {
	case "https", "http":
		ep.CaBundle = creds.CABundle
		e.auth = httpAuth(creds)
	case "ssh":
		auth, err := newSSHAuth(ep, creds, dialTimeout)
		if err != nil {
			return fail(classify(err), "%v", err)
		}
		e.auth = auth
	default:
		return fail(ErrUnsupported, "scheme %q: use https or ssh", ep.Protocol)
	}
	return e, nil
}

// splitUserinfo removes user:password@ from an http(s) or ssh URL.
func splitUserinfo(raw string) (clean, user, pass string) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || u.Scheme == "" {
		return raw, "", ""
	}
	user = u.User.Username()
	pass, _ = u.User.Password()
	if u.Scheme == "ssh" {
		// ssh://git@host/...: the user is part of the address, not a secret.
		if pass == "" {
			return raw, "", ""
		}
		u.User = url.User(user)
		return u.String(), "", pass
	}
	u.User = nil
	return u.String(), user, pass
}

func httpAuth(c Credentials) transport.AuthMethod {
	switch {
	case c.Token != "":
		user := c.Username
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: c.Token}
	case c.Username != "" || c.Password != "":
		return &githttp.BasicAuth{Username: c.Username, Password: c.Password}
	}
	return nil
}

// sshAuth is a go-git SSH auth method with strict host key checking against
// the repository's own known_hosts, and host key algorithms restricted to
// the ones known for the host, so negotiation cannot pick an unknown key
// type and fail the check spuriously.
type sshAuth struct {
	user    string
	signer  ssh.Signer
	hosts   *knownHosts
	algos   []string
	timeout time.Duration
}

func newSSHAuth(ep *transport.Endpoint, c Credentials, timeout time.Duration) (*sshAuth, error) {
	if len(c.SSHPrivateKey) == 0 {
		return nil, fmt.Errorf("%w: an SSH URL needs a private key", ErrAuth)
	}
	if len(c.KnownHosts) == 0 {
		return nil, fmt.Errorf("%w: an SSH URL needs known_hosts", ErrHostKey)
	}
	var signer ssh.Signer
	var err error
	if c.SSHPassphrase != "" {
		signer, err = ssh.ParsePrivateKeyWithPassphrase(c.SSHPrivateKey, []byte(c.SSHPassphrase))
	} else {
		signer, err = ssh.ParsePrivateKey(c.SSHPrivateKey)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the SSH private key does not parse (wrong passphrase or format)", ErrAuth)
	}
	hosts, err := parseKnownHosts(c.KnownHosts)
	if err != nil {
		return nil, err
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	addr := net.JoinHostPort(ep.Host, portOr(ep.Port, 22))
	return &sshAuth{user: user, signer: signer, hosts: hosts, algos: hosts.algorithms(addr), timeout: timeout}, nil
}

func portOr(p, def int) string {
	if p == 0 {
		p = def
	}
	return fmt.Sprint(p)
}

// Name implements transport.AuthMethod.
func (a *sshAuth) Name() string { return "ssh-public-keys" }

// String implements transport.AuthMethod without revealing the key.
func (a *sshAuth) String() string { return "user: " + a.user + ", name: ssh-public-keys" }

// ClientConfig implements go-git's ssh.AuthMethod.
func (a *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	return &ssh.ClientConfig{
		User:              a.user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(a.signer)},
		HostKeyCallback:   a.hosts.check,
		HostKeyAlgorithms: a.algos,
		Timeout:           a.timeout,
	}, nil
}
