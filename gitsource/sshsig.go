package gitsource

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// sshSig is a parsed SSH signature in OpenSSH's SSHSIG format
// (PROTOCOL.sshsig), what `git tag -s` makes with gpg.format=ssh.
type sshSig struct {
	key       ssh.PublicKey
	namespace string
	hashAlgo  string
	sig       *ssh.Signature
}

const sshsigMagic = "SSHSIG"

// parseSSHSig decodes an armored SSH signature. Errors match
// ErrBadSignature.
func parseSSHSig(armored []byte) (*sshSig, error) {
	block, rest := pem.Decode(bytes.TrimSpace(armored))
	if block == nil || block.Type != "SSH SIGNATURE" || len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("%w: not an armored SSH signature", ErrBadSignature)
	}
	b := block.Bytes
	if !bytes.HasPrefix(b, []byte(sshsigMagic)) {
		return nil, fmt.Errorf("%w: SSH signature without the SSHSIG preamble", ErrBadSignature)
	}
	var blob struct {
		Version   uint32
		PublicKey []byte
		Namespace string
		Reserved  []byte
		HashAlgo  string
		Signature []byte
	}
	if err := ssh.Unmarshal(b[len(sshsigMagic):], &blob); err != nil {
		return nil, fmt.Errorf("%w: SSH signature does not decode", ErrBadSignature)
	}
	if blob.Version != 1 {
		return nil, fmt.Errorf("%w: SSH signature version %d", ErrBadSignature, blob.Version)
	}
	key, err := ssh.ParsePublicKey(blob.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: SSH signature key does not parse", ErrBadSignature)
	}
	sig := new(ssh.Signature)
	if err := ssh.Unmarshal(blob.Signature, sig); err != nil {
		return nil, fmt.Errorf("%w: SSH signature blob does not decode", ErrBadSignature)
	}
	return &sshSig{key: key, namespace: blob.Namespace, hashAlgo: blob.HashAlgo, sig: sig}, nil
}

// verify checks the signature over message in namespace.
func (s *sshSig) verify(message []byte, namespace string) error {
	if s.namespace != namespace {
		return fmt.Errorf("%w: SSH signature is for namespace %q, not %q", ErrBadSignature, s.namespace, namespace)
	}
	var digest []byte
	switch s.hashAlgo {
	case "sha256":
		h := sha256.Sum256(message)
		digest = h[:]
	case "sha512":
		h := sha512.Sum512(message)
		digest = h[:]
	default:
		return fmt.Errorf("%w: SSH signature hash %q", ErrBadSignature, s.hashAlgo)
	}
	if s.sig.Format == ssh.KeyAlgoRSA { // SHA-1: refused by PROTOCOL.sshsig
		return fmt.Errorf("%w: SSH signature uses ssh-rsa (SHA-1)", ErrBadSignature)
	}
	signed := ssh.Marshal(struct {
		Namespace string
		Reserved  []byte
		HashAlgo  string
		Digest    []byte
	}{namespace, nil, s.hashAlgo, digest})
	signed = append([]byte(sshsigMagic), signed...)
	if err := s.key.Verify(signed, s.sig); err != nil {
		return fmt.Errorf("%w: SSH signature does not match", ErrBadSignature)
	}
	return nil
}
