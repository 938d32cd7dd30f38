package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/taugrid/taugrid/policy"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/controllers/shared"
)

// SecretRevokedKeys is the value of a verification Secret that lists
// revoked keys rather than allowed ones.
const SecretRevokedKeys = "revoked_keys"

// SignatureVerifier is what verification needs of gitsource: the objects
// Poll just fetched, checked against a repository's keys.
type SignatureVerifier interface {
	VerifyTag(ctx context.Context, r gitsource.Remote, tag string, keys *gitsource.KeyRing, at time.Time) (gitsource.Signer, error)
	VerifyCommit(ctx context.Context, r gitsource.Remote, commit string, keys *gitsource.KeyRing, at time.Time) (gitsource.Signer, error)
}

// ErrKeysUnusable is a terminal error: the verification Secret is missing
// or holds no usable key, and a human must fix it.
var ErrKeysUnusable = errors.New("the allowed keys are unusable")

// verifySignature checks, where the repository requires signatures, the
// signature on what an event asks to run, and records the outcome on the
// run before it is created. A refused run is still created, to say why on
// the commit; the run reconciler fails it without submitting. It returns
// only errors worth retrying (the API server, the git cache).
func (r *RepositoryReconciler) verifySignature(ctx context.Context, repo *taugridv1.TauRepository, ev gitsource.Event, run *taugridv1.TauRun) error {
	v := repo.Spec.Verification
	if v == nil {
		return nil
	}
	sig, err := r.checkSignature(ctx, repo, ev)
	if err != nil {
		return err
	}
	data, err := json.Marshal(sig)
	if err != nil {
		return err
	}
	if run.Annotations == nil {
		run.Annotations = map[string]string{}
	}
	run.Annotations[taugridv1.AnnotationSignature] = string(data)
	if !sig.Verified {
		r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, shared.ReasonSignatureRefused, "Verify", "%s", sig.Reason)
	}
	return nil
}

// checkSignature verifies the event's tag object, or its commit where there
// is none (a lightweight run tag, a branch commit).
func (r *RepositoryReconciler) checkSignature(ctx context.Context, repo *taugridv1.TauRepository, ev gitsource.Event) (taugridv1.SignatureStatus, error) {
	object := signedObject(ev)
	keys, err := LoadKeyRing(ctx, r.Client, repo)
	if errors.Is(err, ErrKeysUnusable) {
		return refused(ev.Ref, object, err), nil
	}
	if err != nil {
		return taugridv1.SignatureStatus{}, err
	}
	verifier, ok := r.Git.(SignatureVerifier)
	if !ok {
		return refused(ev.Ref, object, errors.New("this controller's git client cannot verify signatures")), nil
	}
	remote, err := policy.RemoteFor(ctx, r.Client, repo.Namespace, repo.Spec.GitSource)
	if err != nil {
		return taugridv1.SignatureStatus{}, err
	}
	var signer gitsource.Signer
	if sha, isTag := strings.CutPrefix(object, "tag "); isTag {
		signer, err = verifier.VerifyTag(ctx, remote, sha, keys, r.Clock.Now())
		if want := SignedTagName(ev.Ref, triggersOf(repo)); err == nil && signer.Tag != want {
			err = fmt.Errorf("%w: the tag object is named %q, so it starts a run only as %s; it arrived as %s",
				gitsource.ErrTagRenamed, signer.Tag, tagRef(signer.Tag, triggersOf(repo)), ev.Ref)
		}
	} else {
		signer, err = verifier.VerifyCommit(ctx, remote, ev.Commit, keys, r.Clock.Now())
	}
	return SignatureVerdict(ev.Ref, object, repo.Spec.Verification.Mode, signer, err)
}

// signedObject is what carries the signature of an event: its annotated
// tag object (whose message holds a run ref's overrides), else its commit.
func signedObject(ev gitsource.Event) string {
	if ev.Tag != "" {
		return "tag " + ev.Tag
	}
	return "commit " + ev.Commit
}

