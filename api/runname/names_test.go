package runname

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The CRD's markers are literals; this keeps them the same rule as
// ValidateTarget and ValidateRunName, which the CLI and the parser use.
func TestTheCRDSpellsTheSharedNameRules(t *testing.T) {
	b, err := os.ReadFile("../crds/taugrid.dev_tauruns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	target := root.Properties["spec"].Properties["target"]
	if target.Pattern != LabelPattern || target.MaxLength == nil || *target.MaxLength != MaxTargetLength {
		t.Errorf("spec.target: pattern %q, maxLength %v; want %q and %d", target.Pattern, target.MaxLength, LabelPattern, MaxTargetLength)
	}
	found := false
	for _, r := range root.XValidations {
		if strings.Contains(r.Rule, "self.metadata.name") {
			found = true
			want := "self.metadata.name.size() <= 43 && self.metadata.name.matches('" + LabelPattern + "')"
			if r.Rule != want || MaxRunNameLength != 43 {
				t.Errorf("name rule %q, want %q", r.Rule, want)
			}
		}
	}
	if !found {
		t.Error("the TauRun CRD has no rule on metadata.name")
	}
}

func TestValidateTarget(t *testing.T) {
	for target, want := range map[string]string{
		"default":               "",
		"ray":                   "",
		"eval-2":                "",
		strings.Repeat("a", 63): "",
		"exp.v2":                `"exp.v2" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/exp-v2.yaml?)`,
		"Exp_V2":                `"Exp_V2" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/exp-v2.yaml?)`,
		"-ray":                  `"-ray" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/ray.yaml?)`,
		"":                      `the target is empty: want "default" (tau.yaml) or the name of tau/<target>.yaml`,
		strings.Repeat("a", 64): "want at most 63 characters",
		"../../etc/passwd":      `"../../etc/passwd" is not a target name`,
	} {
		err := ValidateTarget(target)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v, want valid", target, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want %q", target, err, want)
		}
	}
}
