package policy

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"sort"

	"go.yaml.in/yaml/v3"
)

// Locate finds where under kueue/ the platform repo declares the object of
// this kind, namespace and name: its file and the line its document starts
// on, for an error the cluster gave about it. ok is false when no document
// declares it (an object TauGrid added, such as a tenant's RoleBinding).
func Locate(tree fs.FS, kind, namespace, name string) (file string, line int, ok bool) {
	files, err := fs.Glob(tree, path.Join(QueuesDir, "*.yaml"))
	if err != nil {
		return "", 0, false
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := fs.ReadFile(tree, f)
		if err != nil {
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) || err != nil {
				break
			}
			if len(n.Content) == 0 {
				continue
			}
			var doc struct {
				Kind     string `yaml:"kind"`
				Metadata struct {
					Name      string `yaml:"name"`
					Namespace string `yaml:"namespace"`
				} `yaml:"metadata"`
			}
			if n.Decode(&doc) != nil {
				continue
			}
			if doc.Kind == kind && doc.Metadata.Name == name && doc.Metadata.Namespace == namespace {
				return f, n.Content[0].Line, true
			}
		}
	}
	return "", 0, false
}
