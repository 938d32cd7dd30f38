package sealing

import (
	"context"
	"encoding/base64"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// wandbKey is a Secret's value only the pod names, not the tau file.
const wandbKey = "wandb-secret-value-987654321"

// secretPod is the attempt's pod, reading HF_TOKEN from Secret hf and
// WANDB_API_KEY from Secret wandb-key, its termination message msg.
func secretPod(msg string) *corev1.Pod {
	return builders.MakeAttemptPod("r-1-xyz12", ns, "r", 1).OnNode("gpu-1").EnvFromSecretKey("HF_TOKEN", "hf", "token").
		EnvFromSecretKey("WANDB_API_KEY", "wandb-key", "key").Exited(1).ExitMessage("Error", msg, started, ended).Obj()
}

// The attacker's side: a run that prints its secrets where the bundle
// looks (its log, its termination message, events, its status) leaves no
// secret value in the store, in any encoding.
func TestNoSecretValueReachesTheStore(t *testing.T) {
	wandb := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wandb-key", Namespace: ns}, Data: map[string][]byte{"key": []byte(wandbKey)}}
	b64 := base64.StdEncoding.EncodeToString([]byte(hfToken))
	cases := map[string]struct {
		run  *taugridv1.TauRun
		objs []client.Object
		log  string
	}{
		"in the log": {
			log: "HF_TOKEN=" + hfToken + "\nlogging in with " + wandbKey + "\n"},
		"base64 in the log": {
			log: "Authorization: Basic " + b64 + "\n"},
		"in the termination message": {
			objs: []client.Object{secretPod("failed to log in with " + hfToken + " and " + wandbKey)}},
		"in an event": {
			objs: []client.Object{builders.MakeEventAbout("e1", ns, "Pod", "r-1-xyz12", "Warning", "Failed", "env HF_TOKEN="+hfToken, started)}},
		"in the run's message": {
			run: sealingRun().Phase(taugridv1.PhaseFailed, "the run printed "+hfToken).Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			run := tc.run
			if run == nil {
				run = sealingRun().Obj()
			}
			objs := append([]client.Object{researchRepo(), hfSecret(), wandb, run, attemptJob(), attemptWorkload()}, tc.objs...)
			if !slices.ContainsFunc(objs, func(o client.Object) bool { _, ok := o.(*corev1.Pod); return ok }) {
				objs = append(objs, secretPod("exit 1"))
			}
			w := newSealWorld(t, fakeLogs{"r-1-xyz12/main": tc.log}, objs...)
			if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
				t.Fatal(err)
			}
			w.bundle(t, 1)
			for _, secret := range []string{hfToken, wandbKey, b64} {
				if files := w.storeHolds(t, secret); len(files) > 0 {
					t.Errorf("%q is stored in %q", secret, files)
				}
			}
			if files := w.storeHolds(t, evidence.Masked); len(files) == 0 {
				t.Error("nothing masked: the secret never reached the bundle, so the case tests nothing")
			}
		})
	}
}

// A Secret that cannot be read cannot be masked by value: the bundle says
// so, and is sealed all the same. (The name is short: a name of 8
// characters or more is masked in the note itself, see the report.)
func TestASecretThatCannotBeReadIsNoted(t *testing.T) {
	for _, name := range []string{"wandb", "wandb-api-key"} { // a long name is not masked as a credential
		t.Run(name, func(t *testing.T) {
			pod := builders.MakeAttemptPod("r-1-xyz12", ns, "r", 1).EnvFromSecretKey("WANDB_API_KEY", name, "key").Exited(1).Obj()
			w := newSealWorld(t, nil, researchRepo(), hfSecret(), sealingRun().Obj(), attemptJob(), attemptWorkload(), pod)
			if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
				t.Fatal(err)
			}
			_, rec, _ := w.bundle(t, 1)
			want := []string{"could not read " + name + " (a Secret) to mask its values (token-looking strings are still masked): NotFound"}
			if d := cmp.Diff(want, rec.Notes); d != "" {
				t.Errorf("notes (-want +got):\n%s", d)
			}
		})
	}
}
