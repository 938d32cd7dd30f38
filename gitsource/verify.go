package gitsource

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
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
	// ErrTagRenamed: a signed tag object arrived under a ref its own name
	// does not give: a signature replayed under another ref.
	ErrTagRenamed = errors.New("signed tag under another ref")
	// ErrKeyExpired: an allowed key used outside its validity
	// (valid-after, valid-before, an OpenPGP key's expiry).
	ErrKeyExpired = errors.New("key not valid now")
	// ErrKeyRevoked: a key on the revoked list, or an OpenPGP key revoked
	// by its owner.
	ErrKeyRevoked = errors.New("key revoked")
)

// sshNamespace is the namespace git signs tags and commits in.
const sshNamespace = "git"

// Signer is who made a verified signature.
type Signer struct {
	// Kind is "ssh" or "openpgp".
	Kind string
	// Fingerprint is the key's: SHA256:... for SSH, hex for OpenPGP.
	Fingerprint string
	// Identity is the allowed_signers principal or key comment for SSH,
	// the primary user ID for OpenPGP.
	Identity string
	// Tag is the signed tag object's own name (the signature covers it);
	// "" for a commit.
	Tag string
}

// VerifyTag checks an annotated tag's signature against the ring, with
// keys' validity judged at time at (the controller's now: stricter than
// git, which trusts the date the signer wrote into the tag).
func VerifyTag(t *object.Tag, keys *KeyRing, at time.Time) (Signer, error) {
	if t.PGPSignature == "" {
		return Signer{}, fmt.Errorf("tag %s: %w", t.Name, ErrUnsigned)
	}
	enc := &plumbing.MemoryObject{}
	if err := t.EncodeWithoutSignature(enc); err != nil {
		return Signer{}, err
	}
	s, err := keys.verify(enc, t.PGPSignature, at)
	if err != nil {
		return Signer{}, fmt.Errorf("tag %s: %w", t.Name, err)
	}
	s.Tag = t.Name
	return s, nil
}

// VerifyCommit checks a commit's signature against the ring, as VerifyTag.
func VerifyCommit(c *object.Commit, keys *KeyRing, at time.Time) (Signer, error) {
	if c.PGPSignature == "" {
		return Signer{}, fmt.Errorf("commit %s: %w", c.Hash, ErrUnsigned)
	}
	enc := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(enc); err != nil {
		return Signer{}, err
	}
	s, err := keys.verify(enc, c.PGPSignature, at)
	if err != nil {
		return Signer{}, fmt.Errorf("commit %s: %w", c.Hash, err)
	}
	return s, nil
}

func (k *KeyRing) verify(obj *plumbing.MemoryObject, signature string, at time.Time) (Signer, error) {
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
		return k.verifySSH(msg.Bytes(), signature, at)
	case strings.HasPrefix(strings.TrimSpace(signature), "-----BEGIN PGP SIGNATURE-----"):
		return k.verifyPGP(msg.Bytes(), signature, at)
	}
	return Signer{}, fmt.Errorf("%w: unknown signature format (want SSH or OpenPGP)", ErrBadSignature)
}

// verifySSH checks the signature, then the key: revoked first (as
// ssh-keygen -Y verify does), then allowed, then valid for git at at.
func (k *KeyRing) verifySSH(msg []byte, armored string, at time.Time) (Signer, error) {
	sig, err := parseSSHSig([]byte(armored))
	if err != nil {
		return Signer{}, err
	}
	if err := sig.verify(msg, sshNamespace); err != nil {
		return Signer{}, err
	}
	fp := ssh.FingerprintSHA256(sig.key)
	if k.revoked[fp] {
		return Signer{}, fmt.Errorf("%w: SSH key %s", ErrKeyRevoked, fp)
	}
	if len(k.ssh) == 0 {
		return Signer{}, fmt.Errorf("%w: SSH key %s; this repository allows only OpenPGP keys", ErrUntrustedSigner, fp)
	}
	var refusal error
	for _, a := range k.ssh {
		if !bytes.Equal(a.key.Marshal(), sig.key.Marshal()) {
			continue
		}
		why, err := a.validFor(sshNamespace, at)
		if err == nil {
			return Signer{Kind: "ssh", Fingerprint: fp, Identity: a.principal}, nil
		}
		refusal = fmt.Errorf("%w: SSH key %s of %s: %s", err, fp, a.principal, why)
	}
	if refusal != nil {
		return Signer{}, refusal
	}
	return Signer{}, fmt.Errorf("%w: SSH key %s", ErrUntrustedSigner, fp)
}

