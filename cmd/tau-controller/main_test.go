package main

import (
	"os"
	"strings"
	"testing"
)

// TestTheDefaultNamespaceIsTheOneTheRBACNames: the namespaced rules
// generated from the RBAC markers (leases, events, Secrets) are for the
// namespace the controller runs in when nothing says otherwise.
func TestTheDefaultNamespaceIsTheOneTheRBACNames(t *testing.T) {
	role, err := os.ReadFile("../../charts/taugrid/files/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, line := range strings.Split(string(role), "\n") {
		if ns, ok := strings.CutPrefix(strings.TrimSpace(line), "namespace: "); ok {
			named = append(named, ns)
		}
	}
	if len(named) == 0 {
		t.Fatal("the generated Role names no namespace")
	}
	for _, ns := range named {
		if ns != defaultNamespace {
			t.Errorf("the RBAC markers name namespace %s; the controller defaults to %s", ns, defaultNamespace)
		}
	}
}
