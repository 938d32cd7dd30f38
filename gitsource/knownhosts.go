package gitsource

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
)

// knownHosts is a parsed known_hosts file held in memory: the repository's
// Secret is the only source of trust, never ~/.ssh.
type knownHosts struct {
	lines []knownHost
}

type knownHost struct {
	patterns []string
	key      ssh.PublicKey
	revoked  bool
}

func parseKnownHosts(data []byte) (*knownHosts, error) {
	kh := &knownHosts{}
	rest := data
	for len(bytes.TrimSpace(rest)) > 0 {
		marker, hosts, key, _, next, err := ssh.ParseKnownHosts(rest)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: known_hosts does not parse: %w", ErrHostKey, err)
		}
		rest = next
		if marker == "cert-authority" {
			continue // certificates are not supported: such lines trust nothing
		}
		kh.lines = append(kh.lines, knownHost{patterns: hosts, key: key, revoked: marker == "revoked"})
	}
	if len(kh.lines) == 0 {
		return nil, fmt.Errorf("%w: known_hosts has no host keys", ErrHostKey)
	}
	return kh, nil
}

// check is an ssh.HostKeyCallback that accepts only a key listed for the
// host and not revoked.
func (kh *knownHosts) check(hostname string, _ net.Addr, key ssh.PublicKey) error {
	host := knownHostsName(hostname)
	known := false
	for _, l := range kh.lines {
		if !l.matches(host) {
			continue
		}
		same := bytes.Equal(l.key.Marshal(), key.Marshal())
		if l.revoked {
			if same {
				return fmt.Errorf("%w: the host key of %s is revoked", ErrHostKey, host)
			}
			continue
		}
		known = true
		if same {
			return nil
		}
	}
	if known {
		return fmt.Errorf("%w: the host key of %s (%s) differs from known_hosts", ErrHostKey, host, ssh.FingerprintSHA256(key))
	}
	return fmt.Errorf("%w: %s is not in known_hosts", ErrHostKey, host)
}

// algorithms lists the host key algorithms known for addr, in the order
// they appear, for ssh.ClientConfig.HostKeyAlgorithms.
func (kh *knownHosts) algorithms(addr string) []string {
	host := knownHostsName(addr)
	var algos []string
	for _, l := range kh.lines {
		if l.revoked || !l.matches(host) {
			continue
		}
		for _, a := range keyAlgorithms(l.key.Type()) {
			if !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
	}
	return algos
}

func keyAlgorithms(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// knownHostsName writes host:port the way known_hosts does: bare for port
// 22, [host]:port otherwise.
func knownHostsName(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if port == "22" {
		return host
	}
	return "[" + host + "]:" + port
}

func (l knownHost) matches(host string) bool {
	matched := false
	for _, p := range l.patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if !patternMatches(p, host) {
			continue
		}
		if neg {
			return false
		}
		matched = true
	}
	return matched
}

func patternMatches(pattern, host string) bool {
	if strings.HasPrefix(pattern, "|1|") {
		return hashedMatches(pattern, host)
	}
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == host
	}
	ok, err := path.Match(pattern, host)
	return err == nil && ok
}

// hashedMatches checks a HashKnownHosts entry: |1|base64(salt)|base64(hmac).
func hashedMatches(pattern, host string) bool {
	parts := strings.Split(pattern, "|")
	if len(parts) != 4 {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(parts[2])
	want, err2 := base64.StdEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return hmac.Equal(mac.Sum(nil), want)
}
