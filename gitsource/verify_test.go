package gitsource

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// sshSigner is an ed25519 key made by ssh-keygen, as a researcher's.
type sshSigner struct {
	keyFile string
	pub     string // authorized_keys line
}

func newSSHSigner(t *testing.T) sshSigner {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen is not installed")
	}
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice@laptop", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return sshSigner{keyFile: key, pub: strings.TrimSpace(string(pub))}
}

// signedRunRef pushes an SSH-signed annotated tag as a run ref, as `tau
// run` does, and returns the tag object's SHA.
func (r *repo) signedRunRef(signer sshSigner, id, msg string) string {
	r.s.t.Helper()
	r.git("-c", "gpg.format=ssh", "-c", "user.signingkey="+signer.keyFile, "tag", "-s", "-m", msg, id)
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
	alice, mallory := newSSHSigner(t), newSSHSigner(t)
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
	trusted, err := ParseKeyRing([]byte("# team\nalice@example.com "+alice.pub+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	others, err := ParseKeyRing([]byte(mallory.pub+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
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
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := client.VerifyTag(ctxT(t), r.remote(), tc.tag, tc.keys)
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
	alice := newSSHSigner(t)
	r.write("tau.yaml", "name: a\n").git("add", "-A")
	r.git("-c", "gpg.format=ssh", "-c", "user.signingkey="+alice.keyFile, "commit", "-q", "-S", "-m", "signed")
	commit := r.git("rev-parse", "HEAD")
	r.push("main")
	client, _ := newClient(t)
	if _, err := client.Archive(ctxT(t), r.remote(), "refs/heads/main", commit); err != nil {
		t.Fatal(err)
	}
	keys, _ := ParseKeyRing([]byte(alice.pub), nil)
	got, err := client.VerifyCommit(ctxT(t), r.remote(), commit, keys)
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
	got, err := client.VerifyTag(ctxT(t), r.remote(), tagRef.Hash().String(), keys)
	if err != nil || got.Kind != "openpgp" || !strings.Contains(got.Identity, "Alice") {
		t.Fatalf("VerifyTag = %+v, %v", got, err)
	}
	wrong, _ := ParseKeyRing(nil, armoredPublic(t, other))
	if _, err := client.VerifyTag(ctxT(t), r.remote(), tagRef.Hash().String(), wrong); !errors.Is(err, ErrUntrustedSigner) {
		t.Fatalf("another key: err = %v, want ErrUntrustedSigner", err)
	}
	if _, err := client.VerifyTag(ctxT(t), r.remote(), plumbing.ZeroHash.String(), keys); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a tag never fetched: err = %v, want ErrNotFound", err)
	}
}

func TestParseKeyRingRefusesGarbage(t *testing.T) {
	for name, tc := range map[string]struct{ ssh, pgp string }{
		"an SSH line that is no key":      {ssh: "alice@example.com not-a-key\n"},
		"an OpenPGP block that is no key": {pgp: "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseKeyRing([]byte(tc.ssh), []byte(tc.pgp)); err == nil {
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
