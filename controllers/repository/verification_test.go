package repository

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"golang.org/x/crypto/ssh"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// allowedSigner is an allowed_signers line for a fresh ed25519 key.
func allowedSigner(t testing.TB, principal string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return principal + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

// signatureOf is the signature check a run carries to the run reconciler.
func signatureOf(t testing.TB, run taugridv1.TauRun) *taugridv1.SignatureStatus {
	t.Helper()
	data, ok := run.Annotations[taugridv1.AnnotationSignature]
	if !ok {
		return nil
	}
	var s taugridv1.SignatureStatus
	if err := json.Unmarshal([]byte(data), &s); err != nil {
		t.Fatalf("run %s: signature annotation %q: %v", run.Name, data, err)
	}
	return &s
}

// TestSignatureVerification: where a repository requires signatures, each
// run records the verdict on its annotated tag (a run ref) or its commit (a
// lightweight run tag). A refused run is still created, to say why, with
// a Warning; unusable keys refuse every run; a verification that failed
// for another reason is retried, creating nothing.
func TestSignatureVerification(t *testing.T) {
	alice := gitsource.Signer{Kind: "ssh", Identity: "alice@example.com", Fingerprint: "SHA256:alice"}
	tag := "tag " + sha("a1")
	commit := "commit " + c1
	verified := func(object string) *taugridv1.SignatureStatus {
		return &taugridv1.SignatureStatus{Verified: true, Method: "ssh", Principal: "alice@example.com", Fingerprint: "SHA256:alice", Object: object}
	}
	refusedFor := func(ref, object, why string) *taugridv1.SignatureStatus {
		return &taugridv1.SignatureStatus{Object: object, Reason: fmt.Sprintf("refused: %s is not signed by an allowed key (%s)", ref, why)}
	}
	both := func(why string) map[string]*taugridv1.SignatureStatus {
		return map[string]*taugridv1.SignatureStatus{
			"refs/tau/runs/r":  refusedFor("refs/tau/runs/r", tag, why),
			"refs/tags/run/lw": refusedFor("refs/tags/run/lw", commit, why)}
	}
	keys := map[string]string{"alice": allowedSigner(t, "alice@example.com")}
	cases := map[string]struct {
		tagName        string // of the run ref's tag object; "" is tau-run-r, as tau run names it
		noVerification bool
		keys           map[string]string // the verification Secret; nil: none
		plainGit       bool              // a git client that cannot verify
		signer         gitsource.Signer
		err            error
		wantErr        bool
		want           map[string]*taugridv1.SignatureStatus // by ref
		checked        []string                              // what the verifier was asked, in ref order
	}{
		"no signatures required: nothing checked, nothing recorded": {noVerification: true,
			want: map[string]*taugridv1.SignatureStatus{"refs/tau/runs/r": nil, "refs/tags/run/lw": nil}},
		"signed by an allowed key": {keys: keys, signer: alice,
			want:    map[string]*taugridv1.SignatureStatus{"refs/tau/runs/r": verified(tag), "refs/tags/run/lw": verified(commit)},
			checked: []string{commit, tag}},
		"signed with openpgp where ssh is required": {keys: keys, signer: gitsource.Signer{Kind: "openpgp", Identity: "mallory"},
			want:    both(gitsource.ErrUntrustedSigner.Error() + ": signed with openpgp, the repository requires ssh"),
			checked: []string{commit, tag}},
		"unsigned": {keys: keys, err: gitsource.ErrUnsigned,
			want: both(gitsource.ErrUnsigned.Error()), checked: []string{commit, tag}},
		"signed by a revoked key": {keys: keys, err: fmt.Errorf("key SHA256:alice: %w", gitsource.ErrKeyRevoked),
			want: both("key SHA256:alice: " + gitsource.ErrKeyRevoked.Error()), checked: []string{commit, tag}},
		"the verification Secret is missing: keys unusable": {signer: alice,
			want: both("the allowed keys are unusable: Secret team-a/signers not found")},
		"the verification Secret holds no key": {keys: map[string]string{"alice": "alice@example.com"}, signer: alice,
			want: both("the allowed keys are unusable: Secret team-a/signers: alice: line 1: want a public key, optionally after principals and options")},
		"this controller's git client cannot verify": {keys: keys, plainGit: true,
			want: both("this controller's git client cannot verify signatures")},
		"a tag signed for another run ref, replayed under this one": {keys: keys, signer: alice, tagName: "tau-run-approved",
			want: map[string]*taugridv1.SignatureStatus{
				"refs/tau/runs/r": {Object: tag, Reason: "refused: refs/tau/runs/r carries a signed tag made for another ref (" +
					gitsource.ErrTagRenamed.Error() + `: the tag object is named "tau-run-approved", so it starts a run only as refs/tau/runs/approved; it arrived as refs/tau/runs/r)`},
				"refs/tags/run/lw": verified(commit)},
			checked: []string{commit, tag}},
		"a signed run tag replayed as a run ref": {keys: keys, signer: alice, tagName: "run/approved",
			want: map[string]*taugridv1.SignatureStatus{
				"refs/tau/runs/r": {Object: tag, Reason: "refused: refs/tau/runs/r carries a signed tag made for another ref (" +
					gitsource.ErrTagRenamed.Error() + `: the tag object is named "run/approved", so it starts a run only as refs/tags/run/approved; it arrived as refs/tau/runs/r)`},
				"refs/tags/run/lw": verified(commit)},
			checked: []string{commit, tag}},
		"the signed object is not in the cache yet: retried, nothing created": {keys: keys, err: fmt.Errorf("tag: %w", gitsource.ErrNotFound),
			wantErr: true, checked: []string{commit}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := research().Verification("ssh", "signers").Obj()
			if tc.noVerification {
				repo = research().Obj()
			}
			objs := []client.Object{repo}
			if tc.keys != nil {
				objs = append(objs, secret("signers", tc.keys))
			}
			w := newRepoWorld(t, nil, objs...)
			signing := &signingGit{fakeGit: w.git, signer: tc.signer, err: tc.err}
			if !tc.plainGit {
				w.r.Git = signing
			}
			registered(w.git)
			w.mustReconcile(t)
			tagName := tc.tagName
			if tagName == "" {
				tagName = "tau-run-r"
			}
			w.git.refs["refs/tau/runs/r"] = w.git.annotated(sha("a1"), tagName, c1, "")
			w.git.refs["refs/tags/run/lw"] = at(c1)
			_, err := w.reconcile(t)
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile error = %v, want one: %v", err, tc.wantErr)
			}
			got := map[string]*taugridv1.SignatureStatus{}
			for _, run := range w.runs(t) {
				got[run.Spec.Trigger.Ref] = signatureOf(t, run)
			}
			if tc.want == nil {
				tc.want = map[string]*taugridv1.SignatureStatus{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("signatures by ref (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.checked, signing.checked); diff != "" {
				t.Errorf("verifier asked (-want +got):\n%s", diff)
			}
			var warnings []string
			for _, r := range reasons(w.drain()) {
				if strings.HasPrefix(r, "Warning") {
					warnings = append(warnings, r)
				}
			}
			var wantWarnings []string
			for _, s := range tc.want {
				if s != nil && !s.Verified {
					wantWarnings = append(wantWarnings, "Warning SignatureRefused")
				}
			}
			if diff := cmp.Diff(wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSignatureVerdict: a verification's outcome as the run's signature
// status; only signature failures refuse, others are retried.
func TestSignatureVerdict(t *testing.T) {
	ssh := gitsource.Signer{Kind: "ssh", Identity: "alice", Fingerprint: "SHA256:a"}
	cases := map[string]struct {
		mode    string
		signer  gitsource.Signer
		err     error
		want    taugridv1.SignatureStatus
		wantErr bool
	}{
		"a good signature of the mode": {mode: "ssh", signer: ssh,
			want: taugridv1.SignatureStatus{Verified: true, Method: "ssh", Principal: "alice", Fingerprint: "SHA256:a", Object: "tag t"}},
		"a good signature of the other mode": {mode: "openpgp", signer: ssh,
			want: taugridv1.SignatureStatus{Object: "tag t", Reason: "refused: refs/tags/run/x is not signed by an allowed key (" + gitsource.ErrUntrustedSigner.Error() + ": signed with ssh, the repository requires openpgp)"}},
		"a bad signature": {mode: "ssh", err: gitsource.ErrBadSignature,
			want: taugridv1.SignatureStatus{Object: "tag t", Reason: "refused: refs/tags/run/x is not signed by an allowed key (" + gitsource.ErrBadSignature.Error() + ")"}},
		"an expired key": {mode: "ssh", err: gitsource.ErrKeyExpired,
			want: taugridv1.SignatureStatus{Object: "tag t", Reason: "refused: refs/tags/run/x is not signed by an allowed key (" + gitsource.ErrKeyExpired.Error() + ")"}},
		"a read that failed": {mode: "ssh", err: errors.New("disk full"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SignatureVerdict("refs/tags/run/x", "tag t", tc.mode, tc.signer, tc.err)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want one: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKeyRingOf: a verification Secret's values as allowed and revoked
// keys; a ring that allows nothing is an error.
func TestKeyRingOf(t *testing.T) {
	good := allowedSigner(t, "alice@example.com")
	cases := map[string]struct {
		mode    string
		data    map[string]string
		wantErr string // "" for a usable ring
	}{
		"an allowed_signers line":             {mode: "ssh", data: map[string]string{"alice": good}},
		"allowed keys beside revoked ones":    {mode: "ssh", data: map[string]string{"alice": good, SecretRevokedKeys: "SHA256:revoked"}},
		"only revoked keys":                   {mode: "ssh", data: map[string]string{SecretRevokedKeys: "SHA256:revoked"}, wantErr: "no allowed ssh keys"},
		"nothing":                             {mode: "ssh", wantErr: "no allowed ssh keys"},
		"a value that is no key names itself": {mode: "ssh", data: map[string]string{"alice": good, "bob": "bob@example.com nonsense"}, wantErr: "bob: line 1"},
		"an ssh key where openpgp is required": {mode: "openpgp", data: map[string]string{"alice": good},
			wantErr: "alice: "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			keys, err := KeyRingOf(tc.mode, data)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v, want a ring", err)
			case tc.wantErr == "" && keys.Empty():
				t.Error("the ring allows no key")
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}
