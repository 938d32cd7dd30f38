package gitsource

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"golang.org/x/crypto/ssh"
)

// KeyRing is the keys a repository allows to sign runs, and the keys it
// revoked.
type KeyRing struct {
	ssh     []allowedSSHKey
	pgp     openpgp.EntityList
	revoked map[string]bool // fingerprints: SHA256:... (SSH), upper-case hex (OpenPGP)
}

// allowedSSHKey is one line of an allowed_signers file.
type allowedSSHKey struct {
	key       ssh.PublicKey
	principal string
	// namespaces the key may sign for; empty: any.
	namespaces []string
	// validAfter and validBefore bound when the key is valid; zero: no
	// bound.
	validAfter, validBefore time.Time
}

// ParseKeyRing reads SSH keys, one per line in git's allowed_signers format
// ("alice@example.com namespaces=\"git\" ssh-ed25519 AAAA...") or
// authorized_keys format, and armored OpenPGP public keys. Either may be
// empty.
func ParseKeyRing(sshKeys, pgpKeys []byte) (*KeyRing, error) {
	k := &KeyRing{}
	if err := k.AddSSH(sshKeys); err != nil {
		return nil, fmt.Errorf("allowed SSH keys, %w", err)
	}
	if err := k.AddOpenPGP(pgpKeys); err != nil {
		return nil, fmt.Errorf("allowed OpenPGP keys: %w", err)
	}
	return k, nil
}

// Empty reports a ring that allows no key.
func (k *KeyRing) Empty() bool { return len(k.ssh) == 0 && len(k.pgp) == 0 }

// AddSSH adds the keys of an allowed_signers file. Errors name the line.
func (k *KeyRing) AddSSH(data []byte) error {
	return eachLine(data, func(line string) error {
		key, err := parseAllowedSigner(line)
		if err == nil {
			k.ssh = append(k.ssh, key)
		}
		return err
	})
}

// AddOpenPGP adds armored public keys; data may hold several blocks.
func (k *KeyRing) AddOpenPGP(data []byte) error {
	const begin = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
	rest := bytes.TrimSpace(data)
	for len(rest) > 0 {
		i := bytes.Index(rest[1:], []byte(begin)) + 1
		block := rest
		if i > 0 {
			block, rest = rest[:i], rest[i:]
		} else {
			rest = nil
		}
		list, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(block))
		if err != nil {
			return err
		}
		k.pgp = append(k.pgp, list...)
	}
	return nil
}

// Revoke reads a list of revoked keys: SSH public keys one per line, as
// git's gpg.ssh.revocationFile holds them (optionally after principals, as
// in allowed_signers), or key fingerprints (SHA256:... for SSH, hex for
// OpenPGP). A revoked key's signatures are refused even where the key is
// allowed. Binary KRLs are not read.
func (k *KeyRing) Revoke(data []byte) error {
	if bytes.HasPrefix(data, []byte("SSHKRL")) {
		return errors.New("revoked keys: binary KRLs are not supported; list the public keys or their fingerprints")
	}
	if k.revoked == nil {
		k.revoked = map[string]bool{}
	}
	return eachLine(data, func(line string) error {
		if fp, ok := fingerprintLine(line); ok {
			k.revoked[fp] = true
			return nil
		}
		key, err := parseAllowedSigner(line)
		if err != nil {
			return fmt.Errorf("revoked keys: want a public key or a fingerprint")
		}
		k.revoked[ssh.FingerprintSHA256(key.key)] = true
		return nil
	})
}

// fingerprintLine reads a line that is only a fingerprint.
func fingerprintLine(line string) (string, bool) {
	if strings.HasPrefix(line, "SHA256:") && !strings.ContainsAny(line, " \t") {
		return line, true
	}
	hexFP := strings.ToUpper(strings.ReplaceAll(line, " ", ""))
	if _, err := hex.DecodeString(hexFP); err == nil && (len(hexFP) == 40 || len(hexFP) == 64) {
		return hexFP, true
	}
	return "", false
}

