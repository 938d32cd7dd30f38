package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// applyManifests creates every object in the YAML files on the API server.
func applyManifests(t *testing.T, files ...string) {
	t.Helper()
	for _, file := range files {
		for _, u := range readManifests(t, file) {
			if err := env.Client.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: creating %s %s: %v", file, u.GetKind(), u.GetName(), err)
			}
		}
	}
}

func readManifests(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// agentClient talks to the API server as the agent's service account would from
// a pod on node: the token names the node.
func agentClient(t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:taugrid-system:tau-nodeagent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:taugrid-system", "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTheAgentMayChangeOnlyWhatItOwnsOnItsOwnNode applies deploy/rbac.yaml and
// deploy/admission.yaml, runs the agent as its service account, and checks that
// it can do its job and nothing else.
func TestTheAgentMayChangeOnlyWhatItOwnsOnItsOwnNode(t *testing.T) {
	admin := apiServer(t)
	applyManifests(t, "deploy/rbac.yaml", "deploy/admission.yaml")
	gpuNode(t, admin, "own-node")
	gpuNode(t, admin, "other-node")
	agent := agentClient(t, "own-node")
	ctx := context.Background()

	// The policy takes a moment to be in force: wait until a write to another
	// node is refused by it.
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := patchTaints(ctx, agent, "other-node")
		if err != nil && strings.Contains(err.Error(), "may change only the Node its pod runs on") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("patching another node's taints: err = %v, want it refused by the admission policy", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	f := newFakeNVML(t)
	a := newTestAgent(t, f, agent, nil, func(c *Config) {
		kubeConfig("own-node")(c)
		c.GPUNodeSelector = "nvidia.com/gpu.present=true"
		c.Breaker.MaxShare = 1
	})
	run(t, a)
	waitNode(t, admin, "own-node", 10*time.Second, "healthy", isHealthy)
	waitHostSlot(t, admin, "own-node")
	f.xid(2, 79)
	waitNode(t, admin, "own-node", 5*time.Second, "tainted", isUnhealthy)
	waitEvents(t, admin, "own-node", map[string][]string{ReasonHealthy: {"Normal"}, ReasonXIDFatal: {"Warning", "Warning"}})

	refused := map[string]struct {
		do   func() error
		want string
	}{
		"labels of its own node": {
			do: func() error {
				return patch(ctx, agent, "own-node", `{"metadata":{"labels":{"nvidia.com/gpu.present":"false"}}}`, "")
			},
			want: "may not change a Node's labels",
		},
		"another taint on its own node": {
			do:   func() error { return patch(ctx, agent, "own-node", `{"spec":{"taints":null}}`, "") },
			want: "may change only the taugrid.dev/gpu-unhealthy taint",
		},
		"cordoning its own node": {
			do:   func() error { return patch(ctx, agent, "own-node", `{"spec":{"unschedulable":true}}`, "") },
			want: "may not change a Node's spec",
		},
		"another annotation": {
			do: func() error {
				return patch(ctx, agent, "own-node", `{"metadata":{"annotations":{"`+AnnotationResetAt+`":"2030-01-01T00:00:00Z"}}}`, "")
			},
			want: "may change only the taugrid.dev/gpu-health annotation",
		},
		"a GPU more in its own node's capacity": {
			do: func() error {
				return patch(ctx, agent, "own-node", `{"status":{"capacity":{"nvidia.com/gpu":"16"}}}`, "status")
			},
			want: "may change only the taugrid.dev/host slot of a Node's capacity, to 1",
		},
		"two host slots": {
			do: func() error {
				return patch(ctx, agent, "own-node", `{"status":{"allocatable":{"taugrid.dev/host":"2"}}}`, "status")
			},
			want: "may change only the taugrid.dev/host slot of a Node's capacity, to 1",
		},
		"the Ready condition": {
			do: func() error {
				return patch(ctx, agent, "own-node", `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Nope"}]}}`, "status")
			},
			want: "may change only the TauGPUHealthy condition",
		},
		"another node's condition": {
			do: func() error {
				return patch(ctx, agent, "other-node", `{"status":{"conditions":[{"type":"TauGPUHealthy","status":"False","reason":"Nope"}]}}`, "status")
			},
			want: "may change only the Node its pod runs on",
		},
		"deleting its node": {
			do:   func() error { return agent.CoreV1().Nodes().Delete(ctx, "own-node", metav1.DeleteOptions{}) },
			want: "forbidden",
		},
		"reading secrets": {
			do: func() error {
				_, err := agent.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
				return err
			},
			want: "forbidden",
		},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			err := tc.do()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it refused with %q", err, tc.want)
			}
		})
	}
}

func patchTaints(ctx context.Context, c kubernetes.Interface, node string) error {
	return patch(ctx, c, node, `{"spec":{"taints":[{"key":"`+TaintKey+`","effect":"NoSchedule"}]}}`, "")
}

func patch(ctx context.Context, c kubernetes.Interface, node, body, subresource string) error {
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, sub...)
	return err
}

// TestDaemonSetManifest checks what the agent relies on from its DaemonSet: the
// node name from the downward API, tolerating its own taint, its service
// account, probes on /healthz, and the kubelet's PodResources socket, which it
// reads as user 0 holding no capability.
func TestDaemonSetManifest(t *testing.T) {
	us := readManifestsFile(t, "deploy/daemonset.yaml")
	if len(us) != 1 {
		t.Fatalf("%d objects, want 1", len(us))
	}
	var ds appsv1.DaemonSet
	b, err := yaml.Marshal(us[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &ds); err != nil {
		t.Fatalf("deploy/daemonset.yaml is not a valid DaemonSet: %v", err)
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	got := map[string]string{
		"serviceAccount": spec.ServiceAccountName,
		"nodeName":       envFieldPath(c.Env, "NODE_NAME"),
		"tolerates":      string(spec.Tolerations[0].Operator) + spec.Tolerations[0].Key,
		"liveness":       c.LivenessProbe.HTTPGet.Path,
		"uid":            fmt.Sprint(*c.SecurityContext.RunAsUser),
		"capabilities":   fmt.Sprint(c.SecurityContext.Capabilities.Drop, c.SecurityContext.Capabilities.Add),
		"podResources":   c.VolumeMounts[0].MountPath + " " + spec.Volumes[0].HostPath.Path,
	}
	want := map[string]string{
		"serviceAccount": "tau-nodeagent", "nodeName": "spec.nodeName", "tolerates": "Exists",
		"liveness": "/healthz", "uid": "0", "capabilities": "[ALL] []",
		"podResources": "/var/lib/kubelet/pod-resources /var/lib/kubelet/pod-resources",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

func readManifestsFile(t *testing.T, file string) []map[string]any {
	var out []map[string]any
	for _, u := range readManifests(t, file) {
		out = append(out, u.Object)
	}
	return out
}

func envFieldPath(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

// waitHostSlot waits until the node offers one host slot in its capacity
// and allocatable, as the agent advertises it.
func waitHostSlot(t *testing.T, c kubernetes.Interface, node string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, n := viewNode(t, c, node)
		capacity, allocatable := n.Status.Capacity[taugridv1.ResourceHostSlot], n.Status.Allocatable[taugridv1.ResourceHostSlot]
		if capacity.Value() == 1 && allocatable.Value() == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s offers no host slot: capacity %v, allocatable %v", node, n.Status.Capacity, n.Status.Allocatable)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
