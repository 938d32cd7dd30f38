package render

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// examplePolicyFS is the example platform policy in memory, for tests that
// break one file at a time.
func examplePolicyFS(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	for _, f := range policyFiles {
		data, err := os.ReadFile(examplePolicyDir + "/" + f.name)
		if errors.Is(err, fs.ErrNotExist) && !f.required {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fsys[f.name] = &fstest.MapFile{Data: data}
	}
	return fsys
}

func TestBrokenPolicyIsRefusedWithFileLineAndField(t *testing.T) {
	tests := map[string]struct {
		file, content string
		want          string
	}{
		"a syntax error": {
			file: "tenants.yaml", content: "tenants:\n- name: [team-a\n",
			want: "tenants.yaml:2:1: invalid YAML: did not find expected ',' or ']'",
		},
		"an unknown key in a profile": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpu: 0\n  max_nodes: 1\n",
			want: `profiles.yaml:3:3: profiles[0].max_gpu: unknown field (did you mean "max_gpus"?)`,
		},
		"a tenant whose default profile does not exist": {
			file: "tenants.yaml", content: "tenants:\n- name: team-a\n  namespace: team-a\n  queues: [runs]\n  default_profile: a100\n",
			want: `tenants.yaml:5:20: tenants[0].default_profile: unknown profile "a100"`,
		},
		"a tenant allowed a profile that does not exist": {
			file: "tenants.yaml", content: "tenants:\n- name: team-a\n  namespace: team-a\n  queues: [runs]\n  default_profile: cpu\n  profiles: [cpu, tpu]\n",
			want: `tenants.yaml:6:19: tenants[0].profiles[1]: unknown profile "tpu"`,
		},
		"two tenants in one namespace": {
			file: "tenants.yaml", content: "tenants:\n- {name: a, namespace: ns, queues: [q], default_profile: cpu}\n- {name: b, namespace: ns, queues: [q], default_profile: cpu}\n",
			want: `tenants.yaml:3:24: tenants[1].namespace: "ns" is declared twice`,
		},
		"a Secret type that is no type": {
			file: "tenants.yaml", content: "tenants:\n- name: team-a\n  namespace: team-a\n  queues: [runs]\n  default_profile: cpu\n  secret_types: [\"kubernetes.io/service account token\"]\n",
			want: `tenants.yaml:6:18: tenants[0].secret_types[0]: "kubernetes.io/service account token" is not a Secret type; expected one such as kubernetes.io/basic-auth`,
		},
		"a tenant with no queue": {
			file: "tenants.yaml", content: "tenants:\n- {name: a, namespace: a, default_profile: cpu}\n",
			want: `tenants.yaml:2:3: tenants[0].queues: required: the tenant's Kueue LocalQueue`,
		},
		"a negative GPU cap": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: -1\n  max_nodes: 1\n",
			want: "profiles.yaml:3:13: profiles[0].max_gpus: must be at least 0, got -1",
		},
		"a default above the profile's cap": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 1\n  max_nodes: 1\n  defaults: {gpus: 2}\n",
			want: "profiles.yaml:5:20: profiles[0].defaults.gpus: must be between 0 and max_gpus (1), got 2",
		},
		"a reserved pod annotation": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 0\n  max_nodes: 1\n  pod_annotations: {kueue.x-k8s.io/queue-name: other}\n",
			want: `profiles.yaml:5:20: profiles[0].pod_annotations: annotation "kueue.x-k8s.io/queue-name" is reserved for TauGrid and Kueue`,
		},
		"a negative termination grace cap": {
			file: "limits.yaml", content: "max_termination_grace: -1s\n",
			want: "limits.yaml:1:24: max_termination_grace: must be a positive duration",
		},
		"an empty image allow-list": {
			file: "images.yaml", content: "allow: []\n",
			want: "images.yaml:1:8: allow: empty: no image could run; list the registry prefixes runs may use",
		},
		"an allow-list entry under Docker Hub's legacy host": {
			file: "images.yaml", content: "allow: [index.docker.io/library/python]\n",
			want: `images.yaml:1:9: allow[0]: "index.docker.io/library/python": Docker Hub names are normalised to docker.io; write docker.io/library/python`,
		},
		"an allow-list entry that is a short name": {
			file: "images.yaml", content: "allow: [python]\n",
			want: `images.yaml:1:9: allow[0]: "python" does not start with a registry; write the name fully qualified, such as docker.io/library/python or ghcr.io/org`,
		},
		"an allow-list entry for an official image without library/": {
			file: "images.yaml", content: "allow: [docker.io/python]\n",
			want: `images.yaml:1:9: allow[0]: "docker.io/python" is written docker.io/library/python in normalised names; write that`,
		},
		"an allow-list entry in capitals": {
			file: "images.yaml", content: "allow: [GHCR.io/taugrid]\n",
			want: `images.yaml:1:9: allow[0]: "GHCR.io/taugrid" must be lowercase, as normalised image names are`,
		},
		"an allow-list entry with a tag": {
			file: "images.yaml", content: "allow: [ghcr.io/taugrid/tau:v1]\n",
			want: `images.yaml:1:9: allow[0]: "ghcr.io/taugrid/tau:v1" names a tag or digest; list a registry or repository (runs choose the tag, images.yaml's require_digest the pinning)`,
		},
		"an unknown egress": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 0\n  max_nodes: 1\n  egress: closed\n",
			want: `profiles.yaml:5:11: profiles[0].egress: unknown egress "closed"; expected deny, cluster or open`,
		},
		"cluster egress naming no destination": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 0\n  max_nodes: 1\n  egress: cluster\n",
			want: `profiles.yaml:5:11: profiles[0].egress: cluster needs egress_to: the in-cluster destinations runs may reach (with none, write deny)`,
		},
		"destinations under deny": {
			file:    "tenants.yaml",
			content: tenantWith("  egress: deny\n  egress_to:\n  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: minio}}}]\n"),
			want:    `tenants.yaml:8:3: tenants[0].egress_to: used only with ` + "`egress: cluster`" + `; here egress is deny`,
		},
		"a destination rule with no destination": {
			file: "tenants.yaml", content: tenantWith("  egress: cluster\n  egress_to:\n  - ports: [{port: 443}]\n"),
			want: "tenants.yaml:8:5: tenants[0].egress_to[0]: names no destination (to): a rule without one admits every address, other tenants' pods included; for that, write `egress: open`",
		},
		"every namespace as a destination": {
			file: "tenants.yaml", content: tenantWith("  egress: cluster\n  egress_to:\n  - to: [{namespaceSelector: {}}]\n"),
			want: "tenants.yaml:8:30: tenants[0].egress_to[0].to[0].namespaceSelector: {} selects every namespace, other tenants' included; select the destination's namespace, such as by kubernetes.io/metadata.name",
		},
		"another tenant's namespace as a destination": {
			file: "tenants.yaml", content: tenantWith("  egress: cluster\n  egress_to:\n  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-b}}}]\n"),
			want: "tenants.yaml:8:30: tenants[0].egress_to[0].to[0].namespaceSelector: selects tenant team-b's namespace team-b; tenants' runs never reach each other (a podSelector alone selects the run's own namespace)",
		},
		"every namespace but one as a destination": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 0\n  max_nodes: 1\n  egress: cluster\n  egress_to:\n  - to:\n    - namespaceSelector:\n        matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]\n",
			want: "profiles.yaml:9:9: profiles[0].egress_to[0].to[0].namespaceSelector: selects tenant team-a's namespace team-a; tenants' runs never reach each other (a podSelector alone selects the run's own namespace)",
		},
		"every IPv4 address as a destination": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 0\n  max_nodes: 1\n  egress: cluster\n  egress_to:\n  - to: [{ipBlock: {cidr: 0.0.0.0/0}}]\n",
			want: "profiles.yaml:7:27: profiles[0].egress_to[0].to[0].ipBlock.cidr: 0.0.0.0/0 is every address, other tenants' pods included; for that, write `egress: open`",
		},
		"every IPv6 address as a destination": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 0\n  max_nodes: 1\n  egress: cluster\n  egress_to:\n  - to: [{ipBlock: {cidr: \"::/0\"}}]\n",
			want: "profiles.yaml:7:27: profiles[0].egress_to[0].to[0].ipBlock.cidr: ::/0 is every address, other tenants' pods included; for that, write `egress: open`",
		},
		"a destination port out of range": {
			file: "profiles.yaml", content: "profiles:\n- name: cpu\n  max_gpus: 0\n  max_nodes: 1\n  egress: cluster\n  egress_to:\n  - to: [{ipBlock: {cidr: 10.0.0.0/8}}]\n    ports: [{protocol: ICMP, port: 70000}]\n",
			want: "profiles.yaml:8:36: profiles[0].egress_to[0].ports[0].port: must be between 1 and 65535, got 70000",
		},
		"two default priorities": {
			file: "priorities.yaml", content: "priorities:\n- {name: a, class: x, default: true}\n- {name: b, class: y, default: true}\n",
			want: "priorities.yaml:3:32: priorities[1].default: more than one default priority",
		},
		"a default run time above the maximum": {
			file: "limits.yaml", content: "max_run_time: 1h\ndefault_run_time: 2h\n",
			want: "limits.yaml:2:19: default_run_time: 2h0m0s is longer than max_run_time (1h0m0s)",
		},
		"a worker cluster without its kubeconfig Secret": {
			file: "clusters.yaml", content: "clusters:\n- name: east\n  cluster_queues: [gpu]\n",
			want: "clusters.yaml:2:3: clusters[0].kubeconfig_secret: required: the Secret in Kueue's namespace holding the worker's kubeconfig",
		},
		"a worker cluster declared twice": {
			file: "clusters.yaml", content: "clusters:\n- {name: east, kubeconfig_secret: e, cluster_queues: [gpu]}\n- {name: east, kubeconfig_secret: f, cluster_queues: [gpu]}\n",
			want: `clusters.yaml:3:10: clusters[1].name: "east" is declared twice`,
		},
		"an idle threshold over 100%": {
			file: "limits.yaml", content: "max_retries: 1\nidle_gpu_percent: 150\n",
			want: "limits.yaml:2:19: idle_gpu_percent: must be more than 0 and at most 100, got 150",
		},
		"an idle time shorter than a reading": {
			file: "limits.yaml", content: "idle_gpu_time: 30s\n",
			want: "limits.yaml:1:16: idle_gpu_time: must be a duration of at least 1m (utilisation is read once a minute), got 30s",
		},
		"an unknown idle policy": {
			file: "limits.yaml", content: "idle_policy: kill\n",
			want: `limits.yaml:1:14: idle_policy: unknown policy "kill"; expected warn or stop`,
		},
		"a missing required file": {
			file: "images.yaml", content: "",
			want: "reading policy file images.yaml: open images.yaml: file does not exist",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fsys := examplePolicyFS(t)
			if tc.content == "" {
				delete(fsys, tc.file)
			} else {
				fsys[tc.file] = &fstest.MapFile{Data: []byte(tc.content)}
			}
			pol, err := LoadPolicy(fsys)
			if err == nil {
				t.Fatalf("policy accepted: %+v", pol)
			}
			if pol != nil {
				t.Error("a broken policy returned a policy as well as an error")
			}
			if !slices.Contains(strings.Split(err.Error(), "\n"), tc.want) {
				t.Errorf("errors lack %q; got:\n%v", tc.want, err)
			}
		})
	}
}

