package policy

import (
	"testing"
	"testing/fstest"
)

func TestLocateFindsTheDocumentThatDeclaresAnObject(t *testing.T) {
	tree := fstest.MapFS{
		"kueue/a.yaml": {Data: []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n")},
		"kueue/flavors.yaml": {Data: []byte("# the GPU flavors\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: cpu\n---\n" +
			"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: h200\nspec:\n  topologyName: fabric\n")},
		"kueue/queues.yaml": {Data: []byte("kind: LocalQueue\nmetadata:\n  name: runs\n  namespace: team-b\n")},
	}
	cases := []struct {
		kind, ns, name string
		file           string
		line           int
	}{
		{"ResourceFlavor", "", "h200", "kueue/flavors.yaml", 7},
		{"ResourceFlavor", "", "cpu", "kueue/flavors.yaml", 2},
		{"LocalQueue", "team-b", "runs", "kueue/queues.yaml", 1},
		{"LocalQueue", "team-a", "runs", "", 0},
		{"ClusterQueue", "", "h200", "", 0},
	}
	for _, c := range cases {
		file, line, ok := Locate(tree, c.kind, c.ns, c.name)
		if file != c.file || line != c.line || ok != (c.file != "") {
			t.Errorf("Locate(%s %s/%s) = %s:%d %v, want %s:%d", c.kind, c.ns, c.name, file, line, ok, c.file, c.line)
		}
	}
}
