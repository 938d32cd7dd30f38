package render

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// topologyKueue declares a Topology of blocks, racks and hosts and the TAS
// flavor of the nodes it describes.
const topologyKueue = `apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: gpu-fabric
spec:
  levels:
  - nodeLabel: example.com/topology-block
  - nodeLabel: example.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h200-tas
spec:
  topologyName: gpu-fabric
  nodeLabels:
    example.com/pool: tas
`

// topologyProfiles are profiles on that topology: one free, one that keeps
// every multi-node run in one block, and one that offers MIG slices.
const topologyProfiles = `
- name: fabric
  node_selector: {nvidia.com/gpu.product: NVIDIA-H200}
  topology: gpu-fabric
  max_gpus: 64
  max_nodes: 8
  defaults: {gpus: 8, cpu: "48", memory: 512Gi, head_cpu: "4", head_memory: 16Gi}
- name: fabric-block
  node_selector: {nvidia.com/gpu.product: NVIDIA-H200}
  topology: gpu-fabric
  multi_node_placement: same-block
  max_gpus: 64
  max_nodes: 8
  defaults: {gpus: 8, cpu: "48", memory: 512Gi}
- name: mig
  node_selector: {nvidia.com/mig.config: all-balanced}
  mig_profiles: [1g.18gb, 3g.71gb]
  max_gpus: 1
  max_nodes: 1
  defaults: {gpus: 0, cpu: "4", memory: 32Gi}
`

// topologyPolicyFS is the example platform plus the topology above, with
// team-a allowed the new profiles and only the 1g.18gb slice.
func topologyPolicyFS(t testing.TB) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(examplePolicyDir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(examplePolicyDir + "/" + p)
		fsys[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fsys["kueue/topology.yaml"] = &fstest.MapFile{Data: []byte(topologyKueue)}
	fsys["profiles.yaml"].Data = append(fsys["profiles.yaml"].Data, topologyProfiles...)
	tenants := strings.Replace(string(fsys["tenants.yaml"].Data), "profiles: [cpu, h200-1, h200-8]",
		"profiles: [cpu, h200-1, h200-8, fabric, fabric-block, mig]\n  mig_profiles: [1g.18gb]", 1)
	fsys["tenants.yaml"].Data = []byte(tenants)
	return fsys
}

func topologyPolicy(t testing.TB) *Policy {
	t.Helper()
	pol, err := LoadPolicy(topologyPolicyFS(t))
	if err != nil {
		t.Fatalf("loading the topology policy: %v", err)
	}
	return pol
}

const tauHead = "schema_version: 1\nentrypoint: train.py\nruntime: {image: ghcr.io/taugrid/pytorch:2.5}\n"

func TestPlacementRendersKueueTASAnnotations(t *testing.T) {
	pol := topologyPolicy(t)
	for name, tc := range map[string]struct {
		tau           string
		want          map[string]string // the GPU pods' annotations
		onePerHost    bool
		wantSubmitter map[string]string
	}{
		"two nodes in one rack": {
			tau:        "execution: {launcher: torchrun}\ncompute: {nodes: 2, placement: same-rack}\npolicy: {profile: fabric}\n",
			want:       map[string]string{AnnotationRequiredTopology: "example.com/topology-rack"},
			onePerHost: true,
		},
		"in one rack if it has room": {
			tau:        "execution: {launcher: torchrun}\ncompute: {nodes: 2, placement: prefer-same-rack}\npolicy: {profile: fabric}\n",
			want:       map[string]string{AnnotationPreferredTopology: "example.com/topology-rack"},
			onePerHost: true,
		},
		"one pod on the topology, anywhere": {
			tau:  "policy: {profile: fabric}\n",
			want: map[string]string{AnnotationUnconstrainedTopology: "true"},
		},
		"a CPU-only pod on a topology profile carries nothing": {
			tau: "compute: {gpus: 0}\npolicy: {profile: fabric}\n",
		},
		"no topology, no annotation": {
			tau: "policy: {profile: h200-1}\n",
		},
		"the profile puts multi-node runs in one block": {
			tau:        "execution: {launcher: torchrun}\ncompute: {nodes: 4}\npolicy: {profile: fabric-block}\n",
			want:       map[string]string{AnnotationRequiredTopology: "example.com/topology-block"},
			onePerHost: true,
		},
		"a run may ask tighter than the profile requires": {
			tau:        "execution: {launcher: torchrun}\ncompute: {nodes: 2, placement: same-rack}\npolicy: {profile: fabric-block}\n",
			want:       map[string]string{AnnotationRequiredTopology: "example.com/topology-rack"},
			onePerHost: true,
		},
		"a Ray head and its workers in one block": {
			tau:           "compute: {workers: 2, placement: same-block}\npolicy: {profile: fabric}\n",
			want:          map[string]string{AnnotationRequiredTopology: "example.com/topology-block", AnnotationPodSetGroup: "ray"},
			wantSubmitter: map[string]string{AnnotationUnconstrainedTopology: "true"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := renderFile(pol, "tau.yaml", []byte(tauHead+tc.tau))
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, objs)
			switch w := objs[0].(type) {
			case *batchv1.Job:
				checkAnnotations(t, "the Job's pods", w.Spec.Template.Annotations, tc.want)
				a := w.Spec.Template.Spec.Affinity
				if got := a != nil && a.PodAntiAffinity != nil; got != tc.onePerHost {
					t.Errorf("one pod per host = %v, want %v", got, tc.onePerHost)
				}
				// The host slot keeps them apart for Kueue's TAS, which reads no affinity.
				res := w.Spec.Template.Spec.Containers[0].Resources
				req, lim := res.Requests[taugridv1.ResourceHostSlot], res.Limits[taugridv1.ResourceHostSlot]
				if got := req.Value() == 1 && lim.Value() == 1; got != tc.onePerHost {
					t.Errorf("a host slot asked = %v (requests %v), want %v", got, res.Requests, tc.onePerHost)
				}
			case *rayv1.RayJob:
				rc := w.Spec.RayClusterSpec
				checkAnnotations(t, "the Ray head", rc.HeadGroupSpec.Template.Annotations, tc.want)
				checkAnnotations(t, "the Ray workers", rc.WorkerGroupSpecs[0].Template.Annotations, tc.want)
				checkAnnotations(t, "the Ray job submitter", w.Spec.SubmitterPodTemplate.Annotations, tc.wantSubmitter)
			}
		})
	}
}

