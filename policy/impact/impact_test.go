package impact

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const h200 = "nvidia.com/gpu.product"

func TestPreviewSaysWhatAChangeDoesToEachTenant(t *testing.T) {
	eightGPUs := makeRun("r-queued", "team-a").gpus("h200-8", 8, 1)
	cases := map[string]struct {
		edits    func(t *testing.T) map[string]string
		runs     []Run
		nodes    []corev1.Node
		accepted bool
		// want are the runs touched, by name: outcome and the first reason.
		want        map[string][2]string
		stranded    bool
		summary     string
		bodyHas     []string
		unchangedOf map[string]int
	}{
		"a commit that changes nothing touches nothing": {
			edits:   func(*testing.T) map[string]string { return nil },
			runs:    []Run{eightGPUs.obj(), makeRun("r-run", "team-a").gpus("h200-8", 16, 2).running().obj()},
			summary: "No effect on tenants' quotas, runs or nodes",
			bodyHas: []string{"Unchanged: team-a (2 runs), team-b (0 runs)."},
		},
		"taking a profile from a team refuses its runs' retries but starts what is queued": {
			edits: func(t *testing.T) map[string]string {
				return map[string]string{"tenants.yaml": edited(t, "tenants.yaml", "profiles: [cpu, h200-1, h200-8]", "profiles: [cpu, h200-1]")}
			},
			runs: []Run{
				makeRun("r-run", "team-a").gpus("h200-8", 16, 2).running().obj(),
				makeRun("r-queued", "team-a").gpus("h200-8", 8, 1).obj(),
				makeRun("r-small", "team-a").gpus("h200-1", 1, 1).obj(),
			},
			want: map[string][2]string{
				"r-run":    {string(RefusedOnRetry), "profile h200-8 is not offered to tenant team-a"},
				"r-queued": {string(StartsAsSubmitted), "profile h200-8 is not offered to tenant team-a"},
			},
			summary: "1 running run refused on retry; 1 queued run refused on retry; 1 removal",
			bodyHas: []string{
				"- profile h200-8: no longer offered to the tenant",
				"- r-run (llm, running): keeps running; would be refused on retry: profile h200-8",
				"1 other run not affected.",
			},
		},
		"cutting a team's GPUs under a queued run's ask strands it": {
			edits: func(t *testing.T) map[string]string {
				return map[string]string{"kueue/cluster-queues.yaml": edited(t, "kueue/cluster-queues.yaml", "nominalQuota: 8\n        borrowingLimit: 8", "nominalQuota: 4\n        borrowingLimit: 0")}
			},
			runs: []Run{eightGPUs.obj(), makeRun("r-run", "team-a").gpus("h200-8", 8, 1).running().obj()},
			want: map[string][2]string{
				"r-queued": {string(NeverStarts), "ClusterQueue team-a: asks 8 nvidia.com/gpu, flavor h200 can give at most 4"},
			},
			stranded: true,
			summary:  "Strands 1 queued run (team-a 1); 1 quota changed",
			bodyHas: []string{
				"| team-a | h200 | nvidia.com/gpu | 8 (+8 borrowable) | 4 (under what is in use) | 8 |",
				"**Failing:**",
			},
		},
		"an accepted stranding is said so and does not fail": {
			edits: func(t *testing.T) map[string]string {
				return map[string]string{"kueue/tenants.yaml": edited(t, "kueue/tenants.yaml", "clusterQueue: team-a", "clusterQueue: team-gone")}
			},
			runs:     []Run{eightGPUs.obj()},
			accepted: true,
			want: map[string][2]string{
				"r-queued": {string(NeverStarts), "ClusterQueue team-gone (of LocalQueue team-a/runs) is not declared"},
			},
			stranded: true,
			summary:  "Accepted: strands 1 queued run (team-a 1); 1 repository changes queue",
			bodyHas:  []string{"- llm: runs → ClusterQueue team-gone, was runs → ClusterQueue team-a", "it was accepted"},
		},
		"a queue that could not admit the run before is not this change's doing": {
			edits: func(t *testing.T) map[string]string {
				return map[string]string{"limits.yaml": edited(t, "limits.yaml", "max_retries: 5", "max_retries: 3")}
			},
			runs:    []Run{makeRun("r-huge", "team-b").gpus("h200-32", 32, 4).obj()},
			summary: "1 removal",
			bodyHas: []string{"### Every tenant", "- limit max_retries: 5 → 3"},
		},
		"an image taken off the allow-list, a priority withdrawn, a repository pattern dropped": {
			edits: func(t *testing.T) map[string]string {
				return map[string]string{
					"images.yaml":  edited(t, "images.yaml", "- nvcr.io/nvidia/pytorch\n", ""),
					"tenants.yaml": edited(t, "tenants.yaml", "priorities: [low, high]", "priorities: [low]"),
				}
			},
			runs: []Run{
				makeRun("r-high", "team-a").gpus("h200-1", 1, 1).priority("tau-high").running().obj(),
				makeRun("r-py", "team-b").image("python:3.12").pending().obj(),
				makeRun("r-normal", "team-b").gpus("h200-1", 1, 1).image("python:3.12").priority("tau-normal").obj(),
			},
			want: map[string][2]string{
				"r-high": {string(RefusedOnRetry), "image nvcr.io/nvidia/pytorch:24.05-py3 is not under any allowed registry or repository"},
			},
			summary: "1 running run refused on retry; 2 removals",
			bodyHas: []string{"- priority high: no longer offered to the tenant", "- image nvcr.io/nvidia/pytorch: removed from images.yaml allow"},
		},
		"a run not yet submitted is stranded when its repository is no longer its tenant's": {
			edits: func(t *testing.T) map[string]string {
				return map[string]string{"tenants.yaml": edited(t, "tenants.yaml", "  - \"https://git.example.com/team-b/*\"\n", "  - \"https://git.example.com/team-b/public-*\"\n")}
			},
			runs: []Run{makeRun("r-new", "team-b").pending().obj()},
			want: map[string][2]string{
				"r-new": {string(NeverStarts), "repository https://git.example.com/team-b/llm is not one tenant team-b may register"},
			},
			stranded: true,
			summary:  "Strands 1 queued run (team-b 1); 1 removal",
		},
		"nodes the flavors no longer select are listed": {
			edits: func(t *testing.T) map[string]string {
				return map[string]string{"kueue/flavors.yaml": edited(t, "kueue/flavors.yaml", "NVIDIA-H200", "NVIDIA-H100")}
			},
			nodes:    []corev1.Node{node("gpu-1", map[string]string{h200: "NVIDIA-H200"}), node("gpu-2", map[string]string{h200: "NVIDIA-H100"})},
			runs:     []Run{eightGPUs.obj()},
			want:     map[string][2]string{"r-queued": {string(NeverStarts), "ClusterQueue team-a: flavor h200 has nvidia.com/gpu.product=NVIDIA-H100, the run selects nvidia.com/gpu.product=NVIDIA-H200"}},
			summary:  "Strands 1 queued run (team-a 1); 1 node no flavor covers",
			bodyHas:  []string{"Kueue gives no quota of these: gpu-1"},
			stranded: true,
		},
	}
	old := load(t, "the policy in force", examplePlatform(t, nil))
	cluster := Cluster{
		Repositories: []taugridv1.TauRepository{
			repository("llm", "team-a", "https://git.example.com/team-a/llm"),
			repository("llm", "team-b", "https://git.example.com/team-b/llm"),
		},
		Usage: map[string]map[string]corev1.ResourceList{"team-a": {"h200": {"nvidia.com/gpu": resource.MustParse("8")}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := cluster
			c.Runs, c.Nodes = tc.runs, tc.nodes
			p := Compute(old, load(t, "the working tree", examplePlatform(t, tc.edits(t))), c, tc.accepted)
			got := map[string][2]string{}
			for _, ti := range p.Tenants {
				for _, r := range ti.Runs {
					got[r.Name] = [2]string{string(r.Outcome), r.Why[0]}
				}
			}
			if tc.want == nil {
				tc.want = map[string][2]string{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("runs (-want +got):\n%s\n%s", diff, p.Body)
			}
			if p.Stranded != tc.stranded || p.Failing() != (tc.stranded && !tc.accepted) {
				t.Errorf("Stranded = %v, Failing = %v; want %v, accepted %v", p.Stranded, p.Failing(), tc.stranded, tc.accepted)
			}
			if p.Summary != tc.summary {
				t.Errorf("Summary = %q, want %q", p.Summary, tc.summary)
			}
			for _, s := range tc.bodyHas {
				if !strings.Contains(p.Body, s) {
					t.Errorf("the body lacks %q:\n%s", s, p.Body)
				}
			}
		})
	}
}

func TestTheSummaryFitsACommitStatus(t *testing.T) {
	long := strings.Repeat("x; ", 80)
	if got := clip(long, MaxSummary); utf8.RuneCountInString(got) > MaxSummary || !strings.HasSuffix(got, "…") {
		t.Errorf("clip = %q (%d characters)", got, utf8.RuneCountInString(got))
	}
	p := &Preview{Tenants: []TenantImpact{}}
	for _, team := range []string{"team-alpha", "team-bravo", "team-charlie", "team-delta", "team-echo", "team-foxtrot"} {
		p.Tenants = append(p.Tenants, TenantImpact{Tenant: team, Runs: []RunImpact{{Outcome: NeverStarts}}, Quotas: make([]QuotaChange, 3), Removals: make([]Removal, 2)})
	}
	p.UncoveredNodes = []string{"a", "b"}
	if s := summary(p); utf8.RuneCountInString(s) > MaxSummary {
		t.Errorf("summary is %d characters: %q", utf8.RuneCountInString(s), s)
	}
}

func TestAPolicyThatDoesNotLoadSaysWhere(t *testing.T) {
	cases := map[string]struct {
		edits map[string]string
		want  string
	}{
		"a bad field names its file and line": {
			edits: map[string]string{"profiles.yaml": "profiles:\n- name: cpu\n  max_gpus: lots\n"},
			want:  "profiles.yaml:3",
		},
		"a bad Kueue object names its file": {
			edits: map[string]string{"kueue/extra.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n"},
			want:  "kueue/extra.yaml: document 1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(examplePlatform(t, tc.edits), "the working tree")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "the working tree does not load") {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// A flavor the change adds that no node carries is named; one the policy
// already had is not a finding of this change.
func TestAFlavorNoNodeServesIsNamed(t *testing.T) {
	b300 := "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: b300\nspec:\n  nodeLabels:\n    nvidia.com/gpu.product: NVIDIA-B300\n"
	nodes := []corev1.Node{node("gpu-1", map[string]string{h200: "NVIDIA-H200"})}
	old := load(t, "the policy in force", examplePlatform(t, nil))
	flavors := edited(t, "kueue/flavors.yaml", "NVIDIA-H200", "NVIDIA-H200") + b300
	next := load(t, "the working tree", examplePlatform(t, map[string]string{"kueue/flavors.yaml": flavors}))
	p := Compute(old, next, Cluster{Nodes: nodes}, false)
	if !slices.Equal(p.UnservedFlavors, []string{"b300"}) || p.Summary != "1 flavor no node serves" || !strings.Contains(p.Body, "No node carries the labels of b300") {
		t.Errorf("unserved %v, summary %q:\n%s", p.UnservedFlavors, p.Summary, p.Body)
	}
	if p := Compute(next, next, Cluster{Nodes: nodes}, false); len(p.UnservedFlavors) != 0 {
		t.Errorf("a flavor already declared is named again: %v", p.UnservedFlavors)
	}
}
