package render

import (
	"os"
	"strings"
	"testing"
)

func TestOverridesChangeValuesButNeverBypassChecks(t *testing.T) {
	pol := examplePolicy(t)
	data, err := os.ReadFile("../examples/research/tau.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		overrides map[string]string
		wantErr   string
		check     func(*Plan) string
	}{
		"a new timeout and CPU count apply": {
			overrides: map[string]string{"limits.timeout": "30m", "compute.cpu": "4"},
			check: func(p *Plan) string {
				if p.Timeout.String() != "30m0s" || p.CPU.String() != "4" {
					return "timeout " + p.Timeout.String() + ", cpu " + p.CPU.String()
				}
				return ""
			},
		},
		"a field the file does not set is added": {
			overrides: map[string]string{"policy.priority": "high"},
			check: func(p *Plan) string {
				if p.PriorityClass != "tau-high" {
					return "priority class " + p.PriorityClass
				}
				return ""
			},
		},
		"more GPUs than the profile allows are refused, naming the override": {
			overrides: map[string]string{"compute.gpus": "8"},
			wantErr:   `tau.yaml (--set compute.gpus=8): compute.gpus: 8 GPUs in all exceed profile "h200-1"'s limit of 1`,
		},
		"a value of the wrong type is refused": {
			overrides: map[string]string{"compute.gpus": "many"},
			wantErr:   "compute.gpus: expected a whole number",
		},
		"an unknown field is refused": {
			overrides: map[string]string{"compute.gpuz": "1"},
			wantErr:   `compute.gpuz: unknown field (did you mean "gpus"?)`,
		},
		"a list value is refused": {
			overrides: map[string]string{"args": "[--x]"},
			wantErr:   `value "[--x]" is not a single YAML scalar`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rc, err := LoadConfigWithOverrides("tau.yaml", data, tc.overrides)
			var p *Plan
			if err == nil {
				p, err = Resolve(rc, pol, "team-a", testRun)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(p); msg != "" {
				t.Error(msg)
			}
			plain, _ := LoadConfig("tau.yaml", data)
			if rc.Digest == plain.Digest {
				t.Error("the config digest ignores the overrides")
			}
		})
	}
}
