package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
)

// readmeInstall is the README's `helm install` command: the first sh block
// of its "Install on a cluster" section, joined across line continuations.
func readmeInstall() (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		return "", err
	}
	_, section, ok := strings.Cut(string(b), "\n## Install on a cluster\n")
	if !ok {
		return "", fmt.Errorf("README.md has no \"## Install on a cluster\" section")
	}
	for block := range strings.SplitSeq(section, "```sh\n") {
		code, _, _ := strings.Cut(block, "```")
		code = strings.ReplaceAll(code, "\\\n", " ")
		for line := range strings.SplitSeq(code, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "helm install ") {
				return strings.TrimSpace(line), nil
			}
		}
	}
	return "", fmt.Errorf("README.md: no helm install command under \"Install on a cluster\"")
}

// readmeValues are the values the README's command sets with --set.
func readmeValues() map[string]any {
	cmd, err := readmeInstall()
	if err != nil {
		panic(err)
	}
	values := map[string]any{}
	fields := strings.Fields(cmd)
	for i, f := range fields {
		if f == "--set" && i+1 < len(fields) {
			if err := strvals.ParseInto(fields[i+1], values); err != nil {
				panic(fmt.Sprintf("README.md: --set %s: %v", fields[i+1], err))
			}
		}
	}
	return values
}

// TestTheREADMEInstallsTheChartFromThisRepoIntoItsNamespace: the command
// installs the published chart (make publish pushes this chart there) at a
// version into the namespace the tests install into; its values are
// rendered on this chart and dry-run with the other value sets.
func TestTheREADMEInstallsTheChartFromThisRepoIntoItsNamespace(t *testing.T) {
	cmd, err := readmeInstall()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"helm install taugrid oci://ghcr.io/taugrid/taugrid --version ", "--namespace " + Namespace, "--create-namespace"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("README's %q lacks %q", cmd, want)
		}
	}
	for f := range strings.FieldsSeq(cmd) {
		if strings.HasPrefix(f, "--") && !map[string]bool{"--namespace": true, "--create-namespace": true, "--set": true, "--version": true}[f] {
			t.Errorf("README's command uses %s, which this test does not apply", f)
		}
	}
	if len(readmeValues()) == 0 {
		t.Error("README's command sets no values")
	}
	render(t, readmeValues())
}