func checkAnnotations(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k := range got {
		if strings.HasPrefix(k, "kueue.x-k8s.io/") && want[k] == "" {
			t.Errorf("%s carry %s=%s, not wanted", what, k, got[k])
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

func TestMIGRendersOneSliceOfTheProfile(t *testing.T) {
	objs, err := renderFile(topologyPolicy(t), "tau.yaml", []byte(tauHead+"compute: {mig: 1g.18gb}\npolicy: {profile: mig}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res := objs[0].(*batchv1.Job).Spec.Template.Spec.Containers[0].Resources
	if q := res.Limits["nvidia.com/mig-1g.18gb"]; q.Value() != 1 {
		t.Errorf("limits %v lack one nvidia.com/mig-1g.18gb", res.Limits)
	}
	if _, whole := res.Requests[corev1.ResourceName("nvidia.com/gpu")]; whole {
		t.Errorf("a MIG run also asks whole GPUs: %v", res.Requests)
	}
}

// Every refusal names the tau file's line and says what would work.
func TestPlacementAndMIGRefusalsNameTheLine(t *testing.T) {
	pol := topologyPolicy(t)
	for name, tc := range map[string]struct{ tau, want string }{
		"a level the topology lacks": {
			"execution: {launcher: torchrun}\ncompute:\n  nodes: 2\n  placement: same-zone\npolicy: {profile: fabric}\n",
			"tau.yaml:7:14: compute.placement: topology gpu-fabric of profile \"fabric\" has no level \"zone\"; expected one of: any, same-host, same-rack, same-block",
		},
		"placement on a profile without topology": {
			"compute:\n  placement: same-rack\npolicy: {profile: h200-1}\n",
			"tau.yaml:5:14: compute.placement: profile \"h200-1\" places pods by no topology",
		},
		"looser than the profile requires": {
			"execution: {launcher: torchrun}\ncompute:\n  nodes: 2\n  placement: prefer-same-block\npolicy: {profile: fabric-block}\n",
			"tau.yaml:7:14: compute.placement: profile \"fabric-block\" requires every multi-node run in one block",
		},
		"two nodes cannot share a host": {
			"execution: {launcher: torchrun}\ncompute:\n  nodes: 2\n  placement: same-host\npolicy: {profile: fabric}\n",
			"tau.yaml:7:14: compute.placement: a multi-node run has one pod per host",
		},
		"not a placement": {
			"compute:\n  placement: together\npolicy: {profile: fabric}\n",
			"tau.yaml:5:14: compute.placement: unknown placement \"together\"",
		},
		"a MIG profile the tenant may not use": {
			"compute:\n  mig: 3g.71gb\npolicy: {profile: mig}\n",
			"tau.yaml:5:8: compute.mig: MIG profile 3g.71gb is not one tenant team-a may use on profile \"mig\"; it may use: 1g.18gb",
		},
		"a MIG slice on a profile without MIG": {
			"compute:\n  mig: 1g.18gb\npolicy: {profile: h200-1}\n",
			"tau.yaml:5:8: compute.mig: MIG profile 1g.18gb is not one tenant team-a may use on profile \"h200-1\"; it may use: none",
		},
		"whole GPUs and a slice at once": {
			"compute:\n  gpus: 1\n  mig: 1g.18gb\npolicy: {profile: mig}\n",
			"tau.yaml:6:8: compute.mig: a pod asks either whole GPUs (compute.gpus: 1) or one MIG slice (compute.mig: 1g.18gb), not both",
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := renderFile(pol, "tau.yaml", []byte(tauHead+tc.tau))
			if err == nil {
				t.Fatalf("rendered %d objects, want the refusal %q", len(objs), tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got\n %v\nwant it to start\n %s", err, tc.want)
			}
		})
	}
}

func TestPlatformTopologyRefusalsNameFileAndLine(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(fstest.MapFS)
		want string
	}{
		"hostname not the lowest level": {
			func(f fstest.MapFS) {
				f["kueue/topology.yaml"].Data = []byte(strings.Replace(topologyKueue,
					"  - nodeLabel: example.com/topology-rack\n  - nodeLabel: kubernetes.io/hostname\n",
					"  - nodeLabel: kubernetes.io/hostname\n  - nodeLabel: example.com/topology-rack\n", 1))
			},
			"kueue/topology.yaml:1:1: Topology gpu-fabric: spec.levels: topology gpu-fabric: kubernetes.io/hostname must be the lowest (last) level, found at level 2 of 3",
		},
		"a TAS flavor without node labels": {
			func(f fstest.MapFS) {
				f["kueue/topology.yaml"].Data = []byte(strings.Replace(topologyKueue, "  nodeLabels:\n    example.com/pool: tas\n", "", 1))
			},
			"kueue/topology.yaml:11:1: ResourceFlavor h200-tas: spec.nodeLabels: required with spec.topologyName",
		},
		"a topology no flavor places pods by (its flavor's topologyName removed)": {
			func(f fstest.MapFS) {
				f["kueue/topology.yaml"].Data = []byte(strings.Replace(topologyKueue, "  topologyName: gpu-fabric\n", "", 1))
			},
			`.topology: no ResourceFlavor under kueue/ places pods by Topology "gpu-fabric" (spec.topologyName)`,
		},
		"a profile naming no declared topology": {
			func(f fstest.MapFS) { delete(f, "kueue/topology.yaml") },
			"profiles.yaml:",
		},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := topologyPolicyFS(t)
			tc.edit(fsys)
			_, err := LoadPolicy(fsys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadPolicy = %v, want %q", err, tc.want)
			}
		})
	}
}
