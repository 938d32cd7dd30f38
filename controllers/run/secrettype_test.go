package run

import (
	"bytes"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// From a team member's side: the platform lets the team's runs read Secret
// hf, and someone made hf a ServiceAccount token (the namespace's token
// controller fills it with a credential to the API server as that
// account), or a registry credential. A run naming it is refused with what
// to do, and submits nothing; an Opaque hf, or a type the platform lists in
// tenants[].secret_types, runs.
func TestARunReadsOnlyOpaqueSecretsUnlessThePolicyAllowsTheType(t *testing.T) {
	cases := map[string]struct {
		typ     corev1.SecretType
		allowed []string // tenants[].secret_types
		fails   bool
	}{
		"an Opaque Secret":                         {typ: corev1.SecretTypeOpaque},
		"a Secret with no type (Opaque)":           {typ: ""},
		"a ServiceAccount token":                   {typ: corev1.SecretTypeServiceAccountToken, fails: true},
		"a registry credential":                    {typ: corev1.SecretTypeDockerConfigJson, fails: true},
		"a ServiceAccount token the policy allows": {typ: corev1.SecretTypeServiceAccountToken, allowed: []string{"kubernetes.io/service-account-token"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hf := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf", Namespace: ns}, Type: tc.typ, Data: map[string][]byte{"token": []byte("x")}}
			w := newRunWorld(t, nil, builders.MakeTauRun("r1", ns).UID("u1").Obj(), hf)
			w.files.files["tau.yaml"] = bytes.Replace(exampleTauFile(t), []byte("    PYTHONUNBUFFERED: \"1\"\n"),
				[]byte("    PYTHONUNBUFFERED: \"1\"\n  env_secret:\n    HF_TOKEN: \"hf:token\"\n"), 1)
			w.policies.pol.Tenant(ns).SecretTypes = tc.allowed
			if _, err := w.reconcile(t, "r1"); err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if !tc.fails {
				if got.Status.Phase != taugridv1.PhaseQueued || len(w.jobs(t)) != 1 {
					t.Errorf("phase %s (%s), %d Jobs; want the run queued", got.Status.Phase, got.Status.Message, len(w.jobs(t)))
				}
				return
			}
			if got.Status.Phase != taugridv1.PhaseFailed || len(w.jobs(t)) != 0 {
				t.Fatalf("phase %s, %d Jobs; want the run failed and nothing submitted", got.Status.Phase, len(w.jobs(t)))
			}
			for _, want := range []string{"runtime.env_secret.HF_TOKEN", string(tc.typ), "not Opaque", "tenants[].secret_types"} {
				if !strings.Contains(got.Status.Message, want) {
					t.Errorf("message %q lacks %q", got.Status.Message, want)
				}
			}
		})
	}
}
