package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
)

// requireSignatures makes the fixture's repository require signatures by
// the keys in a new Secret.
func (f *runFixture) requireSignatures(t *testing.T, mode string, data map[string]string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "run-signers", Namespace: f.ns}, StringData: data}
	if err := k8s.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(f.repo.DeepCopy())
	f.repo.Spec.Verification = &taugridv1.Verification{Mode: mode, SecretRef: taugridv1.LocalObjectReference{Name: secret.Name}}
	if err := k8s.Patch(context.Background(), f.repo, patch); err != nil {
		t.Fatal(err)
	}
}

// gitWith runs git in the working copy with more environment (a GnuPG home).
func (r *gitRepo) gitWith(env []string, args ...string) string {
	r.t.Helper()
	out, err := gittest.Git(append(append([]string{}, r.env...), env...), r.work, nil, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// signedTag pushes an annotated tag signed with `git tag -s`, under ref
// (refs/tags/run/... for a run tag, refs/tau/runs/... for a run ref, as
// `tau run` pushes it), named as that ref requires.
func (r *gitRepo) signedTag(sign []string, env []string, ref, message string) string {
	r.t.Helper()
	return r.signedTagNamed(sign, env, repoctrl.SignedTagName(ref, gitsource.Triggers{}.WithDefaults()), ref, message)
}

// signedTagNamed pushes a tag named name, signed, under ref.
func (r *gitRepo) signedTagNamed(sign []string, env []string, name, ref, message string) string {
	r.t.Helper()
	tmp := name
	r.gitWith(env, append(sign, "tag", "-s", "--message", message, tmp)...)
	r.git("-C", r.work, "push", "--quiet", "origin", "refs/tags/"+tmp+":"+ref)
	r.git("-C", r.work, "tag", "--delete", tmp)
	return ref
}

func fingerprint(t *testing.T, public string) string {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(public))
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(k)
}

// refusedRun drives a refused run to Failed and checks it says why, on the
// run and in its commit status, and that it submitted nothing.
func (f *runFixture) refusedRun(t *testing.T, ref, why string) *taugridv1.TauRun {
	t.Helper()
	run := f.reconcileRun(t, f.runOf(t, ref).Name, taugridv1.PhaseFailed)
	want := "refused: " + ref + " is not signed by an allowed key ("
	if strings.Contains(why, "the tag object is named") {
		want = "refused: " + ref + " carries a signed tag made for another ref ("
	}
	if !strings.HasPrefix(run.Status.Message, want) || !strings.Contains(run.Status.Message, why) {
		t.Errorf("message = %q, want %q...%q", run.Status.Message, want, why)
	}
	if s := run.Status.Signature; s == nil || s.Verified || s.Reason != run.Status.Message {
		t.Errorf("status.signature = %+v, want refused with the run's message", s)
	}
	if d := forge.Desired(run); d.State != forge.StateFailure || !strings.Contains(d.Description, want) || !strings.Contains(d.Summary, "**Signature** "+want) {
		t.Errorf("commit status = %s %q, summary:\n%s", d.State, d.Description, d.Summary)
	}
	if got := evidence.TriggerOf(run).Signature; !strings.HasPrefix(got, want) {
		t.Errorf("evidence signature = %q, want %q...", got, want)
	}
	if len(run.Status.Attempts) > 0 || run.Status.Workload != nil {
		t.Errorf("a refused run submitted: %+v", run.Status)
	}
	return run
}

// signedRun drives a run signed by an allowed key to Queued and checks the
// signer is recorded on the run, its check run and its evidence.
func (f *runFixture) signedRun(t *testing.T, ref string, want taugridv1.SignatureStatus) {
	t.Helper()
	run := f.reconcileRun(t, f.runOf(t, ref).Name, taugridv1.PhaseQueued)
	if diff := cmp.Diff(&want, run.Status.Signature); diff != "" {
		t.Errorf("status.signature (-want +got)\n%s", diff)
	}
	if s := forge.Desired(run).Summary; !strings.Contains(s, fmt.Sprintf("**Signed** by %s with %s key `%s`", want.Principal, want.Method, want.Fingerprint)) {
		t.Errorf("check run summary lacks the signer:\n%s", s)
	}
	if got := evidence.TriggerOf(run).Signature; !strings.Contains(got, "verified: "+want.Object) || !strings.Contains(got, want.Fingerprint) {
		t.Errorf("evidence signature = %q", got)
	}
}

// submitted are the names of the runs that have a Job, and of the Jobs
// Kueue's Workloads belong to.
func (f *runFixture) submitted(t *testing.T) (jobs, workloads []string) {
	t.Helper()
	for _, j := range f.jobs(t) {
		jobs = append(jobs, j.Name)
	}
	var wl kueue.WorkloadList
	if err := k8s.List(context.Background(), &wl, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, w := range wl.Items {
		for _, o := range w.OwnerReferences {
			workloads = append(workloads, o.Name)
		}
	}
	return jobs, workloads
}

func (f *runFixture) wantSubmittedOnly(t *testing.T, refs ...string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, ref := range refs {
		allowed[f.runOf(t, ref).Name+"-1"] = true
	}
	jobs, workloads := f.submitted(t)
	for _, name := range append(jobs, workloads...) {
		if !allowed[name] {
			t.Errorf("Job or Workload of %s exists: only %v may run", name, refs)
		}
	}
	if len(jobs) != len(refs) {
		t.Errorf("Jobs = %v, want one for each of %v", jobs, refs)
	}
}

func TestOnlyAllowedSSHSignersStartRuns(t *testing.T) {
	f := newRunFixture(t, "sg1")
	alice, mallory := gittest.NewSSHSigner(t, "alice@laptop"), gittest.NewSSHSigner(t, "mallory@laptop")
	eve, bob := gittest.NewSSHSigner(t, "eve@laptop"), gittest.NewSSHSigner(t, "bob@laptop")
	gone := f.repos.Clock.Now().AddDate(0, 0, -1).UTC().Format("20060102") // by the injected clock
	f.requireSignatures(t, "ssh", map[string]string{
		"allowed_signers": "# the team's keys, as git verify-tag reads them\n" +
			`alice@example.com namespaces="git" ` + alice.Public + "\n" +
			`eve@example.com valid-before="` + gone + `" ` + eve.Public + "\n" +
			"bob@example.com " + bob.Public + "\n",
		repoctrl.SecretRevokedKeys: bob.Public + "\n",
	})
	f.poll(t)

	sign := func(s gittest.SSHSigner, ref string) string {
		return f.research.signedTag(s.GitArgs(), nil, ref, "target: default\n")
	}
	signedTag, signedRef := sign(alice, "refs/tags/run/signed"), sign(alice, "refs/tau/runs/signed")
	f.research.tag("run/unsigned")
	unsignedRef := f.research.runRef("unsigned", "target: default\n")
	unknown, expired, revoked := sign(mallory, "refs/tau/runs/unknown"), sign(eve, "refs/tau/runs/expired"), sign(bob, "refs/tau/runs/revoked")
	f.poll(t)

	head := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	f.refusedRun(t, "refs/tags/run/unsigned", "commit "+head+": not signed")
	f.refusedRun(t, unsignedRef, "not signed")
	f.refusedRun(t, unknown, "signer not allowed: SSH key "+fingerprint(t, mallory.Public))
	f.refusedRun(t, expired, "key not valid now: SSH key "+fingerprint(t, eve.Public)+" of eve@example.com: expired ")
	f.refusedRun(t, revoked, "key revoked: SSH key "+fingerprint(t, bob.Public))
	for _, ref := range []string{signedTag, signedRef} {
		tag := f.research.git("-C", f.research.work, "ls-remote", "origin", ref)
		f.signedRun(t, ref, taugridv1.SignatureStatus{Verified: true, Method: "ssh", Principal: "alice@example.com",
			Fingerprint: fingerprint(t, alice.Public), Object: "tag " + strings.Fields(tag)[0]})
	}
	f.wantSubmittedOnly(t, signedTag, signedRef)

	t.Run("a signed tag replayed under another ref is refused", func(t *testing.T) {
		// Mallory cannot sign, but can push: alice's signed run tag and run
		// ref, pushed again under refs of mallory's choosing.
		replayedTag := f.research.signedTagNamed(alice.GitArgs(), nil, "run/approved", "refs/tags/run/replayed", "target: default\n")
		replayedRef := f.research.signedTagNamed(alice.GitArgs(), nil, "tau-run-approved", "refs/tau/runs/replayed", "target: default\n")
		asTag := f.research.signedTagNamed(alice.GitArgs(), nil, "tau-run-other", "refs/tags/run/other", "target: default\n")
		f.poll(t)
		f.refusedRun(t, replayedTag, `signed tag under another ref: the tag object is named "run/approved", so it starts a run only as refs/tags/run/approved; it arrived as refs/tags/run/replayed`)
		f.refusedRun(t, replayedRef, `the tag object is named "tau-run-approved", so it starts a run only as refs/tau/runs/approved`)
		f.refusedRun(t, asTag, `the tag object is named "tau-run-other", so it starts a run only as refs/tau/runs/other`)
		f.wantSubmittedOnly(t, signedTag, signedRef)
	})

	t.Run("a TauRun made by hand is refused: nothing checked its signature", func(t *testing.T) {
		forged := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: f.ns},
			Spec: taugridv1.TauRunSpec{Repository: f.repo.Name, Commit: head, Target: "default",
				Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: "refs/tau/runs/by-hand"}}}
		if err := k8s.Create(context.Background(), forged); err != nil {
			t.Fatal(err)
		}
		run := f.reconcileRun(t, forged.Name, taugridv1.PhaseFailed)
		if !strings.Contains(run.Status.Message, "was not checked for a signature") {
			t.Errorf("message = %q", run.Status.Message)
		}
		f.wantSubmittedOnly(t, signedTag, signedRef)
	})

	t.Run("branch commits run only when signed", func(t *testing.T) {
		patch := client.MergeFrom(f.repo.DeepCopy())
		f.repo.Spec.Triggers.Branches = []string{"main"}
		if err := k8s.Patch(context.Background(), f.repo, patch); err != nil {
			t.Fatal(err)
		}
		f.poll(t)
		f.research.edit("tau.yaml", "name: ", "name: x")
		f.research.git("-C", f.research.work, "add", "-A")
		f.research.gitWith(nil, append(alice.GitArgs(), "commit", "--quiet", "-S", "-m", "signed tau change")...)
		f.research.git("-C", f.research.work, "push", "--quiet", "origin", "main")
		signed := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
		f.poll(t)
		f.signedRun(t, "refs/heads/main", taugridv1.SignatureStatus{Verified: true, Method: "ssh", Principal: "alice@example.com",
			Fingerprint: fingerprint(t, alice.Public), Object: "commit " + signed})

		f.research.edit("tau.yaml", "name: x", "name: y")
		unsigned := f.research.commit("unsigned tau change")
		f.poll(t)
		for _, r := range f.listRuns(t) {
			if r.Spec.Commit == unsigned {
				run := f.reconcileRun(t, r.Name, taugridv1.PhaseFailed)
				if !strings.Contains(run.Status.Message, "refused: refs/heads/main is not signed by an allowed key (commit "+unsigned+": not signed)") {
					t.Errorf("message = %q", run.Status.Message)
				}
				return
			}
		}
		t.Errorf("no TauRun for the unsigned commit %s", unsigned)
	})
}

