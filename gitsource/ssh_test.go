package gitsource

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// sshFixture is a repository served over SSH by the real `git
// upload-pack`, behind an in-process x/crypto/ssh server (no sshd here).
type sshFixture struct {
	url        string
	clientKey  []byte
	knownHosts []byte
	srv        *gittest.SSHServer
}

func newSSHFixture(t *testing.T) (*sshFixture, *repo) {
	t.Helper()
	s := newServer(t)
	r := s.newRepo("app")
	r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	key, pub, err := gittest.NewSSHKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gittest.StartSSHServer(s.backend.Root, pub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	kh := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, srv.HostKey)
	return &sshFixture{
		url:        "ssh://git@" + srv.Addr + "/app.git",
		clientKey:  key,
		knownHosts: []byte(kh + "\n"),
		srv:        srv,
	}, r
}

func TestListRefsOverSSHWithStrictKnownHosts(t *testing.T) {
	f, r := newSSHFixture(t)
	head := r.git("rev-parse", "HEAD")
	otherKey, otherPub, err := gittest.NewSSHKey()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(f.srv.Addr)
	tests := map[string]struct {
		creds Credentials
		want  error
	}{
		"the right key and a known host": {
			creds: Credentials{SSHPrivateKey: f.clientKey, KnownHosts: f.knownHosts},
		},
		"a hashed known_hosts entry": {
			creds: Credentials{SSHPrivateKey: f.clientKey, KnownHosts: []byte(
				knownhosts.HashHostname(knownhosts.Normalize(f.srv.Addr)) + " " + string(ssh.MarshalAuthorizedKey(f.srv.HostKey)))},
		},
		"a host missing from known_hosts is refused": {
			creds: Credentials{SSHPrivateKey: f.clientKey, KnownHosts: []byte(
				knownhosts.Line([]string{"[example.com]:" + port}, f.srv.HostKey) + "\n")},
			want: ErrHostKey,
		},
		"a host whose key changed is refused": {
			creds: Credentials{SSHPrivateKey: f.clientKey, KnownHosts: []byte(
				knownhosts.Line([]string{knownhosts.Normalize(f.srv.Addr)}, otherPub) + "\n")},
			want: ErrHostKey,
		},
		"a revoked host key is refused": {
			creds: Credentials{SSHPrivateKey: f.clientKey, KnownHosts: []byte(fmt.Sprintf("%s@revoked [%s]:%s %s",
				"", host, port, ssh.MarshalAuthorizedKey(f.srv.HostKey)) + string(f.knownHosts))},
			want: ErrHostKey,
		},
		"no known_hosts at all is refused, not trusted on first use": {
			creds: Credentials{SSHPrivateKey: f.clientKey},
			want:  ErrHostKey,
		},
		"a key the server does not accept": {
			creds: Credentials{SSHPrivateKey: otherKey, KnownHosts: f.knownHosts},
			want:  ErrAuth,
		},
		"no key": {
			creds: Credentials{KnownHosts: f.knownHosts},
			want:  ErrAuth,
		},
		"a key that does not parse": {
			creds: Credentials{SSHPrivateKey: []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"), KnownHosts: f.knownHosts},
			want:  ErrAuth,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client, _ := newClient(t)
			refs, err := client.ListRefs(ctxT(t), Remote{URL: f.url, Auth: tc.creds})
			if !errors.Is(err, tc.want) && (tc.want != nil || err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == nil && refs["refs/heads/main"].SHA != head {
				t.Errorf("refs = %v, want main at %s", refs, head)
			}
			if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error shows the key: %v", err)
			}
		})
	}
}

func TestArchiveOverSSH(t *testing.T) {
	f, r := newSSHFixture(t)
	client, _ := newClient(t)
	a, err := client.Archive(ctxT(t), Remote{URL: f.url, Auth: Credentials{SSHPrivateKey: f.clientKey, KnownHosts: f.knownHosts}},
		"refs/heads/main", r.git("rev-parse", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	if got := archiveFiles(t, a.Path); got["tau.yaml"] != "name: a\n" {
		t.Errorf("archive = %v", got)
	}
}

func TestKnownHostsMatching(t *testing.T) {
	_, pub, _ := gittest.NewSSHKey()
	line := func(hosts string) []byte { return []byte(hosts + " " + string(ssh.MarshalAuthorizedKey(pub))) }
	tests := map[string]struct {
		file []byte
		addr string
		ok   bool
	}{
		"a plain host on port 22":          {line("git.example.com"), "git.example.com:22", true},
		"a host on another port":           {line("[git.example.com]:2222"), "git.example.com:2222", true},
		"the port must match":              {line("[git.example.com]:2222"), "git.example.com:22", false},
		"one of several comma-separated":   {line("a.example.com,git.example.com"), "git.example.com:22", true},
		"a wildcard":                       {line("*.example.com"), "git.example.com:22", true},
		"a negated pattern wins":           {line("*.example.com,!git.example.com"), "git.example.com:22", false},
		"a hashed name":                    {line(knownhosts.HashHostname("git.example.com")), "git.example.com:22", true},
		"another host":                     {line("other.example.com"), "git.example.com:22", false},
		"comments and blank lines skipped": {append([]byte("# trusted\n\n"), line("git.example.com")...), "git.example.com:22", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kh, err := parseKnownHosts(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			err = kh.check(tc.addr, nil, pub)
			if (err == nil) != tc.ok {
				t.Errorf("check = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrHostKey) {
				t.Errorf("err = %v, want ErrHostKey", err)
			}
		})
	}
	if _, err := parseKnownHosts([]byte("not a known_hosts line")); !errors.Is(err, ErrHostKey) {
		t.Errorf("garbage known_hosts: err = %v, want ErrHostKey", err)
	}
}
