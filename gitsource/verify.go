package gitsource

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"
)

// Signature failures. A run that must be signed and fails any of these does
// not run.
var (
	// ErrUnsigned: the tag or commit carries no signature.
	ErrUnsigned = errors.New("not signed")
	// ErrBadSignature: the signature is malformed or does not match the
	// signed object.
	ErrBadSignature = errors.New("bad signature")
	// ErrUntrustedSigner: a valid signature by a key the repository does
	// not allow.
	ErrUntrustedSigner = errors.New("signer not allowed")
)

// KeyRing is the keys a repository allows to sign runs.
type KeyRing struct {
	ssh []allowedSSHKey
	pgp openpgp.EntityList
}

type allowedSSHKey struct {
	key       ssh.PublicKey
	principal string
}

// Signer is who made a verified signature.
type Signer struct {
	// Kind is "ssh" or "openpgp".
	Kind string
	// Fingerprint is the key's: SHA256:... for SSH, hex for OpenPGP.
	Fingerprint string
	// Identity is the allowed_signers principal or key comment for SSH,
	// the primary user ID for OpenPGP.
	Identity string
}

// ParseKeyRing reads SSH keys, one per line in authorized_keys or git's
// allowed_signers format ("alice@example.com ssh-ed25519 AAAA..."), and
// armored OpenPGP public keys. Either may be empty.
func ParseKeyRing(sshKeys, pgpKeys []byte) (*KeyRing, error) {
	k := &KeyRing{}
	sc := bufio.NewScanner(bytes.NewReader(sshKeys))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := parseAllowedSigner(line)
		if err != nil {
			return nil, fmt.Errorf("allowed SSH keys, line %d: %w", n, err)
		}
		k.ssh = append(k.ssh, key)
	}
	if len(bytes.TrimSpace(pgpKeys)) > 0 {
		list, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(pgpKeys))
		if err != nil {
			return nil, fmt.Errorf("allowed OpenPGP keys: %w", err)
		}
		k.pgp = list
	}
	return k, nil
}

func parseAllowedSigner(line string) (allowedSSHKey, error) {
	first, _, _ := strings.Cut(line, " ")
	if isKeyType(first) {
		key, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return allowedSSHKey{}, errors.New("want a public key")
		}
		return allowedSSHKey{key: key, principal: comment}, nil
	}
	// allowed_signers: principals, then options, then the key.
	principal, rest, ok := strings.Cut(line, " ")
	if !ok {
		return allowedSSHKey{}, errors.New("want a public key")
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(rest)))
	if err != nil {
		return allowedSSHKey{}, errors.New("want a public key, optionally after a principal")
	}
	return allowedSSHKey{key: key, principal: principal}, nil
}

func isKeyType(s string) bool {
	return strings.HasPrefix(s, "ssh-") || strings.HasPrefix(s, "ecdsa-") || strings.HasPrefix(s, "sk-")
}

// VerifyTag checks an annotated tag's signature against the ring.
func VerifyTag(t *object.Tag, keys *KeyRing) (Signer, error) {
	if t.PGPSignature == "" {
		return Signer{}, fmt.Errorf("tag %s: %w", t.Name, ErrUnsigned)
	}
	enc := &plumbing.MemoryObject{}
	if err := t.EncodeWithoutSignature(enc); err != nil {
		return Signer{}, err
	}
	s, err := keys.verify(enc, t.PGPSignature)
	if err != nil {
		return Signer{}, fmt.Errorf("tag %s: %w", t.Name, err)
	}
	return s, nil
}

// VerifyCommit checks a commit's signature against the ring.
func VerifyCommit(c *object.Commit, keys *KeyRing) (Signer, error) {
	if c.PGPSignature == "" {
		return Signer{}, fmt.Errorf("commit %s: %w", c.Hash, ErrUnsigned)
	}
	enc := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(enc); err != nil {
		return Signer{}, err
	}
	s, err := keys.verify(enc, c.PGPSignature)
	if err != nil {
		return Signer{}, fmt.Errorf("commit %s: %w", c.Hash, err)
	}
	return s, nil
}