func TestOnlyAllowedOpenPGPSignersStartRuns(t *testing.T) {
	// The keys first: the fixture's clock, which judges them, reads the
	// time it is made, and an OpenPGP key is not valid before its creation.
	alice := gittest.NewGPGSigner(t, "Alice <alice@example.com>", "0")
	carol := gittest.NewGPGSigner(t, "Carol <carol@example.com>", "0")
	mallory := gittest.NewGPGSigner(t, "Mallory <mallory@example.com>", "0")
	f := newRunFixture(t, "sg2")
	sshKey := gittest.NewSSHSigner(t, "alice@laptop")
	signedRef := f.research.signedTag(alice.GitArgs(), alice.Env(), "refs/tau/runs/signed", "target: default\n")
	revoked := f.research.signedTag(carol.GitArgs(), carol.Env(), "refs/tau/runs/revoked", "target: default\n")
	unknown := f.research.signedTag(mallory.GitArgs(), mallory.Env(), "refs/tau/runs/unknown", "target: default\n")
	wrongFormat := f.research.signedTag(sshKey.GitArgs(), nil, "refs/tau/runs/ssh", "target: default\n")
	carol.Revoke() // her key was lost: the team lists it with its revocation
	f.requireSignatures(t, "openpgp", map[string]string{"alice.asc": string(alice.Public()), "carol.asc": string(carol.Public())})
	// The controller looks after the tags were signed: OpenPGP refuses a
	// signature made after the time it is judged at.
	f.repos.Clock.(*clocktesting.FakePassiveClock).SetTime(time.Now())
	f.poll(t)

	f.refusedRun(t, revoked, "key revoked: OpenPGP key ")
	f.refusedRun(t, unknown, "signer not allowed: OpenPGP key "+mallory.Fingerprint)
	f.refusedRun(t, wrongFormat, "this repository allows only OpenPGP keys")
	tag := f.research.git("-C", f.research.work, "ls-remote", "origin", signedRef)
	f.signedRun(t, signedRef, taugridv1.SignatureStatus{Verified: true, Method: "openpgp", Principal: "Alice <alice@example.com>",
		Fingerprint: alice.Fingerprint, Object: "tag " + strings.Fields(tag)[0]})
	f.wantSubmittedOnly(t, signedRef)
}