// SignatureVerdict turns a verification's outcome into the run's
// signature status. Signature failures refuse the run; anything else (an
// object missing from the cache, a read error) is returned to be retried.
func SignatureVerdict(ref, object, mode string, s gitsource.Signer, err error) (taugridv1.SignatureStatus, error) {
	if err == nil && s.Kind != mode {
		err = fmt.Errorf("%w: signed with %s, the repository requires %s", gitsource.ErrUntrustedSigner, s.Kind, mode)
	}
	switch {
	case err == nil:
		return taugridv1.SignatureStatus{Verified: true, Method: s.Kind, Principal: s.Identity, Fingerprint: s.Fingerprint, Object: object}, nil
	case isSignatureFailure(err):
		return refused(ref, object, err), nil
	}
	return taugridv1.SignatureStatus{}, fmt.Errorf("verifying the signature of %s (%s): %w", ref, object, err)
}

func isSignatureFailure(err error) bool {
	return slices.ContainsFunc([]error{gitsource.ErrUnsigned, gitsource.ErrBadSignature, gitsource.ErrUntrustedSigner,
		gitsource.ErrKeyExpired, gitsource.ErrKeyRevoked, gitsource.ErrTagRenamed}, func(e error) bool { return errors.Is(err, e) })
}

func refused(ref, object string, why error) taugridv1.SignatureStatus {
	if errors.Is(why, gitsource.ErrTagRenamed) {
		return taugridv1.SignatureStatus{Object: object,
			Reason: fmt.Sprintf("refused: %s carries a signed tag made for another ref (%v)", ref, why)}
	}
	return taugridv1.SignatureStatus{Object: object,
		Reason: fmt.Sprintf("refused: %s is not signed by an allowed key (%v)", ref, why)}
}

// runRefTagPrefix starts the name `tau run` gives the tag object of a run
// ref <prefix><id>: tau-run-<id>.
const runRefTagPrefix = "tau-run-"

// SignedTagName is the name a signed tag object must carry to start a run
// from ref: its own name for a run tag (refs/tags/<name>), and
// tau-run-<id>, the name `tau run` gives it, for a run ref <prefix><id>.
// A signature covers the tag's name, not the ref it is pushed to, so
// without this a signed tag could be replayed under any other run ref.
func SignedTagName(ref string, t gitsource.Triggers) string {
	if name, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		return name
	}
	if id, ok := strings.CutPrefix(ref, t.RunRefPrefix); ok {
		return runRefTagPrefix + id
	}
	return ""
}

// tagRef is the ref a tag named name starts a run from.
func tagRef(name string, t gitsource.Triggers) string {
	if id, ok := strings.CutPrefix(name, runRefTagPrefix); ok {
		return t.RunRefPrefix + id
	}
	return "refs/tags/" + name
}

// LoadKeyRing reads the repository's allowed and revoked keys from its
// verification Secret. A missing Secret or unusable keys are
// errKeysUnusable; other errors come from the API server.
func LoadKeyRing(ctx context.Context, c client.Reader, repo *taugridv1.TauRepository) (*gitsource.KeyRing, error) {
	v := repo.Spec.Verification
	var s corev1.Secret
	err := c.Get(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: v.SecretRef.Name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: Secret %s/%s not found", ErrKeysUnusable, repo.Namespace, v.SecretRef.Name)
	}
	if err != nil {
		return nil, err
	}
	keys, err := KeyRingOf(v.Mode, s.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s/%s: %w", ErrKeysUnusable, repo.Namespace, v.SecretRef.Name, err)
	}
	return keys, nil
}

// KeyRingOf reads a verification Secret's values: every value but
// revoked_keys holds allowed keys in the mode's format.
func KeyRingOf(mode string, data map[string][]byte) (*gitsource.KeyRing, error) {
	keys := &gitsource.KeyRing{}
	for _, name := range slices.Sorted(maps.Keys(data)) {
		var err error
		switch {
		case name == SecretRevokedKeys:
			err = keys.Revoke(data[name])
		case mode == "openpgp":
			err = keys.AddOpenPGP(data[name])
		default:
			err = keys.AddSSH(data[name])
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if keys.Empty() {
		return nil, fmt.Errorf("no allowed %s keys", mode)
	}
	return keys, nil
}
