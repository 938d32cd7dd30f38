package impact

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// examplePlatform is examples/platform with files replaced: edits maps a
// file to its new content, or to "" to delete it.
func examplePlatform(t *testing.T, edits map[string]string) fstest.MapFS {
	t.Helper()
	tree := fstest.MapFS{}
	root := os.DirFS("../../examples/platform")
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, p)
		tree[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for f, data := range edits {
		if data == "" {
			delete(tree, f)
			continue
		}
		tree[f] = &fstest.MapFile{Data: []byte(data)}
	}
	return tree
}

// load loads a platform tree or fails the test.
func load(t *testing.T, label string, tree fs.FS) *Policy {
	t.Helper()
	p, err := Load(tree, label)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// edited replaces old with new in one of the example's files.
func edited(t *testing.T, file, old, new string) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/platform/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	return strings.Replace(string(data), old, new, 1)
}

// runBuilder makes a Run as RunOf would.
type runBuilder struct{ r Run }

func makeRun(name, ns string) *runBuilder {
	return &runBuilder{Run{Namespace: ns, Name: name, Repository: "llm", Phase: taugridv1.PhaseQueued,
		Submitted: true, Queue: "runs", Images: []string{"nvcr.io/nvidia/pytorch:24.05-py3"}}}
}

func (b *runBuilder) running() *runBuilder {
	b.r.Phase, b.r.Admitted = taugridv1.PhaseRunning, true
	return b
}

func (b *runBuilder) pending() *runBuilder {
	b.r.Phase, b.r.Submitted = taugridv1.PhasePending, false
	b.r.Images, b.r.Queue = nil, ""
	return b
}

// gpus asks for n H200s on pods pods under profile.
func (b *runBuilder) gpus(profile string, n, pods int64) *runBuilder {
	b.r.Profiles = []string{profile}
	b.r.GPUs, b.r.Pods = n, pods
	b.r.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}
	b.r.Requests = corev1.ResourceList{
		"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI),
		"cpu":            *resource.NewQuantity(6*n, resource.DecimalSI),
	}
	return b
}

func (b *runBuilder) priority(class string) *runBuilder {
	b.r.PriorityClass = class
	return b
}

func (b *runBuilder) image(img string) *runBuilder {
	b.r.Images = []string{img}
	return b
}

func (b *runBuilder) obj() Run { return b.r }

func repository(name, ns, url string) taugridv1.TauRepository {
	return taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: url}}}
}

func node(name string, labels map[string]string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}