func (k *KeyRing) verifyPGP(msg []byte, armored string, at time.Time) (Signer, error) {
	block, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return Signer{}, fmt.Errorf("%w: OpenPGP signature does not decode", ErrBadSignature)
	}
	issuer := pgpIssuer(block.Body)
	if len(k.pgp) == 0 {
		return Signer{}, fmt.Errorf("%w: OpenPGP key %s; this repository allows only SSH keys", ErrUntrustedSigner, issuer)
	}
	cfg := &packet.Config{Time: func() time.Time { return at }}
	e, err := openpgp.CheckArmoredDetachedSignature(k.pgp, bytes.NewReader(msg), strings.NewReader(armored), cfg)
	switch {
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return Signer{}, fmt.Errorf("%w: OpenPGP key %s", ErrUntrustedSigner, issuer)
	case errors.Is(err, pgperrors.ErrKeyRevoked):
		return Signer{}, fmt.Errorf("%w: OpenPGP key %s was revoked by its owner", ErrKeyRevoked, issuer)
	case errors.Is(err, pgperrors.ErrKeyExpired), errors.Is(err, pgperrors.ErrSignatureExpired):
		return Signer{}, fmt.Errorf("%w: OpenPGP key %s: %w", ErrKeyExpired, issuer, err)
	case err != nil:
		return Signer{}, fmt.Errorf("%w: OpenPGP: %w", ErrBadSignature, err)
	}
	s := Signer{Kind: "openpgp", Fingerprint: strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))}
	if k.revoked[s.Fingerprint] {
		return Signer{}, fmt.Errorf("%w: OpenPGP key %s", ErrKeyRevoked, s.Fingerprint)
	}
	if id := e.PrimaryIdentity(); id != nil {
		s.Identity = id.Name
	}
	return s, nil
}

// pgpIssuer names the key a signature claims to be made by, for messages.
func pgpIssuer(body io.Reader) string {
	p, err := packet.Read(body)
	sig, ok := p.(*packet.Signature)
	switch {
	case err != nil || !ok:
		return "(unknown)"
	case sig.IssuerFingerprint != nil:
		return strings.ToUpper(hex.EncodeToString(sig.IssuerFingerprint))
	case sig.IssuerKeyId != nil:
		return fmt.Sprintf("%016X", *sig.IssuerKeyId)
	}
	return "(unknown)"
}

// VerifyTag checks the signature of a tag object fetched by Poll (an
// Event's Tag) against keys, judging the keys' validity at at.
func (c *Client) VerifyTag(ctx context.Context, r Remote, tagSHA string, keys *KeyRing, at time.Time) (Signer, error) {
	return c.verifyObject(ctx, r, tagSHA, func(st *repoStore) (Signer, error) {
		t, err := object.GetTag(st.storage(), plumbing.NewHash(tagSHA))
		if objNotFound(err) {
			return Signer{}, notFound("tag", tagSHA)
		}
		if err != nil {
			return Signer{}, fmt.Errorf("%w: tag %s: %w", ErrCorrupt, tagSHA, err)
		}
		return VerifyTag(t, keys, at)
	})
}

// VerifyCommit checks the signature of a commit fetched by Poll or Archive
// against keys.
func (c *Client) VerifyCommit(ctx context.Context, r Remote, commit string, keys *KeyRing, at time.Time) (Signer, error) {
	return c.verifyObject(ctx, r, commit, func(st *repoStore) (Signer, error) {
		cm, err := object.GetCommit(st.storage(), plumbing.NewHash(commit))
		if objNotFound(err) {
			return Signer{}, notFound("commit", commit)
		}
		if err != nil {
			return Signer{}, fmt.Errorf("%w: commit %s: %w", ErrCorrupt, commit, err)
		}
		return VerifyCommit(cm, keys, at)
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