// tenantWith is a tenants.yaml of team-a, with extra keys, and team-b.
func tenantWith(extra string) string {
	return "tenants:\n- name: team-a\n  namespace: team-a\n  queues: [runs]\n  default_profile: cpu\n" + extra +
		"- name: team-b\n  namespace: team-b\n  queues: [runs]\n  default_profile: cpu\n"
}

func TestTheIdleGPURuleIsOffUnlessSetAndFilledByDefaults(t *testing.T) {
	tests := map[string]struct {
		limits string
		want   *IdleRule
	}{
		"none set":        {limits: "max_retries: 1\n", want: nil},
		"only the policy": {limits: "idle_policy: stop\n", want: &IdleRule{BelowPercent: 5, For: 30 * time.Minute, Action: IdleStop}},
		"only the threshold": {limits: "idle_gpu_percent: 2\n",
			want: &IdleRule{BelowPercent: 2, For: 30 * time.Minute, Action: IdleWarn}},
		"all three": {limits: "idle_gpu_percent: 10\nidle_gpu_time: 1h\nidle_policy: warn\n",
			want: &IdleRule{BelowPercent: 10, For: time.Hour, Action: IdleWarn}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fsys := examplePolicyFS(t)
			fsys["limits.yaml"] = &fstest.MapFile{Data: []byte(tc.limits)}
			pol, err := LoadPolicy(fsys)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, pol.Limits.IdleGPUs()); diff != "" {
				t.Errorf("idle rule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyDigestChangesWithAnyFile(t *testing.T) {
	fsys := examplePolicyFS(t)
	a, err := LoadPolicy(fsys)
	if err != nil {
		t.Fatal(err)
	}
	fsys["limits.yaml"] = &fstest.MapFile{Data: append(fsys["limits.yaml"].Data, "# a comment\n"...)}
	b, err := LoadPolicy(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest == b.Digest {
		t.Errorf("digest %s did not change when limits.yaml did", a.Digest)
	}
}

func TestTenantRepositoryPatterns(t *testing.T) {
	tn := Tenant{Repositories: []string{"https://git.example.com/team-a/*"}}
	for url, want := range map[string]bool{
		"https://git.example.com/team-a/llm":       true,
		"https://git.example.com/team-a/llm/extra": false,
		"https://git.example.com/team-b/llm":       false,
		"https://git.example.com/team-a-evil/llm":  false,
	} {
		if got := tn.AllowsRepository(url); got != want {
			t.Errorf("AllowsRepository(%q) = %v, want %v", url, got, want)
		}
	}
}

func TestProfilePodAnnotationsGoOnEveryPod(t *testing.T) {
	pol := examplePolicy(t)
	for i := range pol.Profiles {
		pol.Profiles[i].PodAnnotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
	}
	for _, file := range []string{"../examples/research/tau.yaml", "../examples/research/tau/ray.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := renderFile(pol, filepath.Base(file), data)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := Marshal(objs, FormatYAML)
		if n := strings.Count(string(out), "cluster-autoscaler.kubernetes.io/safe-to-evict"); n == 0 {
			t.Errorf("%s: no pod carries the profile's annotation", file)
		}
	}
}

// A tenant asks only for the default priority and those the platform
// gives it; another tenant's are refused with the list it may use.
func TestATenantPicksOnlyThePrioritiesItIsGiven(t *testing.T) {
	pol := examplePolicy(t)
	tests := map[string]struct {
		tenant, priority string
		want             string // the class, or the error
	}{
		"the default, unnamed":        {"team-b", "", "tau-normal"},
		"the default, named":          {"team-b", "normal", "tau-normal"},
		"one the tenant is given":     {"team-a", "high", "tau-high"},
		"one given to another tenant": {"team-b", "high", `tau.yaml:12:13: policy.priority: priority "high" is not one tenant team-b may use; it may use low, normal (tenants[].priorities in the platform repo)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := "schema_version: 1\nentrypoint: train.py\nruntime:\n  image: python:3.12-slim\ncompute:\n  cpu: \"2\"\npolicy:\n  profile: cpu\n"
			if tc.priority != "" {
				file += "\n\n\n  priority: " + tc.priority + "\n"
			}
			rc, err := LoadConfig("tau.yaml", []byte(file))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := Resolve(rc, pol, tc.tenant, testRun)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = plan.PriorityClass
			}
			if got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// The Secrets TauGrid reads for the namespace's repositories are never a
// run's, even where the tenant's list would match them.
func TestARunNeverReadsItsRepositorysCredentials(t *testing.T) {
	pol := examplePolicy(t)
	file := "schema_version: 1\nentrypoint: train.py\nruntime:\n  image: python:3.12-slim\n  env_secret:\n    STOLEN: wandb-git-credentials:password\n    KEY: wandb-key:key\n"
	rc, err := LoadConfig("tau.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	run := testRun
	run.ProtectedSecrets = []string{"wandb-git-credentials"}
	_, err = Resolve(rc, pol, "team-a", run)
	want := `tau.yaml:6:13: runtime.env_secret.STOLEN: Secret "wandb-git-credentials" holds this repository's credentials; runs may never read it`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	run.ProtectedSecrets = nil
	if _, err := Resolve(rc, pol, "team-a", run); err != nil {
		t.Errorf("a Secret the tenant is given, not a repository's: %v", err)
	}
}