func TestSignatureVerdict(t *testing.T) {
	const ref, obj = "refs/tau/runs/r-1", "tag 0123"
	alice := gitsource.Signer{Kind: "ssh", Fingerprint: "SHA256:abc", Identity: "alice@example.com"}
	tests := map[string]struct {
		mode   string
		signer gitsource.Signer
		err    error
		want   taugridv1.SignatureStatus
		retry  bool
	}{
		"an allowed signer": {mode: "ssh", signer: alice,
			want: taugridv1.SignatureStatus{Verified: true, Method: "ssh", Principal: "alice@example.com", Fingerprint: "SHA256:abc", Object: obj}},
		"a good signature of the other format": {mode: "openpgp", signer: alice,
			want: taugridv1.SignatureStatus{Object: obj, Reason: "refused: refs/tau/runs/r-1 is not signed by an allowed key (signer not allowed: signed with ssh, the repository requires openpgp)"}},
		"unsigned": {mode: "ssh", err: fmt.Errorf("tag r-1: %w", gitsource.ErrUnsigned),
			want: taugridv1.SignatureStatus{Object: obj, Reason: "refused: refs/tau/runs/r-1 is not signed by an allowed key (tag r-1: not signed)"}},
		"revoked": {mode: "ssh", err: fmt.Errorf("%w: SSH key SHA256:abc", gitsource.ErrKeyRevoked),
			want: taugridv1.SignatureStatus{Object: obj, Reason: "refused: refs/tau/runs/r-1 is not signed by an allowed key (key revoked: SSH key SHA256:abc)"}},
		"the tag is missing from the cache: retried, not refused": {mode: "ssh", err: fmt.Errorf("%w: tag", gitsource.ErrNotFound), retry: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := repoctrl.SignatureVerdict(ref, obj, tc.mode, tc.signer, tc.err)
			if (err != nil) != tc.retry {
				t.Fatalf("err = %v, want retry %v", err, tc.retry)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestKeyRingOfAVerificationSecret(t *testing.T) {
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKs2ZaSv3wdRsWb5y0mDEdbJ4ZcBFEVIMk6hZxxgjdbS"
	tests := map[string]struct {
		mode string
		data map[string][]byte
		want string // "" when usable
	}{
		"allowed_signers":                    {mode: "ssh", data: map[string][]byte{"allowed_signers": []byte("a@x " + key)}},
		"only revoked keys":                  {mode: "ssh", data: map[string][]byte{repoctrl.SecretRevokedKeys: []byte(key)}, want: "no allowed ssh keys"},
		"an empty Secret":                    {mode: "openpgp", data: nil, want: "no allowed openpgp keys"},
		"a broken line names value and line": {mode: "ssh", data: map[string][]byte{"team": []byte("a@x " + key + "\nb@x nope\n")}, want: "team: line 2: "},
		"SSH keys where OpenPGP is required": {mode: "openpgp", data: map[string][]byte{"keys": []byte("a@x " + key)}, want: "keys: "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := repoctrl.KeyRingOf(tc.mode, tc.data)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "nowhere"},
		Spec: taugridv1.TauRepositorySpec{Verification: &taugridv1.Verification{Mode: "ssh", SecretRef: taugridv1.LocalObjectReference{Name: "missing"}}}}
	integration(t)
	if _, err := repoctrl.LoadKeyRing(context.Background(), k8s, repo); !errors.Is(err, repoctrl.ErrKeysUnusable) {
		t.Errorf("a missing Secret: err = %v, want errKeysUnusable", err)
	}
}
