package render

import (
	"net/url"
	"path"
	"strings"
)

// CanonicalRepoURL is a git URL as the allow-list compares it: scheme and
// host lowercased, the path percent-decoded once, its dot segments and
// duplicate slashes resolved, and a trailing ".git" or "/" dropped. So
// ".../team-a/..%2fteam-b/x.git" is ".../team-b/x", whatever the git
// server would make of the encoding. An scp-like "git@host:team-a/x.git"
// keeps its form, its path made canonical the same way. ok is false for a
// URL that does not parse, or whose path does not decode.
func CanonicalRepoURL(raw string) (string, bool) {
	if strings.ContainsAny(raw, "?#\\\x00") {
		return "", false
	}
	// scheme://[user@]host[:port]/path, split by hand: an allow-list
	// pattern may glob the port (http://127.0.0.1:*/team-a/*), which
	// url.Parse refuses.
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		authority, p, _ := strings.Cut(rest, "/")
		if scheme == "" || strings.ContainsAny(scheme, "/:@") || authority == "" || strings.Contains(authority, "%") {
			return "", false
		}
		cp, ok := canonicalPath("/" + p)
		if !ok {
			return "", false
		}
		return strings.ToLower(scheme) + "://" + lowerHost(authority) + cp, true
	}
	// scp-like: [user@]host:path.
	host, p, found := strings.Cut(raw, ":")
	if !found || host == "" || strings.ContainsAny(host, "/%") {
		return "", false
	}
	cp, ok := canonicalPath("/" + p)
	if !ok {
		return "", false
	}
	return lowerHost(host) + ":" + strings.TrimPrefix(cp, "/"), true
}

// lowerHost lowercases the host of an authority, not its user.
func lowerHost(authority string) string {
	if user, host, ok := strings.Cut(authority, "@"); ok {
		return user + "@" + strings.ToLower(host)
	}
	return strings.ToLower(authority)
}

// canonicalPath decodes an escaped path once and resolves it. A path that
// still holds an escape after decoding (a double encoding such as
// "%252e") is refused: some server would decode it again.
func canonicalPath(escaped string) (string, bool) {
	p, err := url.PathUnescape(escaped)
	if err != nil || strings.Contains(p, "%") || strings.ContainsAny(p, "\\\x00") {
		return "", false
	}
	p = path.Clean("/" + p)
	p = strings.TrimSuffix(p, ".git")
	p = strings.TrimSuffix(p, "/")
	return p, true
}
