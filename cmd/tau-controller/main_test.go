package main

import (
	"math"
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

// Worker counts below one, memory ratios outside 0..1 and forge paces
// that post nothing are refused, naming the flag and what it wants,
// before anything starts.
func TestFlagsNoControllerCouldRunWithAreRefused(t *testing.T) {
	good := options{runWorkers: 32, repositoryWorkers: 16, forgeWorkers: 8, memoryLimitRatio: 0.9, forgeRate: 1, forgeBurst: 20}
	if err := validate(good); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for want, o := range map[string]options{
		"--run-workers=0: want at least 1":                     {runWorkers: 0, repositoryWorkers: 1, forgeWorkers: 1},
		"--repository-workers=-2: want at least 1":             {runWorkers: 1, repositoryWorkers: -2, forgeWorkers: 1},
		"--forge-workers=0: want at least 1":                   {runWorkers: 1, repositoryWorkers: 1},
		"--memory-limit-ratio=1.5: want a fraction between 0":  {runWorkers: 1, repositoryWorkers: 1, forgeWorkers: 1, memoryLimitRatio: 1.5, forgeRate: 1, forgeBurst: 1},
		"--memory-limit-ratio=-0.1: want a fraction between 0": {runWorkers: 1, repositoryWorkers: 1, forgeWorkers: 1, memoryLimitRatio: -0.1, forgeRate: 1, forgeBurst: 1},
		"--forge-rate=0: want a number of posts a second":      {runWorkers: 1, repositoryWorkers: 1, forgeWorkers: 1, forgeBurst: 1},
		"--forge-rate=NaN: want a number of posts a second":    {runWorkers: 1, repositoryWorkers: 1, forgeWorkers: 1, forgeRate: math.NaN(), forgeBurst: 1},
		"--forge-rate=+Inf: want a number of posts a second":   {runWorkers: 1, repositoryWorkers: 1, forgeWorkers: 1, forgeRate: math.Inf(1), forgeBurst: 1},
		"--forge-burst=0: want at least 1":                     {runWorkers: 1, repositoryWorkers: 1, forgeWorkers: 1, forgeRate: 1},
	} {
		if err := validate(o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: err = %v, want %q", o, err, want)
		}
	}
}