func (k *KeyRing) verify(obj *plumbing.MemoryObject, signature string) (Signer, error) {
	r, err := obj.Reader()
	if err != nil {
		return Signer{}, err
	}
	var msg bytes.Buffer
	if _, err := msg.ReadFrom(r); err != nil {
		return Signer{}, err
	}
	switch {
	case strings.HasPrefix(strings.TrimSpace(signature), "-----BEGIN SSH SIGNATURE-----"):
		return k.verifySSH(msg.Bytes(), signature)
	case strings.HasPrefix(strings.TrimSpace(signature), "-----BEGIN PGP SIGNATURE-----"):
		return k.verifyPGP(msg.Bytes(), signature)
	}
	return Signer{}, fmt.Errorf("%w: unknown signature format (want SSH or OpenPGP)", ErrBadSignature)
}

func (k *KeyRing) verifySSH(msg []byte, armored string) (Signer, error) {
	sig, err := parseSSHSig([]byte(armored))
	if err != nil {
		return Signer{}, err
	}
	if err := sig.verify(msg, "git"); err != nil {
		return Signer{}, err
	}
	fp := ssh.FingerprintSHA256(sig.key)
	for _, a := range k.ssh {
		if bytes.Equal(a.key.Marshal(), sig.key.Marshal()) {
			return Signer{Kind: "ssh", Fingerprint: fp, Identity: a.principal}, nil
		}
	}
	return Signer{}, fmt.Errorf("%w: SSH key %s", ErrUntrustedSigner, fp)
}

func (k *KeyRing) verifyPGP(msg []byte, armored string) (Signer, error) {
	if _, err := armor.Decode(strings.NewReader(armored)); err != nil {
		return Signer{}, fmt.Errorf("%w: OpenPGP signature does not decode", ErrBadSignature)
	}
	e, err := openpgp.CheckArmoredDetachedSignature(k.pgp, bytes.NewReader(msg), strings.NewReader(armored), nil)
	switch {
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return Signer{}, fmt.Errorf("%w: OpenPGP key not in the allowed keys", ErrUntrustedSigner)
	case err != nil:
		return Signer{}, fmt.Errorf("%w: OpenPGP: %w", ErrBadSignature, err)
	}
	s := Signer{Kind: "openpgp", Fingerprint: strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))}
	if id := e.PrimaryIdentity(); id != nil {
		s.Identity = id.Name
	}
	return s, nil
}

// VerifyTag checks the signature of a tag object fetched by Poll (an
// Event's Tag) against keys.
func (c *Client) VerifyTag(ctx context.Context, r Remote, tagSHA string, keys *KeyRing) (Signer, error) {
	return c.verifyObject(ctx, r, tagSHA, func(st *repoStore) (Signer, error) {
		t, err := object.GetTag(st.storage(), plumbing.NewHash(tagSHA))
		if objNotFound(err) {
			return Signer{}, notFound("tag", tagSHA)
		}
		if err != nil {
			return Signer{}, fmt.Errorf("%w: tag %s: %w", ErrCorrupt, tagSHA, err)
		}
		return VerifyTag(t, keys)
	})
}

// VerifyCommit checks the signature of a commit fetched by Poll or Archive
// against keys.
func (c *Client) VerifyCommit(ctx context.Context, r Remote, commit string, keys *KeyRing) (Signer, error) {
	return c.verifyObject(ctx, r, commit, func(st *repoStore) (Signer, error) {
		cm, err := object.GetCommit(st.storage(), plumbing.NewHash(commit))
		if objNotFound(err) {
			return Signer{}, notFound("commit", commit)
		}
		if err != nil {
			return Signer{}, fmt.Errorf("%w: commit %s: %w", ErrCorrupt, commit, err)
		}
		return VerifyCommit(cm, keys)
	})
}

func (c *Client) verifyObject(_ context.Context, r Remote, sha string, f func(*repoStore) (Signer, error)) (Signer, error) {
	if !shaRe.MatchString(sha) {
		return Signer{}, fmt.Errorf("%w: %q is not a full SHA", ErrNotFound, sha)
	}
	s, err := c.open(r)
	if err != nil {
		return Signer{}, err
	}
	defer s.close()
	return f(s.store)
}
