package gitsource

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// verifyAt is the injected "now" the tests verify at.
var verifyAt = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// signedRunRef pushes an SSH-signed annotated tag as a run ref, as `tau
// run` does, and returns the tag object's SHA.
func (r *repo) signedRunRef(signer gittest.SSHSigner, id, msg string) string {
	r.s.t.Helper()
	r.git(append(signer.GitArgs(), "tag", "-s", "-m", msg, id)...)
	r.push("refs/tags/" + id + ":refs/tau/runs/" + id)
	return r.git("rev-parse", id)
}

// pushTagObject writes a tag object verbatim with `git mktag`, as a
// hostile client could, and pushes it as a run ref.
func (r *repo) pushTagObject(id string, content []byte) string {
	r.s.t.Helper()
	sha, err := gittest.Git(r.s.env, r.dir, content, "mktag")
	if err != nil {
		r.s.t.Fatal(err)
	}
	r.git("update-ref", "refs/tau/runs/"+id, sha)
	r.push("refs/tau/runs/" + id)
	return sha
}

func TestVerifyRunRefSignatures(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	alice, mallory := gittest.NewSSHSigner(t, "alice@laptop"), gittest.NewSSHSigner(t, "mallory@laptop")
	signed := r.signedRunRef(alice, "r-1", "target: ray")
	r.git("tag", "-a", "-m", "target: ray", "r-unsigned")
	r.push("refs/tags/r-unsigned:refs/tau/runs/r-unsigned")
	unsigned := r.git("rev-parse", "r-unsigned")
	raw := []byte(r.git("cat-file", "tag", signed) + "\n")
	tampered := r.pushTagObject("r-tampered", bytes.Replace(raw, []byte("target: ray"), []byte("target: big"), 1))
	garbage := r.pushTagObject("r-garbage", bytes.Replace(raw, []byte("\n-----BEGIN SSH SIGNATURE-----\n"),
		[]byte("\n-----BEGIN SSH SIGNATURE-----\nAAAAnotasignature\n"), 1))

	client, _ := newClient(t)
	res, err := client.Poll(ctxT(t), r.remote(), nil, Triggers{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 4 {
		t.Fatalf("events = %+v", res.Events)
	}
	trusted, err := ParseKeyRing([]byte("# team\nalice@example.com "+alice.Public+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	others, err := ParseKeyRing([]byte(mallory.Public+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ring := func(allowed, revoked string) *KeyRing {
		k, err := ParseKeyRing([]byte(allowed), nil)
		if err == nil {
			err = k.Revoke([]byte(revoked))
		}
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	aliceFP := ssh.FingerprintSHA256(mustParseKey(t, alice.Public))
	tests := map[string]struct {
		tag  string
		keys *KeyRing
		want error
	}{
		"signed by an allowed key":        {tag: signed, keys: trusted},
		"signed by a key not allowed":     {tag: signed, keys: others, want: ErrUntrustedSigner},
		"not signed":                      {tag: unsigned, keys: trusted, want: ErrUnsigned},
		"a message changed after signing": {tag: tampered, keys: trusted, want: ErrBadSignature},
		"a signature that is garbage":     {tag: garbage, keys: trusted, want: ErrBadSignature},
		"allowed for git, within its validity": {tag: signed,
			keys: ring(`alice@example.com namespaces="git",valid-after="20260101",valid-before="20270101Z" `+alice.Public, "")},
		"a key whose valid-before has passed": {tag: signed,
			keys: ring(`alice@example.com valid-before="20260501" `+alice.Public, ""), want: ErrKeyExpired},
		"a key not valid yet": {tag: signed,
			keys: ring(`alice@example.com valid-after="202606020000" `+alice.Public, ""), want: ErrKeyExpired},
		"a key allowed only for other namespaces": {tag: signed,
			keys: ring(`alice@example.com namespaces="file" `+alice.Public, ""), want: ErrUntrustedSigner},
		"an allowed key on the revoked list": {tag: signed,
			keys: ring("alice@example.com "+alice.Public, alice.Public+"\n"), want: ErrKeyRevoked},
		"an allowed key revoked by fingerprint": {tag: signed,
			keys: ring("alice@example.com "+alice.Public, "# lost laptop\n"+aliceFP+"\n"), want: ErrKeyRevoked},
		"another key revoked": {tag: signed,
			keys: ring("alice@example.com "+alice.Public, mallory.Public)},
		"an SSH signature where only OpenPGP keys are allowed": {tag: signed,
			keys: &KeyRing{pgp: openpgp.EntityList{newPGPEntity(t, "Alice")}}, want: ErrUntrustedSigner},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := client.VerifyTag(ctxT(t), r.remote(), tc.tag, tc.keys, verifyAt)
			if !errors.Is(err, tc.want) && (tc.want != nil || err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == nil && (got.Kind != "ssh" || got.Identity != "alice@example.com" || !strings.HasPrefix(got.Fingerprint, "SHA256:")) {
				t.Errorf("signer = %+v", got)
			}
		})
	}
}

func TestVerifySSHSignedCommit(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	alice := gittest.NewSSHSigner(t, "alice@laptop")
	r.write("tau.yaml", "name: a\n").git("add", "-A")
	r.git(append(alice.GitArgs(), "commit", "-q", "-S", "-m", "signed")...)
	commit := r.git("rev-parse", "HEAD")
	r.push("main")
	client, _ := newClient(t)
	if _, err := client.Archive(ctxT(t), r.remote(), "refs/heads/main", commit); err != nil {
		t.Fatal(err)
	}
	keys, _ := ParseKeyRing([]byte(alice.Public), nil)
	got, err := client.VerifyCommit(ctxT(t), r.remote(), commit, keys, verifyAt)
	if err != nil || got.Kind != "ssh" || got.Identity != "alice@laptop" {
		t.Fatalf("VerifyCommit = %+v, %v", got, err)
	}
}

func TestVerifyOpenPGPSignedTag(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	signer, other := newPGPEntity(t, "Alice"), newPGPEntity(t, "Mallory")
	gr, err := git.PlainOpen(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := gr.Head()
	tagRef, err := gr.CreateTag("r-pgp", head.Hash(), &git.CreateTagOptions{
		Tagger:  &object.Signature{Name: "Alice", Email: "alice@example.com"},
		Message: "target: ray\n",
		SignKey: signer,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.push("refs/tags/r-pgp:refs/tau/runs/r-pgp")
	client, _ := newClient(t)
	if _, err := client.Poll(ctxT(t), r.remote(), nil, Triggers{}); err != nil {
		t.Fatal(err)
	}
	keys, err := ParseKeyRing(nil, armoredPublic(t, signer))
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.VerifyTag(ctxT(t), r.remote(), tagRef.Hash().String(), keys, time.Now())
	if err != nil || got.Kind != "openpgp" || !strings.Contains(got.Identity, "Alice") {
		t.Fatalf("VerifyTag = %+v, %v", got, err)
	}
	wrong, _ := ParseKeyRing(nil, armoredPublic(t, other))
	if _, err := client.VerifyTag(ctxT(t), r.remote(), tagRef.Hash().String(), wrong, time.Now()); !errors.Is(err, ErrUntrustedSigner) {
		t.Fatalf("another key: err = %v, want ErrUntrustedSigner", err)
	}
	if _, err := client.VerifyTag(ctxT(t), r.remote(), plumbing.ZeroHash.String(), keys, verifyAt); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a tag never fetched: err = %v, want ErrNotFound", err)
	}
}

func TestParseKeyRingRefusesGarbage(t *testing.T) {
	for name, tc := range map[string]struct{ ssh, pgp, revoked string }{
		"an SSH line that is no key":      {ssh: "alice@example.com not-a-key\n"},
		"an OpenPGP block that is no key": {pgp: "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n"},
		"a binary KRL as revoked keys":    {revoked: "SSHKRL\n\x00\x00"},
		"a revoked line that is no key":   {revoked: "alice@example.com not-a-key\n"},
	} {
		t.Run(name, func(t *testing.T) {
			k, err := ParseKeyRing([]byte(tc.ssh), []byte(tc.pgp))
			if err == nil {
				err = k.Revoke([]byte(tc.revoked))
			}
			if err == nil {
				t.Error("parsed")
			}
		})
	}
}

func newPGPEntity(t *testing.T, name string) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", strings.ToLower(name)+"@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func armoredPublic(t *testing.T, e *openpgp.Entity) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.Bytes()
}

func mustParseKey(t *testing.T, line string) ssh.PublicKey {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestVerifyGPGSignedRunRefs signs run refs with the real gpg, through
// `git tag -s` (gpg.format=openpgp), as a researcher with a GnuPG key does.
func TestVerifyGPGSignedRunRefs(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	alice := gittest.NewGPGSigner(t, "Alice <alice@example.com>", "0")
	brief := gittest.NewGPGSigner(t, "Bob <bob@example.com>", "1d")
	lost := gittest.NewGPGSigner(t, "Carol <carol@example.com>", "0")
	tag := func(g gittest.GPGSigner, id string) string {
		env := append(append([]string{}, s.env...), g.Env()...)
		if _, err := gittest.Git(env, r.dir, nil, append(g.GitArgs(), "tag", "-s", "-m", "target: ray", id)...); err != nil {
			t.Fatal(err)
		}
		r.push("refs/tags/" + id + ":refs/tau/runs/" + id)
		return r.git("rev-parse", id)
	}
	byAlice, byBob, byCarol := tag(alice, "r-alice"), tag(brief, "r-bob"), tag(lost, "r-carol")
	carolBefore := lost.Public()
	lost.Revoke()
	client, _ := newClient(t)
	if _, err := client.Poll(ctxT(t), r.remote(), nil, Triggers{}); err != nil {
		t.Fatal(err)
	}
	ring := func(keys ...[]byte) *KeyRing {
		k, err := ParseKeyRing(nil, bytes.Join(keys, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	all := ring(alice.Public(), brief.Public(), carolBefore)
	revokedByList := ring(alice.Public())
	if err := revokedByList.Revoke([]byte(alice.Fingerprint + "\n")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tests := map[string]struct {
		tag  string
		keys *KeyRing
		at   time.Time
		want error
	}{
		"signed by an allowed key":                 {tag: byAlice, keys: all, at: now},
		"signed by a key not allowed":              {tag: byAlice, keys: ring(brief.Public()), at: now, want: ErrUntrustedSigner},
		"signed by a key that expired since":       {tag: byBob, keys: all, at: now.Add(72 * time.Hour), want: ErrKeyExpired},
		"signed by a key its owner revoked":        {tag: byCarol, keys: ring(lost.Public()), at: now, want: ErrKeyRevoked},
		"signed by a key on the revoked list":      {tag: byAlice, keys: revokedByList, at: now, want: ErrKeyRevoked},
		"an OpenPGP signature where SSH is wanted": {tag: byAlice, keys: &KeyRing{}, at: now, want: ErrUntrustedSigner},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := client.VerifyTag(ctxT(t), r.remote(), tc.tag, tc.keys, tc.at)
			if !errors.Is(err, tc.want) && (tc.want != nil || err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == nil && (got.Kind != "openpgp" || got.Fingerprint != alice.Fingerprint || !strings.Contains(got.Identity, "alice@example.com")) {
				t.Errorf("signer = %+v, want alice's key %s", got, alice.Fingerprint)
			}
		})
	}
}

func TestParseAllowedSigners(t *testing.T) {
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKs2ZaSv3wdRsWb5y0mDEdbJ4ZcBFEVIMk6hZxxgjdbS"
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	tests := map[string]struct {
		line string
		want allowedSSHKey
	}{
		"a principal and a key": {line: "alice@example.com " + key,
			want: allowedSSHKey{principal: "alice@example.com"}},
		"principals as patterns, quoted": {line: `"*@example.com,bob@lab" ` + key,
			want: allowedSSHKey{principal: "*@example.com,bob@lab"}},
		"every option git reads": {line: `alice@example.com namespaces="git,file",valid-after="20260101",valid-before="20261231235959Z" ` + key + " laptop",
			want: allowedSSHKey{principal: "alice@example.com", namespaces: []string{"git", "file"},
				validAfter: day(2026, 1, 1), validBefore: time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)}},
		"authorized_keys, the comment as principal": {line: key + " alice@laptop",
			want: allowedSSHKey{principal: "alice@laptop"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseAllowedSigner(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			got.key = nil
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(allowedSSHKey{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	for name, line := range map[string]string{
		"an unknown option":         "alice@example.com no-touch-required " + key,
		"a date git would not read": `alice@example.com valid-before="2026-01-01" ` + key,
		"a certificate authority":   "*@example.com cert-authority " + key,
		"a principal without a key": "alice@example.com",
		"options without a key":     `alice@example.com namespaces="git"`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseAllowedSigner(line); err == nil {
				t.Error("parsed")
			}
		})
	}
}
