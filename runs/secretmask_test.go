package runs

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestLiteralValuesOfCredentialVariablesAreMasked: a token written into
// the pod spec as a literal (WANDB_API_KEY: "...") rather than read from a
// Secret is masked like a Secret's value, in its encodings too; other
// literals are not.
func TestLiteralValuesOfCredentialVariablesAreMasked(t *testing.T) {
	pod := corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "fetch", Env: []corev1.EnvVar{{Name: "GIT_PASSWORD", Value: "init-pass-9f8e7d"}}}},
		Containers: []corev1.Container{{Name: "main", Env: []corev1.EnvVar{
			{Name: "WANDB_API_KEY", Value: "wandb-literal-0123456789"},
			{Name: "HF_TOKEN", Value: "hf-literal-abcdef"},
			{Name: "TAU_RUN", Value: "run-literal-name"},
		}}},
	}}
	m, err := SecretMasker(context.Background(), nil, "team-a", []corev1.Pod{pod})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	log := "key wandb-literal-0123456789\nb64 d2FuZGItbGl0ZXJhbC0wMTIzNDU2Nzg5\ntok hf-literal-abcdef pw init-pass-9f8e7d\nrun run-literal-name\n"
	if err := CopyMasked(&out, strings.NewReader(log), m); err != nil {
		t.Fatal(err)
	}
	want := "key ****\nb64 ****\ntok **** pw ****\nrun run-literal-name\n"
	if out.String() != want {
		t.Errorf("masked log:\n%s\nwant:\n%s", out.String(), want)
	}
}