func eachLine(data []byte, f func(line string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := f(line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// parseAllowedSigner reads one allowed_signers line (see ssh-keygen(1),
// ALLOWED SIGNERS): principals, optional options, the key. A line that
// starts with the key is read as authorized_keys, its comment the
// principal.
func parseAllowedSigner(line string) (allowedSSHKey, error) {
	first, _ := nextField(line)
	if isKeyType(first) {
		key, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return allowedSSHKey{}, errors.New("want a public key")
		}
		return allowedSSHKey{key: key, principal: comment}, nil
	}
	principal, rest := nextField(line)
	a := allowedSSHKey{principal: strings.Trim(principal, `"`)}
	if opts, after := nextField(rest); opts != "" && !isKeyType(opts) {
		if err := a.setOptions(opts); err != nil {
			return allowedSSHKey{}, err
		}
		rest = after
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rest))
	if err != nil {
		return allowedSSHKey{}, errors.New("want a public key, optionally after principals and options")
	}
	a.key = key
	return a, nil
}

// nextField splits off the first space-separated field of s, where
// double-quoted parts may hold spaces.
func nextField(s string) (string, string) {
	s = strings.TrimLeft(s, " \t")
	quoted := false
	for i, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case (c == ' ' || c == '\t') && !quoted:
			return s[:i], strings.TrimLeft(s[i:], " \t")
		}
	}
	return s, ""
}

// setOptions reads an allowed_signers options field, comma-separated.
func (a *allowedSSHKey) setOptions(field string) error {
	for _, opt := range splitOptions(field) {
		name, value, _ := strings.Cut(opt, "=")
		value = strings.Trim(value, `"`)
		var err error
		switch strings.ToLower(name) {
		case "namespaces":
			a.namespaces = strings.Split(value, ",")
		case "valid-after":
			a.validAfter, err = parseSSHTime(value)
		case "valid-before":
			a.validBefore, err = parseSSHTime(value)
		case "cert-authority":
			return errors.New("cert-authority (SSH certificates) is not supported; list the signers' keys")
		default:
			return fmt.Errorf("unknown option %q", name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func splitOptions(field string) []string {
	var out []string
	quoted, start := false, 0
	for i, c := range field {
		switch {
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, field[start:i])
			start = i + 1
		}
	}
	return append(out, field[start:])
}

// parseSSHTime reads ssh-keygen's YYYYMMDD[HHMM[SS]][Z]. Times are UTC:
// ssh-keygen reads them in the system's zone, which for the controller is
// UTC.
func parseSSHTime(v string) (time.Time, error) {
	v = strings.TrimSuffix(v, "Z")
	for _, layout := range []string{"20060102", "200601021504", "20060102150405"} {
		if len(v) == len(layout) {
			if t, err := time.Parse(layout, v); err == nil {
				return t, nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("want YYYYMMDD[HHMM[SS]][Z], got %q", v)
}

func isKeyType(s string) bool {
	return strings.HasPrefix(s, "ssh-") || strings.HasPrefix(s, "ecdsa-") || strings.HasPrefix(s, "sk-")
}

// validFor reports why the key may not sign in namespace at time at, or ""
// when it may.
func (a allowedSSHKey) validFor(namespace string, at time.Time) (string, error) {
	switch {
	case len(a.namespaces) > 0 && !slices.Contains(a.namespaces, namespace):
		return fmt.Sprintf("allowed only for namespaces %s", strings.Join(a.namespaces, ",")), ErrUntrustedSigner
	case !a.validAfter.IsZero() && at.Before(a.validAfter):
		return "valid only after " + a.validAfter.UTC().Format(time.RFC3339), ErrKeyExpired
	case !a.validBefore.IsZero() && !at.Before(a.validBefore):
		return "expired " + a.validBefore.UTC().Format(time.RFC3339), ErrKeyExpired
	}
	return "", nil
}
