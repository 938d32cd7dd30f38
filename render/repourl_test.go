package render

import (
	"net/url"
	"strings"
	"testing"
)

// The allow-list from the attacker's side: a tenant allowed
// https://git.example.com/team-a/* tries to register another team's
// repository through an encoding, a dot segment or a query.
func TestAllowsRepositoryRefusesEncodedEscapes(t *testing.T) {
	tenant := &Tenant{Name: "team-a", Repositories: []string{"https://git.example.com/team-a/*", "git@git.example.com:team-a/*", "http://127.0.0.1:*/team-a/*"}}
	cases := map[string]bool{
		"https://git.example.com/team-a/research.git":                 true,
		"https://git.example.com/team-a/research":                     true,
		"https://GIT.example.com/team-a/research.git":                 true,
		"https://git.example.com/team-a//research.git":                true,
		"git@git.example.com:team-a/research.git":                     true,
		"https://git.example.com/team-a/..%2fteam-b%2fsecret.git":     false,
		"https://git.example.com/team-a/%2e%2e/team-b/secret.git":     false,
		"https://git.example.com/team-a/%2E%2E%2Fteam-b%2Fsecret.git": false,
		"https://git.example.com/team-a/..%252fteam-b%252fsecret.git": false,
		"https://git.example.com/team-a/./../team-b/secret.git":       false,
		"https://git.example.com/team-a/x.git?u=../../team-b":         false,
		"https://git.example.com/team-a/x.git#../team-b":              false,
		"git@git.example.com:team-a/..%2fteam-b/secret.git":           false,
		"git@git.example.com:team-a/../team-b/secret.git":             false,
		"https://git.example.com/team-b/secret.git":                   false,
		"https://git.example.com%2fteam-a/../team-b/x.git":            false,
		"": false,
		"http://127.0.0.1:3000/team-a/research.git":             true,
		"http://127.0.0.1:3000/team-a/..%2fteam-b/research.git": false,
	}
	for u, want := range cases {
		if got := tenant.AllowsRepository(u); got != want {
			c, _ := CanonicalRepoURL(u)
			t.Errorf("AllowsRepository(%q) = %v, want %v (canonical %q)", u, got, want, c)
		}
	}
}

// FuzzAllowsRepository: whatever the URL, one the allow-list accepts is,
// once decoded and resolved as a server would, a repository directly under
// team-a on git.example.com.
func FuzzAllowsRepository(f *testing.F) {
	for _, s := range []string{"https://git.example.com/team-a/x.git", "https://git.example.com/team-a/..%2fteam-b",
		"https://git.example.com/team-a/%252e%252e", "https://git.example.com/team-a/a/../../b"} {
		f.Add(s)
	}
	tenant := &Tenant{Repositories: []string{"https://git.example.com/team-a/*"}}
	f.Fuzz(func(t *testing.T, raw string) {
		if !tenant.AllowsRepository(raw) {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			return // no client would fetch it
		}
		p, err := url.PathUnescape(u.EscapedPath())
		if err != nil {
			t.Fatalf("%q accepted but its path does not decode: %v", raw, err)
		}
		var segs []string // what a server resolves the path to
		for _, seg := range strings.Split(p, "/") {
			switch seg {
			case "", ".":
			case "..":
				if len(segs) > 0 {
					segs = segs[:len(segs)-1]
				}
			default:
				segs = append(segs, seg)
			}
		}
		if !strings.EqualFold(u.Host, "git.example.com") || len(segs) != 2 || segs[0] != "team-a" {
			t.Fatalf("%q accepted, but it names %s %v", raw, u.Host, segs)
		}
	})
}
